import Foundation
import Testing

@testable import FlatSync

/// `refused-changes.plist`: what it keeps, and that damage is noticed rather than read as other refusals.
@Suite struct RefusedChangesFileTests {
    static let refusals = [
        RefusedChange(
            recordID: RecordID(zone: .readingHistory, name: "rh-a"), isDelete: false, code: .invalidArguments,
            serverErrorCode: "BAD_REQUEST",
            reason: "Cannot create or modify field 'x' in record 'ReadingHistoryItem' in production schema",
            refusedAt: Date(timeIntervalSince1970: 1_800_000_000)),
        RefusedChange(
            recordID: RecordID(zone: .readingList, name: "rl-b"), isDelete: true, code: .internalError,
            serverErrorCode: nil, reason: "no", refusedAt: Date(timeIntervalSince1970: 1_800_000_001)),
    ]

    @Test func roundTrips() throws {
        let data = try RefusedChangesFile.encoded(Self.refusals)
        #expect(try RefusedChangesFile.decode(data, path: "f") == Self.refusals)
        #expect(try RefusedChangesFile.decode(try RefusedChangesFile.encoded([]), path: "f").isEmpty)
    }

    @Test func everyFlippedByteIsDamageNeverOtherRefusals() throws {
        let data = try RefusedChangesFile.encoded(Self.refusals)
        for index in data.indices {
            var damaged = data
            damaged[index] ^= 0x5A
            do {
                let decoded = try RefusedChangesFile.decode(damaged, path: "f")
                #expect(decoded == Self.refusals, "byte \(index): a change that decodes must decode to the same")
            } catch {
                #expect(error.code == .damagedFile || error.code == .unsupportedFormatVersion, "byte \(index)")
            }
        }
    }

    @Test func aLaterFormatIsRefusedAsSuch() throws {
        let payload = try BinaryPropertyList.encode(Self.refusals, what: "test")
        var file = RefusedChangesFile(refusals: payload, checksum: CRC32.checksum(payload))
        file.formatVersion = 2
        let error = #expect(throws: FlatSyncError.self) {
            try RefusedChangesFile.decode(try BinaryPropertyList.encode(file, what: "test"), path: "f")
        }
        #expect(error?.code == .unsupportedFormatVersion)
    }
}

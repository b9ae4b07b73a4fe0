import Foundation
import Testing

@testable import FlatSync

@Suite struct SnapshotFileTests {
    private static func historyState(count: Int) -> ZoneState<ReadingHistoryItem> {
        var state = ZoneState<ReadingHistoryItem>()
        let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
        for i in 0..<count {
            let item = ReadingHistoryItem(
                articleID: "article-\(i)", lastVisited: i % 3 == 0 ? nil : now.addingTimeInterval(Double(i)),
                firstSeen: now, maxVersionSeen: Int64(i % 5), readCount: Int64(i % 7), deviceID: i % 2 == 0 ? "d" : nil,
                liking: .init(rawValue: Int64(i % 3))!, likingChangedAt: i % 4 == 0 ? now : nil,
                flags: .init(rawValue: Int64(i % 32))
            )
            state.items[item.articleID] = item
            state.setChangeTag(ChangeTag("tag-\(i)"), of: "rh-article-\(i)")
        }
        state.changeToken = ChangeToken(data: Data([1, 2, 3]))
        state.appliedThroughSequence = 42
        state.createdSinceFetch = ["rh-article-1", "rh-article-2"]
        state.skippedVersions = ["rh-article-3": ChangeTag("t-9")]
        state.unknownFields = [
            "rh-article-4": [
                "summary": .string("another app's"), "scores": .list([.int(1)]),
                "source": .reference(RecordReference(recordName: "rl-x", zoneName: "ReadingList", action: .validate)),
                "place": .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":1}"#)),
            ],
            "rh-article-5": ["empty": .list([])],
        ]
        state.sendWhole = ["rh-article-6", "rh-article-7"]
        // Host records' merge bases and saves of unknown fate (a host record may live in a built-in zone).
        state.mergeBases = ["note-1": ["text": .string("server's"), "count": .int(3)], "note-2": [:]]
        state.savesOfUnknownFate = ["note-1", "note-3"]
        state.unconfirmedByReset = ["rh-article-8", "rh-article-9"]
        return state
    }

    @Test func historyStateRoundTrips() throws {
        let state = Self.historyState(count: 500)
        let data = try SnapshotFile(state).encoded()
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "test")
        #expect(decoded.items == state.items)
        #expect(decoded.changeTagsByName == state.changeTagsByName)
        #expect(decoded.changeToken == state.changeToken)
        #expect(decoded.appliedThroughSequence == 42)
        #expect(decoded.createdSinceFetch == state.createdSinceFetch)
        #expect(decoded.skippedVersions == state.skippedVersions)
        #expect(decoded.unknownFields == state.unknownFields)
        #expect(decoded.sendWhole == state.sendWhole)
        #expect(decoded.mergeBases == state.mergeBases)
        #expect(decoded.savesOfUnknownFate == state.savesOfUnknownFate)
        #expect(decoded.unconfirmedByReset == state.unconfirmedByReset)
    }

    /// A reset under way in an empty zone has nothing to confirm, which is not the same as no reset.
    @Test func aResetWithNothingToConfirmIsStillAReset() throws {
        var state = ZoneState<ReadingListEntry>()
        state.unconfirmedByReset = []
        let data = try SnapshotFile(state).encoded()
        let decoded = try SnapshotFile.decodeState(of: ReadingListEntry.self, from: data, path: "t")
        #expect(decoded.unconfirmedByReset == [])
    }

    /// Device IDs are read sharing equal strings (a few recent ones); any mix must still come back exactly.
    @Test func deviceIDsRoundTripWhateverTheirMix() throws {
        let devices: [String?] = [
            "A", "B", "", "é-device-🙂", nil, "C", "D", "E", "F", "A", String(repeating: "x", count: 300),
        ]
        var state = ZoneState<ReadingHistoryItem>()
        for i in 0..<400 {
            let item = ReadingHistoryItem(articleID: "a\(i)", deviceID: devices[(i * 7 + i / 13) % devices.count])
            state.items[item.articleID] = item
        }
        let data = try SnapshotFile(state).encoded()
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "test")
        #expect(decoded.items == state.items)

        var writer = BinaryWriter()
        let strings = (0..<200).map { devices[($0 * 5) % devices.count] ?? "" }
        for string in strings { writer.write(string) }
        let read = try Data(writer.bytes).withBinaryReader { (reader) throws(FlatSyncError) -> [String] in
            var recent: [String] = []
            var read: [String] = []
            while !reader.isAtEnd { read.append(try reader.readString(reusing: &recent)) }
            #expect(recent.count <= 4)
            return read
        }
        #expect(read == strings)
        // A length past the end is still damage, not a crash.
        expectError(.damagedFile) {
            try Data([5, 65, 66]).withBinaryReader { (reader) throws(FlatSyncError) in
                var recent = ["AB"]
                _ = try reader.readString(reusing: &recent)
            }
        }
    }

    @Test func readingListStateRoundTripsAndIsABinaryPropertyList() throws {
        var state = ZoneState<ReadingListEntry>()
        for i in 0..<50 {
            state.items["a\(i)"] = ReadingListEntry(
                articleID: "a\(i)", dateAdded: Date(timeIntervalSince1970: Double(i)), origin: Int64(i % 4),
                title: i % 2 == 0 ? "Title \(i) ✓" : nil
            )
        }
        let data = try SnapshotFile(state).encoded()
        #expect(data.prefix(8) == Data("bplist00".utf8))
        let decoded = try SnapshotFile.decodeState(of: ReadingListEntry.self, from: data, path: "t")
        #expect(decoded.items == state.items)
        #expect(decoded.changeToken == nil)
        #expect(decoded.unconfirmedByReset == nil)
    }

    @Test func everyFlippedByteIsDetectedOrHarmless() throws {
        let state = Self.historyState(count: 20)
        let original = try SnapshotFile(state).encoded()
        var detected = 0
        for index in original.indices {
            var damaged = original
            damaged[index] ^= 0x20
            do {
                let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: damaged, path: "t")
                // A flip in plist structure that still decodes to the same content loses nothing.
                #expect(
                    decoded.items == state.items && decoded.changeTagsByName == state.changeTagsByName, "byte \(index)")
            } catch {
                #expect(error.code == .damagedFile || error.code == .unsupportedFormatVersion, "byte \(index)")
                detected += 1
            }
        }
        #expect(detected > original.count * 9 / 10)
    }

    /// Format 1 kept each history item's device ID in the item's row; format 2 keeps each ID once. A device
    /// directory written before reads as it did.
    @Test func aFormatOneHistorySnapshotStillReads() throws {
        let state = Self.historyState(count: 300)
        var file = SnapshotFile(state)
        #expect(file.formatVersion == 2 && file.columns["deviceID"] == nil)
        var devices = BinaryWriter()
        for item in state.items.values { devices.write(item.deviceID) }
        file.columns["deviceIDs"] = nil
        file.columns["deviceIndex"] = nil
        file.columns["deviceID"] = devices.data
        file.formatVersion = 1
        file.updateChecksum()
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: try file.encoded(), path: "t")
        #expect(decoded.items == state.items)
        #expect(decoded.changeTagsByName == state.changeTagsByName)
    }

    @Test func anotherFormatVersionIsReportedAsSuch() throws {
        var file = SnapshotFile(ZoneState<ReadingListEntry>())
        file.formatVersion = 99
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        expectError(.unsupportedFormatVersion) {
            try SnapshotFile.decodeState(of: ReadingListEntry.self, from: try encoder.encode(file), path: "t")
        }
    }

    @Test func aSnapshotOfTheWrongZoneIsRejected() throws {
        let data = try SnapshotFile(ZoneState<ReadingListEntry>()).encoded()
        expectError(.damagedFile) {
            try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "t")
        }
    }

    /// Found by fuzzing `snapshot`: an item count far larger than the columns can hold made the column
    /// reader reserve room for that many values (gigabytes) before reading any, and a negative one trapped.
    /// Now the count is checked against the column first and the snapshot reported as damaged.
    @Test(arguments: [-1, Int.max, 1 << 40, 100_000_000])
    func anImpossibleItemCountIsDamageNotACrash(count: Int) throws {
        var state = ZoneState<ReadingHistoryItem>()
        state.items["a"] = ReadingHistoryItem(articleID: "a", lastVisited: Date(), deviceID: "d")
        var file = SnapshotFile(state)
        file.itemCount = count
        file.updateChecksum()  // past the checksum: the count itself must be caught
        let data = try file.encoded()
        let error = #expect(throws: FlatSyncError.self) {
            try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "p")
        }
        #expect(error?.code == .damagedFile)
    }
    /// The structure of a snapshot is read from its file a page at a time. The reader goes back and forth
    /// between the objects at the start and the offset table at the end; with one page kept, every step
    /// was a read (about ninety for a host zone's snapshot of 10k records, 195 for this one).
    @Test func theStructureIsReadInAFewPages() throws {
        let data = try SnapshotFile(Self.historyState(count: 2_000)).encoded()
        #expect(data.count > 3 * 4096)
        let source = CountingSource(DataSnapshotSource(data))
        let plist = try SnapshotPlist(source)
        #expect(plist.values.count > 5)
        // Each page once for the objects, and again for the ones the top dictionary names: not a read per step.
        let pages = (data.count + 4095) / 4096
        #expect(source.reads <= 2 * pages, "\(source.reads) reads of \(pages) pages")
        // Every byte the pages give is the file's, whichever page held it last.
        let bytes = WindowedBytes(DataSnapshotSource(data))
        var random = SeededRandomNumberGenerator(seed: 7)
        for _ in 0..<5_000 {
            let position = Int.random(in: 0..<data.count, using: &random)
            #expect(bytes[position] == data[position])
        }
        #expect(bytes[data.count] == 0)
        #expect(bytes.failure == nil)
    }

    private final class CountingSource: SnapshotSource {
        let base: DataSnapshotSource
        private(set) var reads = 0
        init(_ base: DataSnapshotSource) { self.base = base }
        var count: Int { base.count }
        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError) {
            reads += 1
            try base.read(into: buffer, at: offset)
        }
    }
}

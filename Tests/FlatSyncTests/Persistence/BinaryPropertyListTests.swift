import FlatSyncTestSupport
import Foundation
import Testing

@testable import FlatSync

/// The check every property list FlatSync reads passes before Foundation's decoder sees it.
@Suite struct BinaryPropertyListTests {
    /// A binary property list of the given objects (one-byte offsets and references).
    static func plist(_ objects: [[UInt8]], top: UInt8 = 0) -> Data {
        var bytes = Array("bplist00".utf8)
        var offsets: [UInt8] = []
        for object in objects {
            offsets.append(UInt8(bytes.count))
            bytes += object
        }
        let table = UInt8(bytes.count)
        bytes += offsets
        bytes += [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, UInt8(objects.count)]
        bytes += [0, 0, 0, 0, 0, 0, 0, top] + [0, 0, 0, 0, 0, 0, 0, table]
        return Data(bytes)
    }

    @Test func everyFileFlatSyncWritesPasses() throws {
        var state = ZoneState<ReadingListEntry>()
        state.items["a"] = ReadingListEntry(articleID: "a", dateAdded: Date(), title: "Ünïcode title")
        try BinaryPropertyList.validate(SnapshotFile(state).encoded())
        var device = DeviceFile(deviceID: "device")
        device.databaseChangeToken = Data([1, 2, 3])
        device.preparedZones = ["ReadingList"]
        try BinaryPropertyList.validate(device.encoded())
        try BinaryPropertyList.validate(DeviceIdentityFile(deviceID: "device").encoded())
        try BinaryPropertyList.validate(Self.plist([[0x50]]))  // an empty string
    }

    /// Found by the benchmark's cold start: a snapshot of 10,000 items has columns over 64 KiB, whose
    /// lengths are integers of four bytes; the check must let them through.
    @Test(arguments: [1, 300, 10_000, 40_000])
    func aLargeSnapshotPasses(count: Int) throws {
        var state = ZoneState<ReadingHistoryItem>()
        for index in 0..<count {
            state.items["article-\(index)"] = ReadingHistoryItem(
                articleID: "article-\(index)", lastVisited: Date(), readCount: Int64(index), deviceID: "d")
        }
        let data = try SnapshotFile(state).encoded()
        try BinaryPropertyList.validate(data)
        #expect(
            try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "p").items.count == count)
    }

    static let malformed: [(String, Data)] = [
        ("a string running past the end", plist([[0x5F, 0x10, 0x7F, 0x41]])),
        ("a UTF-16 string running past the end", plist([[0x6F, 0x10, 0x72, 0x00, 0x41]])),
        ("an array that contains itself", plist([[0xA1, 0x00]])),
        ("a cycle through two dictionaries", plist([[0xD1, 0x02, 0x01], [0xD1, 0x02, 0x00], [0x51, 0x6B]])),
        ("a reference past the last object", plist([[0xA1, 0x05]])),
        ("a top object past the last one", plist([[0x09]], top: 3)),
        ("an unknown marker", plist([[0xF0]])),
        ("an integer of 32 bytes", plist([[0x15] + [UInt8](repeating: 0, count: 32)])),
        (
            "nesting too deep",
            plist((0..<70).map { $0 < 69 ? [0xA1, UInt8($0 + 1)] : [0x09] })
        ),
        ("another format", Data("<?xml version=\"1.0\"?><plist><true/></plist>".utf8)),
        ("too short", Data("bplist00".utf8)),
    ]

    @Test(arguments: malformed)
    func aMalformedListIsDamage(name: String, data: Data) {
        let error = #expect(throws: FlatSyncError.self) { try BinaryPropertyList.validate(data) }
        #expect(error?.code == .damagedFile)
    }

    /// Found by fuzzing `device-file`: a damaged device.plist whose key string runs past the end of the
    /// file trapped inside Foundation's decoder — at every launch, since the store reads it when it opens.
    /// Now it is refused before Foundation sees it, quarantined, and the device keeps its ID.
    @Test func aDeviceFileThatTrappedFoundationIsQuarantined() async throws {
        let input = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/Regressions/device-file/string-past-the-end")
        let bytes = try Data(contentsOf: input)
        let error = #expect(throws: FlatSyncError.self) { try DeviceFile.decode(bytes, path: "device.plist") }
        #expect(error?.code == .damagedFile)

        try await withTemporaryDirectory { directory in
            var options = testOptions()
            options.deviceID = nil
            let store = try LocalStore(directory: directory, options: options)
            let deviceID = store.deviceID
            try await store.close()
            try bytes.write(to: directory.appendingPathComponent("device.plist"))
            let reopened = try LocalStore(directory: directory, options: options)
            #expect(reopened.deviceID == deviceID)
            #expect(reopened.eventHub.keptEvents.count == 1)
            try await reopened.close()
        }
    }

    /// Cut anywhere, or with any byte changed, a real file never traps the check or the decoder after it.
    @Test func cutsAndChangedBytesNeverTrap() throws {
        var state = ZoneState<ReadingHistoryItem>()
        state.items["a"] = ReadingHistoryItem(articleID: "a", lastVisited: Date(), readCount: 3, deviceID: "d")
        let data = try SnapshotFile(state).encoded()
        for cut in 0..<data.count {
            _ = try? SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data.prefix(cut), path: "p")
        }
        for index in data.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var damaged = data
                damaged[index] ^= flip
                _ = try? SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: damaged, path: "p")
            }
        }
    }
}

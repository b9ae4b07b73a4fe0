import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation

/// One decoder to fuzz: what it is called, how one input is run through it, and where real inputs come
/// from (the seed corpus).
///
/// `run` must never trap, whatever the bytes: a trap is the bug a fuzzer looks for. It also checks what
/// the decoder promises beyond not crashing (a decoded value encodes back to the same value, say), with
/// `precondition`, so that a broken promise is a crash too.
package struct FuzzTarget: Sendable {
    /// The name `.ci/fuzz` and `FLATSYNC_FUZZ_TARGET` use.
    package let name: String
    /// What is fuzzed, for `flatsync-fuzz list`.
    package let summary: String
    /// Runs one input through the decoder.
    package let run: @Sendable (Data) -> Void
    /// Picks the target's seeds from the files of a real device and cloud (see ``FuzzSeeds``).
    package let seeds: @Sendable (FuzzSeeds.Files) -> [Data]

    package init(
        _ name: String, _ summary: String, seeds: @escaping @Sendable (FuzzSeeds.Files) -> [Data],
        run: @escaping @Sendable (Data) -> Void
    ) {
        self.name = name
        self.summary = summary
        self.seeds = seeds
        self.run = run
    }
}

/// The decoders FlatSync fuzzes. Adding one is one line here; `.ci/fuzz` runs every target listed.
package enum FuzzTargets {
    package static let all: [FuzzTarget] = [
        FuzzTarget("plist", "the binary property list check every file passes", seeds: \.plists, run: plist),
        FuzzTarget("log-frames", "the command log's header and frames", seeds: \.logs, run: logFrames),
        FuzzTarget("log-entry", "one command log entry (a frame's payload)", seeds: \.logEntries, run: logEntry),
        FuzzTarget("snapshot", "a store snapshot and its packed columns", seeds: \.snapshots, run: snapshot),
        FuzzTarget(
            "device-file", "device.plist, device-id.plist and refused-changes.plist", seeds: \.deviceFiles,
            run: deviceFile),
        FuzzTarget("cloud-state", "the DirectoryCloud state file", seeds: \.cloudStates, run: cloudState),
        FuzzTarget(
            "ckws-response", "a CloudKit Web Services response body, every operation and error",
            seeds: \.ckwsResponses, run: CloudKitResponseFuzzing.run),
    ]

    package static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }

    // MARK: - The targets

    /// The structural check of binary property lists: what it lets through, Foundation's decoder reads
    /// without trapping.
    static func plist(_ data: Data) {
        guard (try? BinaryPropertyList.validate(data)) != nil else { return }
        _ = try? PropertyListDecoder().decode(AnyPlist.self, from: data)
    }

    /// Any property list, decoded to the end: every value of every container is visited.
    private struct AnyPlist: Decodable {
        init(from decoder: any Decoder) throws {
            if var array = try? decoder.unkeyedContainer() {
                while !array.isAtEnd { _ = try array.decode(AnyPlist.self) }
            } else if let dictionary = try? decoder.container(keyedBy: AnyKey.self) {
                for key in dictionary.allKeys { _ = try dictionary.decode(AnyPlist.self, forKey: key) }
            } else {
                let value = try decoder.singleValueContainer()
                _ = try? value.decode(String.self)
                _ = try? value.decode(Data.self)
                _ = try? value.decode(Int64.self)
                _ = try? value.decode(Double.self)
                _ = try? value.decode(Date.self)
                _ = try? value.decode(Bool.self)
            }
        }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The log's scanner: whatever the bytes, a prefix of valid entries and a verdict; the entries it keeps
    /// are written back by the encoder to a log that scans to the same entries.
    static func logFrames(_ data: Data) {
        let bytes = [UInt8](data)
        let scan = bytes.withUnsafeBytes { AppendLog.scanLog($0) }
        precondition(scan.validEnd <= bytes.count, "the valid end is past the end of the file")
        precondition(scan.damage == nil || scan.validEnd <= bytes.count, "damage past the end")
        precondition(
            scan.tailIsZeros == (scan.validEnd < bytes.count && bytes[scan.validEnd...].allSatisfy { $0 == 0 })
                || scan.damage != nil,
            "reserved space that is not a tail of zeros, or a tail of zeros that is not reserved space")
        if scan.damage == nil, !scan.payloads.isEmpty {
            let again = AppendLog.encodeLog(scan.payloads).withUnsafeBytes { AppendLog.scanLog($0) }
            precondition(again.payloads == scan.payloads && again.damage == nil, "the entries do not round-trip")
        }
        for payload in scan.payloads { logEntry(payload) }
    }

    /// One entry: an event, or a typed error; an event encodes to bytes that decode to the same event.
    static func logEntry(_ data: Data) {
        guard let event = try? CommandLogEvent.decode(data) else { return }
        let again = try? CommandLogEvent.decode(event.encoded())
        precondition(again == event, "a log entry does not round-trip")
    }

    /// A snapshot, read as the store reads it: its property-list structure walked object by object by
    /// FlatSync's own reader (every offset and length checked), its checksum, then its columns streamed
    /// into the zone's items.
    static func snapshot(_ data: Data) {
        _ = try? SnapshotFile.decodeState(of: ReadingListEntry.self, from: data, path: "fuzz")
        _ = try? SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "fuzz")
        // A host zone's snapshot: its host records section decoded, and what decodes encodes back the same.
        if let state = try? SnapshotFile.decodeState(
            of: HostZoneItem.self, zone: TestRecipe.zone, from: data, path: "fuzz")
        {
            let again = try? HostRecordTable.decode([UInt8](state.hostRecords.encoded()), zone: TestRecipe.zone)
            precondition(again == state.hostRecords, "a host zone's records do not round-trip")
        }
    }

    /// The device files: decoded, or a typed error; what decodes encodes back to the same bookkeeping.
    static func deviceFile(_ data: Data) {
        if let file = try? DeviceFile.decode(data, path: "fuzz"), let encoded = try? file.encoded() {
            precondition((try? DeviceFile.decode(encoded, path: "fuzz")) == file, "device.plist does not round-trip")
        }
        if let identity = try? DeviceIdentityFile.decode(data, path: "fuzz") {
            precondition(!identity.deviceID.isEmpty, "an empty device ID was accepted")
        }
        if let refusals = try? RefusedChangesFile.decode(data, path: "fuzz"),
            let encoded = try? RefusedChangesFile.encoded(refusals)
        {
            precondition(
                (try? RefusedChangesFile.decode(encoded, path: "fuzz")) == refusals,
                "refused-changes.plist does not round-trip")
        }
    }

    /// The DirectoryCloud state: checked, and its property list decoded past the header's checks too (but
    /// never past the property-list check).
    static func cloudState(_ data: Data) {
        let url = URL(fileURLWithPath: "/fuzz/cloud-state")
        if let database = try? CloudStateFile.decode(data, from: url),
            let encoded = try? CloudStateFile.encode(database)
        {
            precondition((try? CloudStateFile.decode(encoded, from: url)) == database, "the state does not round-trip")
        }
        let payload = Data(data.dropFirst(CloudStateFile.headerSize))
        if (try? BinaryPropertyList.validate(payload)) != nil {
            _ = try? PropertyListDecoder().decode(CloudDatabase.self, from: payload)
        }
    }
}

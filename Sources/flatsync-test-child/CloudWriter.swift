import FlatSync
import FlatSyncTesting
import Foundation

/// The zone cloud writers write into.
let cloudWriterZone = ZoneID("Writers")

/// `cloud-writer CLOUD_DIR PREFIX COUNT`: makes sure the zone `Writers` exists in the DirectoryCloud at
/// CLOUD_DIR, then saves COUNT records named `PREFIX-0` … `PREFIX-(COUNT-1)`, one modify request each,
/// so that two writers started together interleave their requests on the shared directory.
///
/// Prints nothing but errors. Exits 0 when every record was saved, 1 on any failure, 2 on bad usage.
func runCloudWriter(_ arguments: [String]) async -> Int32 {
    guard arguments.count == 3, let count = Int(arguments[2]), count >= 0 else {
        FileHandle.standardError.write(Data("usage: flatsync-test-child cloud-writer CLOUD_DIR PREFIX COUNT\n".utf8))
        return 2
    }
    let prefix = arguments[1]
    do {
        let cloud = try DirectoryCloud(directory: URL(fileURLWithPath: arguments[0]))
        try await cloud.createZones([cloudWriterZone])
        for index in 0..<count {
            let record = Record(
                id: RecordID(zone: cloudWriterZone, name: "\(prefix)-\(index)"),
                type: "WriterRecord",
                fields: ["writer": .string(prefix), "index": .int(Int64(index))]
            )
            let result = try await cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
            if let failure = result.partialFailure {
                FileHandle.standardError.write(Data("cloud-writer: \(record.id): \(failure)\n".utf8))
                return 1
            }
        }
        return 0
    } catch {
        FileHandle.standardError.write(Data("cloud-writer: \(error)\n".utf8))
        return 1
    }
}

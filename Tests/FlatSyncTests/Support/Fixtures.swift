import Foundation

@testable import FlatSync

/// Small builders shared by the command and store tests.
enum Fixtures {
    static func id(_ name: String, in zone: ZoneID = .readingList) -> RecordID {
        RecordID(zone: zone, name: name)
    }

    static func record(_ name: String, in zone: ZoneID = .readingList, _ fields: [String: FieldValue]) -> Record {
        Record(id: id(name, in: zone), type: "Test", fields: fields)
    }

    static func save(
        _ name: String, in zone: ZoneID = .readingList, _ fields: [String: FieldValue], keys: Set<String>? = nil
    )
        -> RecordChange
    {
        .save(record(name, in: zone, fields), changedKeys: keys ?? Set(fields.keys))
    }

    static func delete(_ name: String, in zone: ZoneID = .readingList) -> RecordChange {
        .delete(id(name, in: zone))
    }
}

extension SnapshotFile {
    /// Replaces the file's change tags with these names and tags, in this order (duplicates and any order
    /// a hand-made file may have), and updates the checksum.
    mutating func setChangeTags(_ pairs: [(name: String, tag: String)]) {
        var names = BinaryWriter()
        var tags = BinaryWriter()
        for (name, tag) in pairs {
            names.write(name)
            tags.write(tag)
        }
        changeTagNames = names.data
        changeTagValues = tags.data
        updateChecksum()
    }
}

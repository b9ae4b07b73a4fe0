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

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

    static func save(_ name: String, in zone: ZoneID = .readingList, _ fields: [String: FieldValue], keys: Set<String>? = nil)
        -> RecordChange
    {
        .save(record(name, in: zone, fields), changedKeys: keys ?? Set(fields.keys))
    }

    static func delete(_ name: String, in zone: ZoneID = .readingList) -> RecordChange {
        .delete(id(name, in: zone))
    }
}

/// SplitMix64: a tiny deterministic generator so random tests replay from their seed.
struct TestRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

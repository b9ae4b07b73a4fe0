import Testing

@testable import FlatSync

/// The command queue's index of records (``RecordIndex``): a dictionary that compares stored hashes first.
@Suite struct RecordIndexTests {
    @Test func storesReplacesAndRemovesByRecordID() {
        var index = RecordIndex<Int>()
        let id = RecordID(zone: .readingList, name: "rl-a")
        #expect(index[id] == nil)
        #expect(index.updateValue(1, forKey: id) == nil)
        #expect(index.updateValue(2, forKey: id) == 1, "returns the value it replaced")
        #expect(index[id] == 2)
        #expect(index.count == 1)
        index[id] = nil
        #expect(index[id] == nil)
        #expect(index.count == 0)
    }

    /// ``RecordID`` hashes its name alone, so IDs of the same name in two zones have equal hashes: the
    /// index must still tell them apart (the comparison after equal hashes).
    @Test func idsWhoseHashesAreEqualAreStillTwoRecords() {
        var index = RecordIndex<String>()
        let list = RecordID(zone: .readingList, name: "same")
        let history = RecordID(zone: .readingHistory, name: "same")
        #expect(list.name.hashValue == history.name.hashValue)
        index[list] = "list"
        index[history] = "history"
        #expect(index.count == 2)
        #expect(index[list] == "list")
        #expect(index[history] == "history")
        index[list] = nil
        #expect(index[history] == "history")
        #expect(index[list] == nil)
    }

    /// Many records, grown through several resizes and after a reservation, non-ASCII names among them:
    /// every one is found with its own value, and none that was not stored.
    @Test func findsEveryRecordAfterGrowing() {
        var index = RecordIndex<Int>()
        let names = (0..<5_000).map { $0.isMultiple(of: 7) ? "rh-é-\($0)-𝄞" : "rl-\($0)" }
        for (value, name) in names.enumerated() {
            index[RecordID(zone: value.isMultiple(of: 2) ? .readingList : .readingHistory, name: name)] = value
            if value == 1_000 { index.reserveCapacity(4_000) }
        }
        #expect(index.count == names.count)
        for (value, name) in names.enumerated() {
            #expect(
                index[RecordID(zone: value.isMultiple(of: 2) ? .readingList : .readingHistory, name: name)] == value)
        }
        #expect(index[RecordID(zone: .readingHistory, name: "rl-0")] == nil, "rl-0 is in the other zone")
        #expect(index[RecordID(zone: .readingList, name: "rl-5000")] == nil)
    }
}

import Testing

@testable import FlatSync

/// The table the reading list and the command queue's index keep (``HashedTable``): a dictionary whose
/// index stores hashes, checked against `Dictionary` itself.
@Suite struct HashedTableTests {
    @Test func storesReplacesAndRemoves() {
        var table = HashedTable<String, Int>()
        #expect(table["a"] == nil)
        #expect(table.updateValue(1, forKey: "a") == nil)
        #expect(table.updateValue(2, forKey: "a") == 1, "returns the value it replaced")
        table["b"] = 3
        #expect(table["a"] == 2)
        #expect(table.count == 2)
        #expect(table.removeValue(forKey: "a") == 2)
        #expect(table.removeValue(forKey: "a") == nil)
        table["b"] = nil
        #expect(table.isEmpty)
        #expect(table["b"] == nil)
    }

    /// ``RecordID`` hashes its name alone, so IDs of the same name in two zones have equal hashes: the table
    /// must still tell them apart (the comparison after equal hashes).
    @Test func keysWhoseHashesAreEqualAreStillTwoEntries() {
        var table = HashedTable<RecordID, String>()
        let list = RecordID(zone: .readingList, name: "same")
        let history = RecordID(zone: .readingHistory, name: "same")
        #expect(list.hashValue == history.hashValue)
        table[list] = "list"
        table[history] = "history"
        #expect(table.count == 2)
        #expect(table[list] == "list")
        #expect(table[history] == "history")
        table[list] = nil
        #expect(table[history] == "history")
        #expect(table[list] == nil)
    }

    /// Keys are found as `Dictionary` finds them: by `==`, under which canonically equivalent strings are
    /// one key.
    @Test func canonicallyEquivalentStringsAreOneKey() {
        var table = HashedTable<String, Int>()
        var dictionary: [String: Int] = [:]
        for (value, key) in ["\u{E9}", "e\u{301}", "\u{212A}", "K", "k"].enumerated() {
            table[key] = value
            dictionary[key] = value
        }
        #expect(table.count == dictionary.count)
        for (key, value) in dictionary { #expect(table[key] == value) }
    }

    @Test func modifyAddsChangesRemovesOrLeavesAnEntryFindingItOnce() {
        var table = HashedTable<String, Int>()
        table["kept"] = 1
        let added = table.modify("new") { value -> Bool in
            guard value == nil else { return false }
            value = 5
            return true
        }
        #expect(added, "the body saw no value")
        #expect(table["new"] == 5)
        table.modify("new") { $0! += 1 }
        #expect(table["new"] == 6)
        table.modify("absent") { _ in }
        #expect(table["absent"] == nil)
        #expect(table.count == 2, "a modify that leaves nil adds nothing")
        table.modify("new") { $0 = nil }
        #expect(table["new"] == nil)
        #expect(table["kept"] == 1)
        #expect(table.count == 1)
    }

    @Test func tablesWithTheSameEntriesInAnotherOrderAreEqual() {
        var first = HashedTable<String, Int>()
        var second = HashedTable<String, Int>()
        for key in ["a", "b", "c"] { first[key] = key.count }
        for key in ["c", "a", "b"] { second[key] = key.count }
        #expect(first == second)
        second["b"] = 2
        #expect(first != second)
        second["b"] = nil
        #expect(first != second, "a missing entry")
    }

    /// A long seeded run of stores, replacements, modifies and removals (which move the last entry into the
    /// removed one's place), through growth and a reservation, with non-ASCII keys among them: the table
    /// holds what a `Dictionary` given the same operations holds, all along.
    @Test(arguments: [1, 2, 3])
    func agreesWithADictionaryThroughChurn(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var table = HashedTable<String, Int>()
        var dictionary: [String: Int] = [:]
        let keyCount = 3_000
        func key(_ number: Int) -> String { number.isMultiple(of: 7) ? "é-\(number)-𝄞" : "rl-\(number)" }
        for step in 0..<40_000 {
            let name = key(Int.random(in: 0..<keyCount, using: &random))
            let value = Int.random(in: 0..<1_000, using: &random)
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                #expect(table.updateValue(value, forKey: name) == dictionary.updateValue(value, forKey: name))
            case 4..<6:
                #expect(table.removeValue(forKey: name) == dictionary.removeValue(forKey: name))
            case 6..<8:
                let drop = value.isMultiple(of: 3)
                table.modify(name) { $0 = drop ? nil : value }
                dictionary[name] = drop ? nil : value
            default:
                #expect(table[name] == dictionary[name])
            }
            if step == 10_000 { table.reserveCapacity(keyCount) }
        }
        #expect(table.count == dictionary.count)
        for number in 0..<keyCount { #expect(table[key(number)] == dictionary[key(number)]) }
        #expect(Set(table.allKeys) == Set(dictionary.keys))
        #expect(table.allKeys.count == table.values.count)
        for (name, value) in zip(table.allKeys, table.values) { #expect(dictionary[name] == value) }
    }
}

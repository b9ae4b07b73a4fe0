import Foundation
import Testing

@testable import FlatSync

/// `Record` keeps its change tag and last writer as a value and a flag each, and `RecordChange` its record
/// and whether it is a save (so that the optimizer moves them instead of copying): the public optionals
/// must behave exactly as stored optionals did.
@Suite struct RecordStorageTests {
    static let id = RecordID(zone: .readingList, name: "rl-a")

    @Test func aRecordsOptionalsReadBackAsSetIncludingEmptyStrings() throws {
        var record = Record(id: Self.id, type: "ReadingListEntry", fields: ["n": .int(1)])
        #expect(record.changeTag == nil && record.lastModifiedBy == nil)
        // An empty tag or writer is a value, not their absence.
        record.changeTag = ChangeTag("")
        record.lastModifiedBy = ""
        #expect(record.changeTag == ChangeTag("") && record.lastModifiedBy == "")
        let none = Record(id: Self.id, type: "ReadingListEntry", fields: ["n": .int(1)])
        #expect(record != none)
        record.changeTag = ChangeTag("t-2")
        record.lastModifiedBy = "phone"
        #expect(record.changeTag == ChangeTag("t-2") && record.lastModifiedBy == "phone")
        #expect(record.withChangeTag(nil).changeTag == nil && record.withChangeTag(nil).lastModifiedBy == "phone")
        let built = Record(
            id: Self.id, type: "ReadingListEntry", fields: ["n": .int(1)], changeTag: ChangeTag("t-2"),
            lastModifiedBy: "phone")
        #expect(record == built && record.hashValue == built.hashValue)
        record.changeTag = nil
        record.lastModifiedBy = nil
        #expect(record == none && record.hashValue == none.hashValue)
        // Through Codable, each of the three states of each comes back.
        for tag in [nil, "", "t"] as [String?] {
            for writer in [nil, "", "w"] as [String?] {
                let original = Record(
                    id: Self.id, type: "T", fields: [:], changeTag: tag.map(ChangeTag.init(rawValue:)),
                    lastModifiedBy: writer)
                let decoded = try PropertyListDecoder().decode(
                    Record.self, from: try PropertyListEncoder().encode(original))
                #expect(decoded == original && decoded.changeTag?.rawValue == tag && decoded.lastModifiedBy == writer)
            }
        }
    }

    @Test func aChangeIsASaveOrADeleteWhicheverWayItWasMade() {
        let record = Record(id: Self.id, type: "ReadingListEntry", fields: ["n": .int(1)], changeTag: ChangeTag("t"))
        var change = RecordChange.save(record, changedKeys: ["n"], sequence: 3)
        #expect(!change.isDelete && change.record == record && change.operation == .save(record))
        #expect(change.carriedRecord == record)
        change.operation = .delete
        let delete = RecordChange.delete(Self.id, sequence: 3)
        #expect(change.isDelete && change.record == nil && change.operation == .delete)
        #expect(change.recordID == Self.id)
        change.changedKeys = []
        #expect(change == delete && change.hashValue == delete.hashValue)
        var saved = delete
        saved.operation = .save(record)
        #expect(!saved.isDelete && saved.record == record)
        #expect(saved != delete)
        // A delete whose ID is changed afterwards is the delete of the new ID (its placeholder record, made
        // with the old ID, is never compared).
        var moved = RecordChange.delete(Self.id, sequence: 3)
        let other = RecordID(zone: .readingList, name: "rl-b")
        moved.recordID = other
        #expect(
            moved == .delete(other, sequence: 3) && moved.hashValue == RecordChange.delete(other, sequence: 3).hashValue
        )
        #expect(moved != delete)
        // Coalescing (Sources/FlatSync/FlatSync.docc/HowSyncWorks.md) sees the same kinds.
        #expect(RecordChange.save(record, changedKeys: ["n"], sequence: 1).coalesced(with: delete).isDelete)
        #expect(delete.coalesced(with: saved).record == record)
    }

    /// A host save keeps the values its keys had before it (the version it was made over); coalesced with a
    /// later save, each key keeps the value before its first change, and a save over a delete keeps none.
    @Test func coalescedSavesKeepEachKeysValueBeforeItsFirstChange() {
        let id = RecordID(zone: ZoneID("Tasks"), name: "t1")
        let first = RecordChange.save(
            Record(id: id, type: "Task", fields: ["title": .string("b"), "count": .int(1)]),
            changedKeys: ["title", "note"], baseValues: ["title": .string("a")], sequence: 1)
        let second = RecordChange.save(
            Record(id: id, type: "Task", fields: ["title": .string("c"), "count": .int(2), "note": .string("n")]),
            changedKeys: ["title", "count", "note"],
            baseValues: ["title": .string("b"), "count": .int(1)], sequence: 2)
        let both = first.coalesced(with: second)
        #expect(both.changedKeys == ["title", "count", "note"])
        // "note" was absent before the first save, which added it: absent still.
        #expect(both.baseValues == ["title": .string("a"), "count": .int(1)])
        #expect(both.record == second.record && both.sequence == 2)
        // A save with no earlier values (a new record) makes them unknown for the pair.
        let created = RecordChange.save(first.record!, changedKeys: ["title", "count"], sequence: 1)
        #expect(created.coalesced(with: second).baseValues == nil)
        #expect(created.coalesced(with: second).changedKeys == ["title", "count", "note"])
        // Over a delete the record is made anew: what it had before is not the server's any more.
        let replace = RecordChange.delete(id, sequence: 1).coalesced(with: second)
        #expect(replace.replacesRecord && replace.baseValues == nil && replace.changedKeys == second.changedKeys)
        // A save made over a merged version brings that version's values for every key: they replace the
        // earlier ones, and a later save keeps them.
        let rebased = RecordChange.save(
            second.record!, changedKeys: ["title", "count", "note"],
            baseValues: ["title": .string("merged"), "count": .int(5)], rebases: true, sequence: 3)
        let overMerge = both.coalesced(with: rebased)
        #expect(overMerge.rebases && overMerge.baseValues == ["title": .string("merged"), "count": .int(5)])
        let after = overMerge.coalesced(with: second)
        #expect(after.rebases && after.baseValues == overMerge.baseValues)
        // A save turned into a delete forgets them.
        var deleted = second
        deleted.operation = .delete
        #expect(deleted.baseValues == nil && deleted.isDelete)
    }
}

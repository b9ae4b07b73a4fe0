import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// A batch's changes are drafted by its pass over the table and made afterwards, on two threads for a large
/// batch (``ChangeDraft``): what comes out must be the changes the pass made one by one before.
@Suite struct ChangeDraftTests {
    static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// History drafts of every kind: new items, changed ones (some keys, device, wide read count), deletes,
    /// and changes already made (coalesced repeats), in a mixed order.
    static func historyDrafts(count: Int) -> [ChangeDraft<ReadingHistoryItem>] {
        (0..<count).map { index in
            let articleID = index % 7 == 0 ? "é-long-article-identifier-\(index)" : "article-\(index)"
            let new = ReadingHistoryItem(
                articleID: articleID, lastVisited: date.addingTimeInterval(Double(index)), maxVersionSeen: 3,
                readCount: index % 11 == 0 ? .max : Int64(index % 3), deviceID: index % 2 == 0 ? "phone" : "tablet",
                flags: index % 5 == 0 ? [.read, .seen] : [])
            switch index % 4 {
            case 0: return .save(articleID: articleID, old: nil, new: new)
            case 1:
                var old = new
                old.readCount = 0
                old.deviceID = nil
                old.lastVisited = nil
                return .save(articleID: articleID, old: old, new: new)
            case 2: return .delete(articleID: articleID)
            default:
                let made = new.saveChange(since: nil, articleID: articleID, sequence: 9)
                return .made(made.coalesced(with: new.saveChange(since: new, articleID: articleID, sequence: 9)))
            }
        }
    }

    /// The changes by the record-based definition: each save the new item's whole record with the keys
    /// whose fields differ from the old record's (``SyncedItem/recordKeysChanged(since:)``).
    static func madeOneByOne(_ drafts: [ChangeDraft<ReadingHistoryItem>], sequence: UInt64) -> [RecordChange] {
        drafts.map { draft in
            switch draft {
            case .save(_, let old, let new):
                return .save(new.record, changedKeys: new.recordKeysChanged(since: old), sequence: sequence)
            case .delete(let articleID):
                return .delete(ReadingHistoryItem.recordID(for: articleID), sequence: sequence)
            case .made(let change):
                return change
            }
        }
    }

    @Test(arguments: [0, 1, 2, 3, 1_001])
    func changesMadeOnTwoThreadsAreTheChangesMadeInOrder(count: Int) {
        let drafts = Self.historyDrafts(count: count)
        let expected = Self.madeOneByOne(drafts, sequence: 9)
        // Each call takes the changes out of its own copy of the drafts, and leaves them as `taken`.
        var forOne = drafts
        var forTwo = drafts
        let onOne = ChangeDraft.makeChanges(&forOne, sequence: 9, onTwoThreads: false)
        let onTwo = ChangeDraft.makeChanges(&forTwo, sequence: 9, onTwoThreads: true)
        #expect(onOne.count == count && onTwo.count == count)
        for taken in forOne + forTwo {
            guard case .delete(let articleID) = taken, articleID.isEmpty else {
                Issue.record("a draft was left as \(taken), not taken")
                break
            }
        }
        #expect(forOne.count == count && forTwo.count == count)
        #expect(onOne == expected)
        #expect(onTwo == expected)
        // Field by field too, where `==` compares records by their fields: the changed keys and the names.
        for (made, wanted) in zip(onTwo, expected) {
            #expect(made.recordID == wanted.recordID && made.changedKeys == wanted.changedKeys)
            #expect(made.isDelete == wanted.isDelete && made.sequence == wanted.sequence)
            #expect(made.record?.fields == wanted.record?.fields)
        }
        // Every draft names its article, as the batch's index of articles reads it.
        for (draft, change) in zip(drafts, expected) {
            #expect(ReadingHistoryItem.recordID(for: draft.articleID) == change.recordID)
        }
    }

    /// A batch through the store — articles named again, removed and visited again, items there before —
    /// logs the changes its changes make one by one, each record's coalesced into its first, in order.
    @Test(arguments: [false, true])
    func aBatchLogsItsChangesMadeOneByOneAndCoalesced(forking: Bool) async throws {
        let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let disk = SimulatedDisk()
        var options = testOptions()
        options.currentDate = { now }
        options.fileSystem = FileSystem(disk)
        options.parallelBatchMinimum = forking ? 2 : .max
        let store = try LocalStore(directory: LargeBatchTests.directory, options: options)
        let before: [ReadingHistoryChange] = ["p", "q", "r"].map { .visit(articleID: $0) }
        try await store.history.apply(before)
        let batch: [ReadingHistoryChange] =
            [
                .visit(articleID: "a"), .visit(articleID: "p"), .markRead(articleID: "a"), .remove(articleID: "q"),
                .visit(articleID: "q"), .remove(articleID: "r"), .visit(articleID: "b"), .remove(articleID: "b"),
                .remove(articleID: "gone"), .markSeen(articleID: "c"), .visit(articleID: "p", version: 9),
                // Keys of the earlier change that the later one does not touch: the coalesced change has both.
                .setLiking(articleID: "p", .liked), .markOffensive(articleID: "c"), .markConsumed(articleID: "p"),
            ] + (0..<40).map { .visit(articleID: "n\($0)") }
        try await store.history.apply(batch)
        await store.abandon()

        // The model: the same changes, one by one, on the state the first batch left.
        let device = DeviceName.named("test-device")
        var model = ZoneState<ReadingHistoryItem>()
        for change in before {
            _ = model.replace(
                change.articleID, with: change.applied(to: nil, now: now, device: device), sequence: 1)
        }
        var expected: [RecordChange] = []
        var position: [RecordID: Int] = [:]
        for change in batch {
            let new = change.applied(to: model.items[change.articleID], now: now, device: device)
            guard let made = model.replace(change.articleID, with: new, sequence: 2) else { continue }
            if let earlier = position[made.recordID] {
                expected[earlier] = expected[earlier].coalesced(with: made)
            } else {
                position[made.recordID] = expected.count
                expected.append(made)
            }
        }
        let logged = try LargeBatchTests.logEvents(on: disk).compactMap { event -> Mutation? in
            if case .mutation(let mutation) = event, mutation.sequence == 2 { return mutation }
            return nil
        }
        #expect(logged.count == 1)
        let changes = logged.first?.changes ?? []
        #expect(changes.map(\.recordID) == expected.map(\.recordID))
        #expect(changes == expected)
        #expect(changes.map(\.changedKeys) == expected.map(\.changedKeys))
        #expect(changes.map(\.isDelete) == expected.map(\.isDelete))
        #expect(expected.count == 46 && expected.filter(\.isDelete).count == 2, "r, and b made and removed")
    }

    /// Reading-list drafts (records of fields, keys as sets) come out the same on two threads.
    @Test func readingListChangesMadeOnTwoThreadsAreTheSame() {
        let drafts: [ChangeDraft<ReadingListEntry>] = (0..<64).map { index in
            let entry = ReadingListEntry(articleID: "r\(index)", dateAdded: Self.date, origin: Int64(index % 4))
            if index % 3 == 2 { return .delete(articleID: "r\(index)") }
            return .save(articleID: "r\(index)", old: index % 3 == 1 ? entry : nil, new: entry)
        }
        var forOne = drafts
        var forTwo = drafts
        let onOne = ChangeDraft.makeChanges(&forOne, sequence: 4, onTwoThreads: false)
        let onTwo = ChangeDraft.makeChanges(&forTwo, sequence: 4, onTwoThreads: true)
        #expect(onOne == onTwo)
        #expect((forOne + forTwo).allSatisfy { if case .delete("") = $0 { true } else { false } }, "all taken")
        #expect(onOne.map(\.changedKeys) == onTwo.map(\.changedKeys))
        #expect(onTwo.filter(\.isDelete).count == 21)
    }
}

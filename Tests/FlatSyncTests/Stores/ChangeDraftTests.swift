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

    /// The changes as the pass made them before drafts: one by one, from the items.
    static func madeOneByOne(_ drafts: [ChangeDraft<ReadingHistoryItem>], sequence: UInt64) -> [RecordChange] {
        drafts.map { draft in
            switch draft {
            case .save(let articleID, let old, let new):
                return new.saveChange(since: old, articleID: articleID, sequence: sequence)
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
        let onOne = ChangeDraft.makeChanges(drafts, sequence: 9, onTwoThreads: false)
        let onTwo = ChangeDraft.makeChanges(drafts, sequence: 9, onTwoThreads: true)
        #expect(onOne.count == count && onTwo.count == count)
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

    /// Reading-list drafts (records of fields, keys as sets) come out the same on two threads.
    @Test func readingListChangesMadeOnTwoThreadsAreTheSame() {
        let drafts: [ChangeDraft<ReadingListEntry>] = (0..<64).map { index in
            let entry = ReadingListEntry(articleID: "r\(index)", dateAdded: Self.date, origin: Int64(index % 4))
            if index % 3 == 2 { return .delete(articleID: "r\(index)") }
            return .save(articleID: "r\(index)", old: index % 3 == 1 ? entry : nil, new: entry)
        }
        let onOne = ChangeDraft.makeChanges(drafts, sequence: 4, onTwoThreads: false)
        let onTwo = ChangeDraft.makeChanges(drafts, sequence: 4, onTwoThreads: true)
        #expect(onOne == onTwo)
        #expect(onOne.map(\.changedKeys) == onTwo.map(\.changedKeys))
        #expect(onTwo.filter(\.isDelete).count == 21)
    }
}

import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct StoreChangeTests {
    private let now = Date(timeIntervalSinceReferenceDate: 800_000_000)

    @Test func addingTwiceKeepsTheFirstEntryAndRemovingForgetsIt() {
        let first = ReadingListChange.add(articleID: "a", title: "T").applied(to: nil, now: now)
        #expect(first == ReadingListEntry(articleID: "a", dateAdded: now, title: "T"))
        let again = ReadingListChange.add(articleID: "a").applied(to: first, now: now.addingTimeInterval(5))
        #expect(again == first)
        #expect(ReadingListChange.remove(articleID: "a").applied(to: first, now: now) == nil)
    }

    @Test func aVisitMarksReadAndSeenAndCounts() throws {
        let item = try #require(
            ReadingHistoryChange.visit(articleID: "a", version: 3).applied(to: nil, now: now, deviceID: "d1"))
        #expect(item.lastVisited == now && item.firstSeen == now)
        #expect(item.readCount == 1 && item.maxVersionSeen == 3 && item.deviceID == "d1")
        #expect(item.flags == [.read, .seen])
        let later = now.addingTimeInterval(60)
        let second = try #require(
            ReadingHistoryChange.visit(articleID: "a").applied(to: item, now: later, deviceID: "d2"))
        #expect(second.lastVisited == later && second.firstSeen == now)
        #expect(second.readCount == 2 && second.maxVersionSeen == 3 && second.deviceID == "d2")
    }

    /// Record names are written byte by byte into one new string (not with `+`): the same string, for IDs
    /// that fit a small string or not, and for non-ASCII ones (one starting with a combining mark, which
    /// joins the prefix's `-` into one character).
    @Test(arguments: [
        "a", "123456789012", "1234567890123", "history-article-000042", "caf\u{E9}", "\u{301}x", "\u{1F4F0}",
    ])
    func aRecordNameIsThePrefixFollowedByTheArticleID(articleID: String) {
        for (id, prefix) in [
            (ReadingHistoryItem.recordID(for: articleID), ReadingHistoryItem.recordNamePrefix),
            (ReadingListEntry.recordID(for: articleID), ReadingListEntry.recordNamePrefix),
        ] {
            #expect(Array(id.name.utf8) == Array(prefix.utf8) + Array(articleID.utf8))
            #expect(id.name == prefix + articleID && id.name.hashValue == (prefix + articleID).hashValue)
        }
        #expect(
            ReadingHistoryItem.articleID(fromRecordName: ReadingHistoryItem.recordID(for: articleID).name) == articleID)
    }

    @Test func likingChangesAreStrictlyOrderedEvenWithinOneClockTick() throws {
        let liked = try #require(
            ReadingHistoryChange.setLiking(articleID: "a", .liked).applied(to: nil, now: now, deviceID: "d"))
        let unliked = try #require(
            ReadingHistoryChange.setLiking(articleID: "a", .none).applied(to: liked, now: now, deviceID: "d"))
        #expect(unliked.liking == ReadingHistoryItem.Liking.none)
        #expect(unliked.likingChangedAt! > liked.likingChangedAt!)
        #expect(liked.merged(with: unliked).liking == ReadingHistoryItem.Liking.none)
    }

    @Test func badInputIsRejectedBeforeAnythingHappens() {
        expectError(.invalidArticleID) { try ReadingListChange.add(articleID: "").validate() }
        expectError(.invalidArgument) { try ReadingListChange.add(articleID: "a", origin: 7).validate() }
        expectError(.invalidArticleID) { try ReadingHistoryChange.visit(articleID: "bad\u{1}").validate() }
        // ASCII takes a fast path; DEL and the C1 controls must still be caught, and other text let through.
        expectError(.invalidArticleID) { try ReadingHistoryChange.visit(articleID: "bad\u{7F}").validate() }
        expectError(.invalidArticleID) { try ReadingHistoryChange.visit(articleID: "bad\u{85}é").validate() }
        #expect(ArticleID.isValid("A1b2C3d4-é-日本-🙂 ~"))
        expectError(.invalidArgument) { try ReadingHistoryChange.visit(articleID: "a", version: -1).validate() }
    }

    @Test func zoneStateDescribesEachChangeWithTheKeysItChanged() throws {
        var state = ZoneState<ReadingHistoryItem>()
        let visited = ReadingHistoryChange.visit(articleID: "a").applied(to: nil, now: now, deviceID: "d")
        let createdChange = state.replace("a", with: visited, sequence: 1)
        let created = try #require(createdChange)
        #expect(created.changedKeys.isSuperset(of: ["articleID", "lastVisited", "articleRead", "articleSeen"]))
        let liked = ReadingHistoryChange.setLiking(articleID: "a", .liked).applied(to: visited, now: now, deviceID: "d")
        let likedChange = state.replace("a", with: liked, sequence: 2)
        let change = try #require(likedChange)
        #expect(change.changedKeys == ["likingStatus", "likingChangedAt"])
        #expect(change.record == liked?.record)
        let unchanged = state.replace("a", with: liked, sequence: 3)
        #expect(unchanged == nil, "no change, no command")
        let removedChange = state.replace("a", with: nil, sequence: 4)
        let removed = try #require(removedChange)
        #expect(removed.isDelete)
    }

    @Test func itemsFindTheirChangedKeysAsComparingTheirRecordsWould() {
        var random = SeededRandomNumberGenerator(seed: 7)
        func date() -> Date? {
            Int.random(in: 0..<3, using: &random) == 0
                ? nil : now.addingTimeInterval(Double(Int.random(in: 0..<3, using: &random)))
        }
        func historyItem() -> ReadingHistoryItem {
            ReadingHistoryItem(
                articleID: ["a", "b"].randomElement(using: &random)!, lastVisited: date(), firstSeen: date(),
                maxVersionSeen: Int64.random(in: 0..<2, using: &random),
                readCount: Int64.random(in: 0..<2, using: &random),
                deviceID: ["A", "B", nil].randomElement(using: &random)!,
                liking: ReadingHistoryItem.Liking.allCases.randomElement(using: &random)!, likingChangedAt: date(),
                flags: ReadingHistoryItem.Flags(rawValue: Int64.random(in: 0..<32, using: &random))
            )
        }
        func entry() -> ReadingListEntry {
            ReadingListEntry(
                articleID: ["a", "b"].randomElement(using: &random)!, dateAdded: date() ?? now,
                origin: Int64.random(in: 0..<2, using: &random), title: ["x", "y", nil].randomElement(using: &random)!
            )
        }
        for _ in 0..<3_000 {
            let (old, new) = (historyItem(), historyItem())
            #expect(new.changedRecordKeys(since: old) == new.recordKeysChanged(since: old), "\(old) → \(new)")
            #expect(new.changedRecordKeys(since: nil) == new.recordKeysChanged(since: nil))
            let (oldEntry, newEntry) = (entry(), entry())
            #expect(newEntry.changedRecordKeys(since: oldEntry) == newEntry.recordKeysChanged(since: oldEntry))
            #expect(newEntry.changedRecordKeys(since: nil) == newEntry.recordKeysChanged(since: nil))
        }
    }

    @Test func pruningKeepsWhatDesignSection8Keeps() {
        let retention = HistoryRetention.default
        let day: TimeInterval = 86_400
        func item(
            visited: Double?, seen: Double?, liking: ReadingHistoryItem.Liking = .none,
            flags: ReadingHistoryItem.Flags = []
        ) -> ReadingHistoryItem {
            ReadingHistoryItem(
                articleID: "a", lastVisited: visited.map { now.addingTimeInterval(-$0 * day) },
                firstSeen: seen.map { now.addingTimeInterval(-$0 * day) }, liking: liking, flags: flags
            )
        }
        #expect(!retention.isPrunable(item(visited: 89, seen: 200), now: now))
        #expect(retention.isPrunable(item(visited: 91, seen: 200), now: now))
        #expect(!retention.isPrunable(item(visited: nil, seen: 9), now: now))
        #expect(retention.isPrunable(item(visited: nil, seen: 11), now: now))
        #expect(!retention.isPrunable(item(visited: 400, seen: 400, liking: .liked), now: now))
        #expect(!retention.isPrunable(item(visited: 400, seen: 400, liking: .disliked), now: now))
        #expect(!retention.isPrunable(item(visited: 400, seen: 400, flags: .offensive), now: now))
        #expect(!retention.isPrunable(item(visited: 400, seen: 400, flags: .pruningDisabled), now: now))
    }

    @Test func seedingTakesTheNewestThousandPlusAnythingRecent() {
        let retention = HistoryRetention.default
        let items = (0..<1_500).map { i in
            ReadingHistoryItem(
                articleID: "a\(i)", lastVisited: now.addingTimeInterval(-Double(i) * 3_600), flags: [.read])
        }
        // Items are one hour apart: 28 days is 672 hours, so the 1,000 newest cover every recent one.
        #expect(retention.itemsForSeeding(items, now: now).count == 1_000)
        let spread = (0..<1_500).map { i in
            ReadingHistoryItem(articleID: "b\(i)", lastVisited: now.addingTimeInterval(-Double(i) * 60), flags: [.read])
        }
        #expect(retention.itemsForSeeding(spread, now: now).count == 1_500, "all within 28 days")
        let liked = ReadingHistoryItem(articleID: "old-liked", lastVisited: .distantPast, liking: .liked)
        #expect(retention.itemsForSeeding(items + [liked], now: now).contains(liked))
    }
}

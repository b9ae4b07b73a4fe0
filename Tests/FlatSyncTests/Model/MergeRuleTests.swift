import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct MergeRuleTests {
    private static let base = Date(timeIntervalSinceReferenceDate: 800_000_000)

    private static func date(_ random: inout SeededRandomNumberGenerator) -> Date? {
        Int.random(in: 0..<4, using: &random) == 0
            ? nil : base.addingTimeInterval(Double(Int.random(in: 0..<5, using: &random)))
    }

    private static func historyItem(_ random: inout SeededRandomNumberGenerator) -> ReadingHistoryItem {
        ReadingHistoryItem(
            articleID: "a",
            lastVisited: date(&random),
            firstSeen: date(&random),
            maxVersionSeen: Int64.random(in: 0..<3, using: &random),
            readCount: Int64.random(in: 0..<3, using: &random),
            deviceID: ["A", "B", nil].randomElement(using: &random)!,
            liking: ReadingHistoryItem.Liking.allCases.randomElement(using: &random)!,
            likingChangedAt: date(&random),
            flags: ReadingHistoryItem.Flags(rawValue: Int64.random(in: 0..<32, using: &random))
        )
    }

    private static func entry(_ random: inout SeededRandomNumberGenerator) -> ReadingListEntry {
        ReadingListEntry(
            articleID: "a", dateAdded: date(&random) ?? base, origin: Int64.random(in: 0..<2, using: &random),
            title: ["x", "y", nil].randomElement(using: &random)!
        )
    }

    /// Commutative, associative and idempotent: the laws that make devices converge whatever order
    /// changes arrive in.
    private func checkLaws<T: SyncedItem>(_ make: (inout SeededRandomNumberGenerator) -> T, seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        for _ in 0..<2_000 {
            let a = make(&random), b = make(&random), c = make(&random)
            #expect(a.merged(with: b) == b.merged(with: a), "commutative: \(a) \(b)")
            #expect(a.merged(with: b).merged(with: c) == a.merged(with: b.merged(with: c)), "associative")
            #expect(a.merged(with: a) == a, "idempotent")
        }
    }

    @Test func historyMergeIsCommutativeAssociativeAndIdempotent() {
        checkLaws(Self.historyItem, seed: 1)
    }

    @Test func readingListMergeIsCommutativeAssociativeAndIdempotent() {
        checkLaws(Self.entry, seed: 2)
    }

    @Test func laterDateAddedWinsWhole() {
        let early = ReadingListEntry(articleID: "a", dateAdded: Self.base, origin: 3, title: "old")
        let late = ReadingListEntry(articleID: "a", dateAdded: Self.base.addingTimeInterval(1), origin: 0, title: nil)
        #expect(early.merged(with: late) == late)
        #expect(late.merged(with: early) == late)
    }

    @Test func historyMergesFieldByField() {
        let t = Self.base
        let phone = ReadingHistoryItem(
            articleID: "a", lastVisited: t.addingTimeInterval(10), firstSeen: t.addingTimeInterval(5),
            maxVersionSeen: 2,
            readCount: 5, deviceID: "phone", liking: .liked, likingChangedAt: t, flags: [.read]
        )
        let tablet = ReadingHistoryItem(
            articleID: "a", lastVisited: t.addingTimeInterval(20), firstSeen: t, maxVersionSeen: 7, readCount: 1,
            deviceID: "tablet", liking: .none, likingChangedAt: t.addingTimeInterval(1), flags: [.offensive]
        )
        let merged = phone.merged(with: tablet)
        #expect(merged.lastVisited == t.addingTimeInterval(20))
        #expect(merged.deviceID == "tablet", "the device goes with the later visit")
        #expect(merged.firstSeen == t)
        #expect(merged.maxVersionSeen == 7)
        #expect(merged.readCount == 5)
        #expect(merged.flags == [.read, .offensive], "flags are sticky")
        #expect(merged.liking == ReadingHistoryItem.Liking.none, "the later unlike wins")
    }
}

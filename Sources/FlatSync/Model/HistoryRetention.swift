#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How long local history keeps items, and which items seed a fresh zone, as News does (see <doc:Architecture>).
public struct HistoryRetention: Hashable, Sendable {
    /// Items last visited longer ago than this are pruned. Default: 90 days.
    public var visitedLifetime: Duration
    /// Items only ever seen (never visited) are pruned once first seen longer ago than this. Default: 10 days.
    public var seenOnlyLifetime: Duration
    /// A fresh zone is seeded with at most this many of the newest items… Default: 1,000.
    public var seedLimit: Int
    /// …plus every item newer than this. Default: 28 days.
    public var seedRecentWindow: Duration

    /// A retention policy; the defaults are News's limits.
    public init(
        visitedLifetime: Duration = .seconds(90 * 86_400),
        seenOnlyLifetime: Duration = .seconds(10 * 86_400),
        seedLimit: Int = 1_000,
        seedRecentWindow: Duration = .seconds(28 * 86_400)
    ) {
        self.visitedLifetime = visitedLifetime
        self.seenOnlyLifetime = seenOnlyLifetime
        self.seedLimit = seedLimit
        self.seedRecentWindow = seedRecentWindow
    }

    /// News's limits.
    public static let `default` = HistoryRetention()

    /// True when the item may be pruned at `now`. Liked, disliked, offensive and pruning-disabled items
    /// are always kept.
    public func isPrunable(_ item: ReadingHistoryItem, now: Date) -> Bool {
        if item.liking != .none || item.flags.contains(.offensive) || item.flags.contains(.pruningDisabled) {
            return false
        }
        if let lastVisited = item.lastVisited {
            return now.timeIntervalSince(lastVisited) > visitedLifetime.seconds
        }
        guard let firstSeen = item.firstSeen else { return true }
        return now.timeIntervalSince(firstSeen) > seenOnlyLifetime.seconds
    }

    /// The items a fresh zone is seeded with: the `seedLimit` newest, plus any newer than
    /// `seedRecentWindow`, plus every item pruning must keep.
    public func itemsForSeeding(_ items: [ReadingHistoryItem], now: Date) -> [ReadingHistoryItem] {
        func lastActivity(_ item: ReadingHistoryItem) -> Date { item.lastVisited ?? item.firstSeen ?? .distantPast }
        let newestFirst = items.sorted { (lastActivity($0), $0.articleID) > (lastActivity($1), $1.articleID) }
        return newestFirst.enumerated().compactMap { index, item in
            let recent = now.timeIntervalSince(lastActivity(item)) <= seedRecentWindow.seconds
            let kept = item.liking != .none || item.flags.contains(.offensive) || item.flags.contains(.pruningDisabled)
            return index < seedLimit || recent || kept ? item : nil
        }
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the user read, liked and saw.
///
/// Every mutation returns once its change is durable on this device; a ``SyncContext`` sends history
/// changes after a debounce (5 s by default, pushed back by each new change).
///
/// ```swift
/// try await context.history.visit("article-1", version: 2)
/// try await context.history.setLiking("article-1", .liked)
/// ```
public struct ReadingHistory: Sendable {
    let store: LocalStore
    /// The sync engine, told about every durable change so it can send it.
    let observer: (any LocalChangeObserver)?

    /// Records a visit: the article counts as seen and read, and its visit count goes up. Like every
    /// mutation here, returns whether anything changed (marking an article read twice changes nothing).
    @discardableResult
    public func visit(_ articleID: String, version: Int64? = nil) async throws -> Bool {
        try await apply([.visit(articleID: articleID, version: version)]) > 0
    }

    /// Records that the article was shown without being opened.
    @discardableResult
    public func markSeen(_ articleID: String, version: Int64? = nil) async throws -> Bool {
        try await apply([.markSeen(articleID: articleID, version: version)]) > 0
    }

    /// Marks the article read.
    @discardableResult
    public func markRead(_ articleID: String) async throws -> Bool {
        try await apply([.markRead(articleID: articleID)]) > 0
    }

    /// Likes, dislikes, or clears either (`.none`).
    @discardableResult
    public func setLiking(_ articleID: String, _ liking: ReadingHistoryItem.Liking) async throws -> Bool {
        try await apply([.setLiking(articleID: articleID, liking)]) > 0
    }

    /// Marks the article offensive.
    @discardableResult
    public func markOffensive(_ articleID: String) async throws -> Bool {
        try await apply([.markOffensive(articleID: articleID)]) > 0
    }

    /// Marks the article consumed (finished).
    @discardableResult
    public func markConsumed(_ articleID: String) async throws -> Bool {
        try await apply([.markConsumed(articleID: articleID)]) > 0
    }

    /// Keeps the item from ever being pruned.
    @discardableResult
    public func disablePruning(_ articleID: String) async throws -> Bool {
        try await apply([.disablePruning(articleID: articleID)]) > 0
    }

    /// Forgets one article's history, here and (once synced) on every device.
    @discardableResult
    public func remove(_ articleID: String) async throws -> Bool {
        try await apply([.remove(articleID: articleID)]) > 0
    }

    /// Forgets all history, here and (once synced) on every device. Returns how many items were removed.
    @discardableResult
    public func clear() async throws -> Int {
        let ids = await store.zones.history.items.keys.sorted()
        return try await apply(ids.map { .remove(articleID: $0) })
    }

    /// Applies many changes as one durable mutation: all of them or, on an error, none. Returns how many
    /// items changed.
    @discardableResult
    public func apply(_ changes: [ReadingHistoryChange]) async throws -> Int {
        for change in changes { try change.validate() }
        let changed =
            changes.count == 1
            ? try await store.applyDurably(.history(changes[0]))
            : try await store.applyDurably { try $0.applyMutation(\.history, changes) }
        if changed > 0 { await observer?.localChangeDidBecomeDurable(in: .readingHistory, debounce: nil) }
        return changed
    }

    /// The item for an article, if there is one.
    public func item(_ articleID: String) async -> ReadingHistoryItem? {
        await store.zones.history.items[articleID]
    }

    /// The item's record as the server knows it: the item's fields, any field another client wrote that
    /// FlatSync does not use (kept as it came, never sent back), and the change tag last seen.
    public func record(_ articleID: String) async -> Record? {
        await store.zones.history.fullRecord(forArticle: articleID)
    }

    /// Every item, most recently visited (or seen) first; ties in that time go by article ID, descending.
    ///
    /// The store keeps its items in this order (restoring it lazily after changes), so the array returned
    /// is the store's own and costs no copy; the store copies it only if it changes while you hold it.
    public func items() async -> [ReadingHistoryItem] {
        await store.historyItemsNewestFirst()
    }

    /// The number of items.
    public func count() async -> Int {
        await store.zones.history.items.count
    }

    /// A stream of the IDs of the articles whose items changed (a visit, a liking, a prune, a change
    /// fetched from another device, a conflict's merge, a reset, a wipe when the account changes or the
    /// user deletes the zone), from now on, one element per change the history takes in, sorted. It ends
    /// when the store (or the context that holds it) closes. Read the items again with ``item(_:)``.
    public func changes() -> AsyncStream<[String]> {
        store.recordChangeHub.subscribe(zone: .readingHistory, recordType: ReadingHistoryItem.recordType)
    }

    /// Removes items past their retention (see <doc:Architecture>) from this device; the server keeps its copies.
    /// Returns how many were removed.
    @discardableResult
    public func prune() async -> Int {
        await store.pruneHistory(now: store.options.currentDate())
    }
}

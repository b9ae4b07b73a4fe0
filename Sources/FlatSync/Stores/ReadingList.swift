#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The articles the user saved to read later.
///
/// Every mutation returns once its change is durable on this device; a ``SyncContext`` sends it to the
/// server at once (reading-list changes are urgent). Article IDs are checked first: a bad one throws
/// ``FlatSyncError/Code-swift.struct/invalidArticleID`` and nothing is written.
///
/// ```swift
/// try await context.readingList.add("article-1", title: "Tides")
/// let newestFirst = await context.readingList.entries()
/// ```
public struct ReadingList: Sendable {
    let store: LocalStore
    /// The sync engine, told about every durable change so it can send it.
    let observer: (any LocalChangeObserver)?

    /// Saves an article. Returns false if it was already on the list (nothing changes then).
    @discardableResult
    public func add(_ articleID: String, title: String? = nil, origin: Int64 = 0) async throws -> Bool {
        try await apply([.add(articleID: articleID, title: title, origin: origin)]) > 0
    }

    /// Removes an article. Returns false if it was not on the list.
    @discardableResult
    public func remove(_ articleID: String) async throws -> Bool {
        try await apply([.remove(articleID: articleID)]) > 0
    }

    /// Applies many changes as one durable mutation: all of them or, on an error, none. Returns how many
    /// entries changed.
    @discardableResult
    public func apply(_ changes: [ReadingListChange]) async throws -> Int {
        for change in changes { try change.validate() }
        let changed =
            changes.count == 1
            ? try await store.applyDurably(.readingList(changes[0]))
            : try await store.applyDurably { try $0.applyMutation(\.readingList, changes) }
        if changed > 0 { await observer?.localChangeDidBecomeDurable(in: .readingList, debounce: nil) }
        return changed
    }

    /// True when the article is on the list.
    public func contains(_ articleID: String) async -> Bool {
        await store.zones.readingList.items[articleID] != nil
    }

    /// The entry for an article, if it is on the list.
    public func entry(_ articleID: String) async -> ReadingListEntry? {
        await store.zones.readingList.items[articleID]
    }

    /// The entry's record as the server knows it: the entry's fields, any field another client wrote that
    /// FlatSync does not use (kept as it came, never sent back), and the change tag last seen.
    public func record(_ articleID: String) async -> Record? {
        await store.zones.readingList.fullRecord(forArticle: articleID)
    }

    /// Every entry, most recently saved first.
    public func entries() async -> [ReadingListEntry] {
        await store.zones.readingList.items.values.sorted {
            ($0.dateAdded, $0.articleID) > ($1.dateAdded, $1.articleID)
        }
    }

    /// The number of saved articles.
    public func count() async -> Int {
        await store.zones.readingList.items.count
    }
}

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

    /// Removes items past their retention (see <doc:Architecture>) from this device; the server keeps its copies.
    /// Returns how many were removed.
    @discardableResult
    public func prune() async -> Int {
        await store.pruneHistory(now: store.options.currentDate())
    }
}

/// Hears about local changes once they are durable; the sync engine schedules sends this way.
package protocol LocalChangeObserver: Sendable {
    /// A change in `zone` is durable: send it after `debounce`, or after the zone's own (the history's,
    /// else at once) when nil.
    func localChangeDidBecomeDurable(in zone: ZoneID, debounce: Duration?) async
}

/// A change to one article's item, as the batch APIs take them: ``ReadingListChange`` or
/// ``ReadingHistoryChange``.
package protocol ItemChange: Sendable {
    associatedtype Item: RecordDiffable
    /// The article the change is about.
    var articleID: String { get }
    /// The item after the change, given the item before it.
    func applied(to item: Item?, now: Date, device: DeviceName) -> Item?
}

extension ReadingListChange: ItemChange {
    package func applied(to entry: ReadingListEntry?, now: Date, device: DeviceName) -> ReadingListEntry? {
        applied(to: entry, now: now)
    }
}

extension ReadingHistoryChange: ItemChange {}

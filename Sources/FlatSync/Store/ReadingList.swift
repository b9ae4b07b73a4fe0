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

    /// A stream of the IDs of the articles whose entries changed (saved, edited or removed, here or on
    /// another device: a fetch, a conflict's merge, a reset, a wipe when the account changes or the user
    /// deletes the zone), from now on, one element per change the list takes in, sorted. It ends when the
    /// store (or the context that holds it) closes.
    ///
    /// ```swift
    /// for await articleIDs in context.readingList.changes() {
    ///     for articleID in articleIDs {
    ///         let entry = await context.readingList.entry(articleID)  // nil: removed
    ///         print(articleID, entry?.title ?? "removed")
    ///     }
    /// }
    /// ```
    public func changes() -> AsyncStream<[String]> {
        store.recordChangeHub.subscribe(zone: .readingList, recordType: ReadingListEntry.recordType)
    }
}

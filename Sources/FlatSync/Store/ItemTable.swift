/// The items of one zone by article ID: what ``ZoneState`` keeps. The reading list, small, keeps a
/// dictionary (``ItemDictionary``); the history, up to 100,000 items and more, keeps a compact table
/// (``HistoryTable``).
package protocol ItemTable<Item>: Sendable, Equatable {
    associatedtype Item: SyncedItem

    /// An empty table.
    init()

    /// The number of items.
    var count: Int { get }

    /// The item of an article, or nil; setting nil removes it.
    subscript(articleID: String) -> Item? { get set }

    /// Stores `item` under its article ID (`articleID`, which must be the item's), returning the item it
    /// replaced.
    @discardableResult
    mutating func updateValue(_ item: Item, forKey articleID: String) -> Item?

    /// Removes the item of an article, returning it.
    @discardableResult
    mutating func removeValue(forKey articleID: String) -> Item?

    /// Runs `body` with the item of an article (nil for none) and stores what it leaves (nil removes it),
    /// finding the article once.
    mutating func modify<R>(_ articleID: String, _ body: (inout Item?) -> R) -> R

    /// Every article ID, in no particular order.
    var keys: [String] { get }

    /// Every item, in no particular order.
    var values: [Item] { get }

    /// Makes room for `capacity` items.
    mutating func reserveCapacity(_ capacity: Int)

    // The change tags of the zone's records, by record name: the table keeps them, so that the history's
    // can sit beside its items (see ``HistoryTable``).

    /// The change tag of the record named `name`, whether the table has its item or not.
    func changeTag(of name: String) -> ChangeTag?
    /// Sets the change tag of the record named `name`, or forgets it (nil).
    mutating func setChangeTag(_ tag: ChangeTag?, of name: String)
    /// How many records have a tag.
    var changeTagCount: Int { get }
    /// The name of every record with a tag.
    var changeTagNames: [String] { get }
    /// Calls `body` with each record name, in two parts (prefix and rest), and its tag, in the order a
    /// snapshot writes them.
    func forEachChangeTag(_ body: (_ prefix: UnsafeRawBufferPointer, _ rest: UnsafeRawBufferPointer, ChangeTag) -> Void)
    /// Takes a snapshot's tags into a table that has no tags yet: `read` calls `add` with each tag and its
    /// record name (valid UTF-8 bytes, and whether they are all ASCII), in the order
    /// ``forEachChangeTag(_:)`` gave them. A name given twice keeps its later tag. `expectedCount` is a
    /// hint for a table that sizes its storage of tags up front.
    mutating func loadChangeTags(
        expectedCount: Int,
        _ read: (_ add: (ChangeTagTable.SnapshotLoader.Tag, UnsafeRawBufferPointer, Bool) -> Void) throws(FlatSyncError)
            -> Void
    ) throws(FlatSyncError)
}

extension ItemTable {
    /// True when the table holds no item.
    package var isEmpty: Bool { count == 0 }
}

/// An item type and the table its zone keeps it in.
package protocol TableItem: SyncedItem {
    /// The table a zone of these items keeps.
    associatedtype Table: ItemTable<Self>
    /// The fields of the items' records: any other field of a fetched record was written by another client
    /// (see ``ZoneState/unknownFields``).
    static var knownRecordKeys: Set<String> { get }
    /// False for ``HostZoneItem``, whose zones hold host records only: then no record name is an item's.
    static var holdsItems: Bool { get }
}

extension TableItem {
    package static var holdsItems: Bool { true }
}

extension ReadingListEntry {
    package static let knownRecordKeys: Set<String> = ["articleID", "dateAdded", "origin", "title"]
}

extension ReadingHistoryItem {
    package static let knownRecordKeys = Set(recordKeys)
}

/// Items by article ID in a ``HashedTable``: the reading list's table.
package struct ItemDictionary<Item: SyncedItem>: ItemTable {
    private var items = HashedTable<String, Item>()
    private var changeTags = ChangeTagTable()

    package init() {}

    package var count: Int { items.count }

    package subscript(articleID: String) -> Item? {
        get { items[articleID] }
        set { items[articleID] = newValue }
    }

    @discardableResult
    package mutating func updateValue(_ item: Item, forKey articleID: String) -> Item? {
        items.updateValue(item, forKey: articleID)
    }

    @discardableResult
    package mutating func removeValue(forKey articleID: String) -> Item? {
        items.removeValue(forKey: articleID)
    }

    package mutating func modify<R>(_ articleID: String, _ body: (inout Item?) -> R) -> R {
        items.modify(articleID, body)
    }

    package var keys: [String] { items.allKeys }

    package var values: [Item] { items.values }

    package mutating func reserveCapacity(_ capacity: Int) {
        items.reserveCapacity(capacity)
    }

    package func changeTag(of name: String) -> ChangeTag? { changeTags[name] }

    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) { changeTags[name] = tag }

    package var changeTagCount: Int { changeTags.count }

    package var changeTagNames: [String] { changeTags.names }

    package func forEachChangeTag(
        _ body: (_ prefix: UnsafeRawBufferPointer, _ rest: UnsafeRawBufferPointer, ChangeTag) -> Void
    ) {
        changeTags.forEachName(body)
    }

    package mutating func loadChangeTags(
        expectedCount: Int,
        _ read: (_ add: (ChangeTagTable.SnapshotLoader.Tag, UnsafeRawBufferPointer, Bool) -> Void) throws(FlatSyncError)
            -> Void
    ) throws(FlatSyncError) {
        precondition(changeTags.isEmpty, "a table takes a snapshot's tags once")
        var loader = ChangeTagTable.SnapshotLoader(count: expectedCount)
        try read { loader.append($0, nameUTF8: $1, isASCII: $2) }
        changeTags = loader.finish()
    }
}

extension ReadingListEntry: TableItem {
    package typealias Table = ItemDictionary<ReadingListEntry>
}

extension ReadingHistoryItem: TableItem {
    package typealias Table = HistoryTable
}

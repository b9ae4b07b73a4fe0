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
}

extension ItemTable {
    /// True when the table holds no item.
    package var isEmpty: Bool { count == 0 }
}

/// An item type and the table its zone keeps it in.
package protocol TableItem: SyncedItem {
    /// The table a zone of these items keeps.
    associatedtype Table: ItemTable<Self>
}

/// Items in a `[String: Item]`: the reading list's table.
package struct ItemDictionary<Item: SyncedItem>: ItemTable {
    private var items: [String: Item] = [:]

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
        body(&items[articleID])
    }

    package var keys: [String] { Array(items.keys) }

    package var values: [Item] { Array(items.values) }

    package mutating func reserveCapacity(_ capacity: Int) {
        items.reserveCapacity(capacity)
    }
}

extension ReadingListEntry: TableItem {
    package typealias Table = ItemDictionary<ReadingListEntry>
}

extension ReadingHistoryItem: TableItem {
    package typealias Table = HistoryTable
}

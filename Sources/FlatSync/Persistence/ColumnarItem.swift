#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An item a built-in store keeps in its own table, and writes in its snapshot file in its own form: one
/// packed column per field. The snapshot file holds the columns by name and knows nothing of the item type
/// (``ReadingListEntry`` and ``ReadingHistoryItem`` supply theirs beside their types; a zone of host
/// records only has none, see `HostZoneItem`).
package protocol ColumnarItem: TableItem {
    /// The items' fields as named columns.
    static func columns(of items: [Self]) -> [String: Data]
    /// The table of `count` items read from the snapshot's columns, each of which the reader must read
    /// to its end (``SnapshotColumns/finish(_:)``).
    static func table(from columns: inout SnapshotColumns, count: Int) throws(FlatSyncError) -> Table
}

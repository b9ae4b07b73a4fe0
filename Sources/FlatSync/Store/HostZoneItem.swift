#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The item type of a zone that only host-defined stores use (see ``SyncableRecord``): there is no such
/// item, so the zone's ``ZoneState`` holds host records only (``ZoneState/hostRecords``) and its item
/// table stays empty. It lets such a zone share every part of the engine the built-in zones use: its
/// state, snapshot file, fetch and sends.
package struct HostZoneItem: ColumnarItem {
    package typealias Table = ItemDictionary<HostZoneItem>

    package static var holdsItems: Bool { false }
    package static let knownRecordKeys: Set<String> = []
    /// Never read: a host zone's state knows its zone from where it is kept (``ZoneStates/hostZones``), and
    /// the code that would read this (``owns``-guarded) never runs for a type that holds no items.
    package static var zone: ZoneID { ZoneID("") }
    package static var recordType: String { "" }
    package static var recordNamePrefix: String { "" }

    /// Never called: there are no such items (a struct rather than an empty enum, whose members the
    /// compiler would flag as code that never runs).
    private init() {}

    package var articleID: String { "" }
    package var record: Record { Record(id: RecordID(zone: Self.zone, name: ""), type: "") }
    package init(record: Record) throws(FlatSyncError) {
        throw FlatSyncError(.malformedRecord, "The zone \(record.id.zone) holds no built-in items.")
    }
    package func merged(with other: HostZoneItem) -> HostZoneItem { self }

    package static func columns(of items: [HostZoneItem]) -> [String: Data] { [:] }
    package static func table(from columns: inout SnapshotColumns, count: Int) throws(FlatSyncError) -> Table {
        guard count == 0 else {
            throw FlatSyncError(.damagedFile, "The snapshot of a host zone lists \(count) built-in items.")
        }
        return Table()
    }
}

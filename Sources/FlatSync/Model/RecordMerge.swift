/// Merging records of either zone by the zone's rules (see <doc:HowSyncWorks>), for conflicts and for laying pending
/// changes over fetched records.
package enum RecordMerge {
    /// The merge of two versions of a record, or nil when either does not decode as its zone's item.
    package static func merge(_ local: Record, _ server: Record) -> Record? {
        switch local.id.zone {
        case .readingList: return merge(ReadingListEntry.self, local, server)
        case .readingHistory: return merge(ReadingHistoryItem.self, local, server)
        default: return nil
        }
    }

    /// The record with only the fields its zone's item uses (the item's own record), or nil when it does not
    /// decode as one.
    package static func known(_ record: Record) -> Record? {
        switch record.id.zone {
        case .readingList: return (try? ReadingListEntry(record: record))?.record
        case .readingHistory: return (try? ReadingHistoryItem(record: record))?.record
        default: return nil
        }
    }

    private static func merge<Item: SyncedItem>(_ type: Item.Type, _ local: Record, _ server: Record) -> Record? {
        guard let mine = try? Item(record: local), let theirs = try? Item(record: server) else { return nil }
        return mine.merged(with: theirs).record
    }
}

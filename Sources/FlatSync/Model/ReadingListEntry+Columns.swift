#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The reading list's own form in its snapshot: a column per field.
extension ReadingListEntry: ColumnarItem {
    package static func columns(of items: [ReadingListEntry]) -> [String: Data] {
        var ids = BinaryWriter(capacity: items.count * 24)
        var dates = BinaryWriter(capacity: items.count * 8)
        var origins = BinaryWriter(capacity: items.count)
        var titles = BinaryWriter(capacity: items.count * 4)
        for item in items {
            ids.write(item.articleID)
            dates.write(item.dateAdded)
            origins.write(signed: item.origin)
            titles.write(item.title)
        }
        return ["articleID": ids.data, "dateAdded": dates.data, "origin": origins.data, "title": titles.data]
    }

    package static func table(from columns: inout SnapshotColumns, count: Int) throws(FlatSyncError) -> Table {
        var ids = try columns.cursor("articleID")
        var dates = try columns.cursor("dateAdded")
        var origins = try columns.cursor("origin")
        var titles = try columns.cursor("title")
        var table = Table()
        table.reserveCapacity(min(count, columns.itemLimit("articleID")))
        for _ in 0..<count {
            let entry = ReadingListEntry(
                articleID: try ids.readString(), dateAdded: try dates.readDate(), origin: try origins.readSigned(),
                title: try titles.readOptionalString()
            )
            table[entry.articleID] = entry
        }
        try columns.finish(ids)
        try columns.finish(dates)
        try columns.finish(origins)
        try columns.finish(titles)
        return table
    }
}

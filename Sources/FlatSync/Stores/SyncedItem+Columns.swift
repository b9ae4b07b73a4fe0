import Foundation

// Snapshot columns of both item types. Optional dates use NaN for "none"; optional strings a presence
// byte. Column names match the record's field names where there is one.

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

    package static func items(from columns: [String: Data], count: Int) throws(FlatSyncError) -> [ReadingListEntry] {
        let ids = try ColumnReader(columns, "articleID").values(count) { (r) throws(FlatSyncError) in try r.readString()
        }
        let dates = try ColumnReader(columns, "dateAdded").values(count) { (r) throws(FlatSyncError) in try r.readDate()
        }
        let origins = try ColumnReader(columns, "origin").values(count) { (r) throws(FlatSyncError) in
            try r.readSigned()
        }
        let titles = try ColumnReader(columns, "title").values(count) { (r) throws(FlatSyncError) in
            try r.readOptionalString()
        }
        return (0..<count).map { i in
            ReadingListEntry(articleID: ids[i], dateAdded: dates[i], origin: origins[i], title: titles[i])
        }
    }
}

extension ReadingHistoryItem: ColumnarItem {
    package static func columns(of items: [ReadingHistoryItem]) -> [String: Data] {
        var ids = BinaryWriter(capacity: items.count * 24)
        var lastVisited = BinaryWriter(capacity: items.count * 8)
        var firstSeen = BinaryWriter(capacity: items.count * 8)
        var versions = BinaryWriter(capacity: items.count)
        var counts = BinaryWriter(capacity: items.count)
        var devices = BinaryWriter(capacity: items.count * 8)
        var liking = BinaryWriter(capacity: items.count)
        var likingChangedAt = BinaryWriter(capacity: items.count * 8)
        var flags = BinaryWriter(capacity: items.count)
        for item in items {
            ids.write(item.articleID)
            lastVisited.write(item.lastVisited?.timeIntervalSinceReferenceDate ?? .nan)
            firstSeen.write(item.firstSeen?.timeIntervalSinceReferenceDate ?? .nan)
            versions.write(signed: item.maxVersionSeen)
            counts.write(signed: item.readCount)
            devices.write(item.deviceID)
            liking.write(signed: item.liking.rawValue)
            likingChangedAt.write(item.likingChangedAt?.timeIntervalSinceReferenceDate ?? .nan)
            flags.write(signed: item.flags.rawValue)
        }
        return [
            "articleID": ids.data, "lastVisited": lastVisited.data, "firstSeen": firstSeen.data,
            "maxVersionSeen": versions.data, "readCount": counts.data, "deviceID": devices.data,
            "likingStatus": liking.data, "likingChangedAt": likingChangedAt.data, "flags": flags.data,
        ]
    }

    package static func items(from columns: [String: Data], count: Int) throws(FlatSyncError) -> [ReadingHistoryItem] {
        func optionalDate(_ reader: inout BinaryReader) throws(FlatSyncError) -> Date? {
            let value = try reader.readDouble()
            return value.isNaN ? nil : Date(timeIntervalSinceReferenceDate: value)
        }
        let ids = try ColumnReader(columns, "articleID").values(count) { (r) throws(FlatSyncError) in try r.readString()
        }
        let lastVisited = try ColumnReader(columns, "lastVisited").values(count, optionalDate)
        let firstSeen = try ColumnReader(columns, "firstSeen").values(count, optionalDate)
        let versions = try ColumnReader(columns, "maxVersionSeen").values(count) { (r) throws(FlatSyncError) in
            try r.readSigned()
        }
        let counts = try ColumnReader(columns, "readCount").values(count) { (r) throws(FlatSyncError) in
            try r.readSigned()
        }
        // A handful of devices visit everything: items share their device ID strings instead of holding
        // 100,000 copies of a few (8 MB of a 100k cold start's peak memory).
        var recentDevices: [String] = []
        let devices = try ColumnReader(columns, "deviceID").values(count) { (r) throws(FlatSyncError) in
            try r.readOptionalString(reusing: &recentDevices)
        }
        let liking = try ColumnReader(columns, "likingStatus").values(count) { (r) throws(FlatSyncError) in
            let raw = try r.readSigned()
            guard let value = Liking(rawValue: raw) else {
                throw FlatSyncError(.damagedFile, "Unknown liking status \(raw).")
            }
            return value
        }
        let likingChangedAt = try ColumnReader(columns, "likingChangedAt").values(count, optionalDate)
        let flags = try ColumnReader(columns, "flags").values(count) { (r) throws(FlatSyncError) in try r.readSigned() }
        return (0..<count).map { i in
            ReadingHistoryItem(
                articleID: ids[i], lastVisited: lastVisited[i], firstSeen: firstSeen[i], maxVersionSeen: versions[i],
                readCount: counts[i], deviceID: devices[i], liking: liking[i], likingChangedAt: likingChangedAt[i],
                flags: Flags(rawValue: flags[i])
            )
        }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The history's own form in its snapshot: a column per field. Optional dates use NaN for "none"; optional
/// strings a presence byte. Column names match the record's field names where there is one.
extension ReadingHistoryItem: ColumnarItem {
    package static func columns(of items: [ReadingHistoryItem]) -> [String: Data] {
        var ids = BinaryWriter(capacity: items.count * 24)
        var lastVisited = BinaryWriter(capacity: items.count * 8)
        var firstSeen = BinaryWriter(capacity: items.count * 8)
        var versions = BinaryWriter(capacity: items.count)
        var counts = BinaryWriter(capacity: items.count)
        // Each device ID once, and per item its index + 1 (0 for none): a handful of devices visit everything,
        // and a 36-byte ID with every item was 40 % of a history snapshot.
        var deviceIDs = BinaryWriter()
        var deviceIndex = BinaryWriter(capacity: items.count)
        var devices: [String: UInt64] = [:]
        var lastDevice: (name: DeviceName, number: UInt64)?
        var liking = BinaryWriter(capacity: items.count)
        var likingChangedAt = BinaryWriter(capacity: items.count * 8)
        var flags = BinaryWriter(capacity: items.count)
        for item in items {
            item.compactArticleID.withUTF8 { utf8 in
                ids.write(varint: UInt64(utf8.count))
                ids.write(raw: utf8)
            }
            lastVisited.write(item.lastVisitedTime)
            firstSeen.write(item.firstSeenTime)
            versions.write(signed: item.maxVersionSeen)
            counts.write(signed: item.readCount)
            if let device = item.device {
                let number: UInt64
                if let last = lastDevice, last.name === device {
                    number = last.number
                } else if let known = devices[device.value] {
                    number = known
                } else {
                    number = UInt64(devices.count + 1)
                    devices[device.value] = number
                    deviceIDs.write(device.value)
                }
                lastDevice = (device, number)
                deviceIndex.write(varint: number)
            } else {
                deviceIndex.write(varint: 0)
            }
            liking.write(signed: item.liking.rawValue)
            likingChangedAt.write(item.likingChangedAtTime)
            flags.write(signed: item.flags.rawValue)
        }
        return [
            "articleID": ids.data, "lastVisited": lastVisited.data, "firstSeen": firstSeen.data,
            "maxVersionSeen": versions.data, "readCount": counts.data, "deviceIDs": deviceIDs.data,
            "deviceIndex": deviceIndex.data,
            "likingStatus": liking.data, "likingChangedAt": likingChangedAt.data, "flags": flags.data,
        ]
    }

    package static func table(from columns: inout SnapshotColumns, count: Int) throws(FlatSyncError) -> Table {
        var ids = try columns.cursor("articleID")
        var lastVisited = try columns.cursor("lastVisited")
        var firstSeen = try columns.cursor("firstSeen")
        var versions = try columns.cursor("maxVersionSeen")
        var counts = try columns.cursor("readCount")
        // Format 2: the device IDs once, an index per item; format 1: the ID (or none) with every item.
        var devices = try DeviceColumn(&columns)
        var likings = try columns.cursor("likingStatus")
        var likingChangedAt = try columns.cursor("likingChangedAt")
        var flags = try columns.cursor("flags")
        // The checksum is checked once everything is read: trust the count only as far as the bytes go.
        var loader = Table.SnapshotLoader(count: min(count, columns.itemLimit("articleID")))
        for _ in 0..<count {
            let articleID = try ids.readCompactString()
            let visited = try lastVisited.readDouble()
            let seen = try firstSeen.readDouble()
            let version = try versions.readSigned()
            let readCount = try counts.readSigned()
            let device = try devices.next()
            let rawLiking = try likings.readSigned()
            guard let liking = Liking(rawValue: rawLiking) else {
                throw FlatSyncError(.damagedFile, "Unknown liking status \(rawLiking).")
            }
            let likingTime = try likingChangedAt.readDouble()
            loader.append(
                ReadingHistoryItem(
                    compactArticleID: articleID, lastVisitedTime: visited, firstSeenTime: seen,
                    maxVersionSeen: version, readCount: readCount, device: device, liking: liking,
                    likingChangedAtTime: likingTime, flags: Flags(rawValue: try flags.readSigned())
                ))
        }
        let table = loader.finish()
        try columns.finish(ids)
        try columns.finish(lastVisited)
        try columns.finish(firstSeen)
        try columns.finish(versions)
        try columns.finish(counts)
        try devices.finish(&columns)
        try columns.finish(likings)
        try columns.finish(likingChangedAt)
        try columns.finish(flags)
        return table
    }
}

/// The device IDs of history items in a snapshot: format 2's table of IDs and index per item, or format 1's
/// optional string per item. Either way items share one string per device instead of holding 100,000
/// copies of a few.
private struct DeviceColumn: ~Copyable {
    private var cursor: ColumnCursor
    private let table: [DeviceName]?
    private var recent: [DeviceName] = []
    private var recentStrings: [String] = []

    init(_ columns: inout SnapshotColumns) throws(FlatSyncError) {
        let table = columns.has("deviceIndex") ? try Self.readTable(&columns) : nil
        let cursor = try columns.cursor(table == nil ? "deviceID" : "deviceIndex")
        self.table = table
        self.cursor = cursor
    }

    private static func readTable(_ columns: inout SnapshotColumns) throws(FlatSyncError) -> [DeviceName] {
        var ids = try columns.cursor("deviceIDs")
        var table: [DeviceName] = []
        while !ids.isAtEnd { table.append(DeviceName.named(try ids.readString())) }
        try columns.finish(ids)
        return table
    }

    mutating func next() throws(FlatSyncError) -> DeviceName? {
        guard let table else {
            // Format 1: the string of every item, shared through a few recent ones.
            guard let id = try cursor.readOptionalString(reusing: &recentStrings) else { return nil }
            if let name = recent.first(where: { $0.value == id }) { return name }
            let name = DeviceName.named(id)
            recent.insert(name, at: 0)
            if recent.count > 4 { recent.removeLast() }
            return name
        }
        let number = try cursor.readVarint()
        guard number > 0 else { return nil }
        guard number <= UInt64(table.count) else {
            throw FlatSyncError(.damagedFile, "A device index points past the \(table.count) device IDs.")
        }
        return table[Int(number - 1)]
    }

    consuming func finish(_ columns: inout SnapshotColumns) throws(FlatSyncError) {
        try columns.finish(cursor)
    }
}

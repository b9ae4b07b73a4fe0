#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Reading a snapshot without holding it: the binary property list's structure is read from its trailer,
// offset table and top-level dictionary, and each packed column is streamed through a small buffer
// straight into the zone's table, so that a cold start holds 16 KB per column rather than the file, a copy
// of every column and an array per column at once.
//
// The checksum is the one `SnapshotFile` computes over its fields in a fixed order; the columns are read
// side by side, so each piece's CRC is computed as it streams and the pieces are combined afterwards.

extension SnapshotFile {
    /// Reads the zone state of a snapshot from `source`, streaming its columns into the zone's table.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/damagedFile`` when the bytes are not an intact snapshot
    ///   of `Item`'s zone; ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion`` for another format.
    package static func readState<Item: ColumnarItem>(
        of type: Item.Type, zone expectedZone: ZoneID = Item.zone, from source: some SnapshotSource, path: String
    ) throws(FlatSyncError) -> ZoneState<Item> {
        let plist: SnapshotPlist
        do {
            plist = try SnapshotPlist(source)
        } catch  where error.code == .ioFailed {
            // A read that failed says nothing about the file: taking it for damage would quarantine a good
            // snapshot, and with it whatever the log no longer holds (found by the I/O-error sweep).
            throw error
        } catch {
            throw FlatSyncError(.damagedFile, "The snapshot is not a readable property list.", cause: error, path: path)
        }
        func damaged(_ what: String) -> FlatSyncError {
            FlatSyncError(.damagedFile, "The snapshot's structure is damaged: \(what).", path: path)
        }
        func int(_ key: String) throws(FlatSyncError) -> UInt64 {
            guard case .int(let value)? = plist.values[key] else { throw damaged("no integer \(key)") }
            return value
        }
        func range(_ key: String, required: Bool) throws(FlatSyncError) -> Range<Int>? {
            switch plist.values[key] {
            case .data(let range)?: return range
            case nil where !required: return nil
            default: throw damaged("no data \(key)")
            }
        }
        guard case .int(let version)? = plist.values["formatVersion"] else { throw damaged("no format version") }
        guard version <= UInt64(readableFormatVersions.upperBound), readableFormatVersions.contains(Int(version)) else {
            throw FlatSyncError(
                .unsupportedFormatVersion,
                "The snapshot has format version \(version); this FlatSync reads versions "
                    + "\(readableFormatVersions.lowerBound) to \(readableFormatVersions.upperBound).",
                path: path
            )
        }
        guard case .string(let zone)? = plist.values["zone"] else { throw damaged("no zone") }
        let appliedThroughSequence = try int("appliedThroughSequence")
        let itemCount = try int("itemCount")
        let checksum = try int("checksum")
        guard itemCount <= UInt64(source.count), checksum <= UInt64(UInt32.max) else { throw damaged("bad counts") }
        guard case .dictionary(let columnValues)? = plist.values["columns"] else { throw damaged("no columns") }
        var columnRanges: [String: Range<Int>] = [:]
        for (name, value) in columnValues {
            guard case .data(let range) = value else { throw damaged("column \(name) is not data") }
            columnRanges[name] = range
        }
        let tokenRange = try range("changeToken", required: false)
        let tagNames = try range("changeTagNames", required: true)!
        let tagValues = try range("changeTagValues", required: true)!
        let created = try range("createdSinceFetch", required: false)
        let skipped = try range("skippedVersions", required: false)
        let unknown = try range("unknownFields", required: false)
        let whole = try range("sendWhole", required: false)
        let bases = try range("mergeBases", required: false)
        let unknownFates = try range("savesOfUnknownFate", required: false)
        let firstVersionHost = try range("hostRecords", required: false)
        let host = try range("hostRecordTable", required: false)
        let hostOffsets = try range("hostRecordOffsets", required: false)
        let unconfirmed = try range("unconfirmedByReset", required: false)
        let token = try tokenRange.map { (range) throws(FlatSyncError) -> Data in
            Data(try source.bytes(at: range.lowerBound, count: range.count))
        }
        guard zone == expectedZone.name else {
            throw FlatSyncError(.damagedFile, "The snapshot holds zone \(zone), not \(expectedZone.name).", path: path)
        }

        var state = ZoneState<Item>()
        state.changeToken = token.map(ChangeToken.init(data:))
        state.appliedThroughSequence = appliedThroughSequence
        var columns = SnapshotColumns(source: source, ranges: columnRanges)
        var crc = headerChecksum(
            formatVersion: Int(version), zone: zone, changeToken: token, appliedThroughSequence: appliedThroughSequence,
            itemCount: Int(itemCount))
        /// The record names in `range`, as ``encode(names:)`` wrote them, counted in the checksum.
        func recordNames(in range: Range<Int>, _ key: String) throws(FlatSyncError) -> Set<String> {
            var cursor = ColumnCursor(source: source, range: range, name: key)
            var names = Set<String>()
            while !cursor.isAtEnd { names.insert(try cursor.readString()) }
            crc = CRC32.combine(crc, cursor.checksum, length: range.count)
            return names
        }
        do throws(FlatSyncError) {
            state.items = try Item.table(from: &columns, count: Int(itemCount))
            for name in columnRanges.keys.sorted() {
                var columnCRC = columns.checksums[name]
                if columnCRC == nil {
                    // A column this version does not read still counts in the checksum.
                    var cursor = try columns.cursor(name)
                    try cursor.skipToEnd()
                    columnCRC = cursor.checksum
                }
                crc = CRC32.checksum(Data(name.utf8), continuing: crc)
                crc = CRC32.combine(crc, columnCRC!, length: columnRanges[name]!.count)
            }
            var names = ColumnCursor(source: source, range: tagNames, name: "changeTagNames")
            var tags = ColumnCursor(source: source, range: tagValues, name: "changeTagValues")
            // A table that sizes its tags up front (the reading list's) makes room for a name per two bytes
            // of the column at most (a length and a character; an empty name takes one byte, and the arrays
            // grow if this falls short), and for no more than one per item, as a synced zone has.
            try state.items.loadChangeTags(expectedCount: min(tagNames.count / 2, max(Int(itemCount), 16))) {
                (add) throws(FlatSyncError) in
                while !names.isAtEnd {
                    let tag = try tags.readStringBytes { utf8, _ in ChangeTagTable.SnapshotLoader.Tag(utf8: utf8) }
                    try names.readStringBytes { add(tag, $0, $1) }
                }
            }
            guard tags.isAtEnd else { throw FlatSyncError(.damagedFile, "Change tag columns differ in length.") }
            crc = CRC32.combine(crc, names.checksum, length: tagNames.count)
            crc = CRC32.combine(crc, tags.checksum, length: tagValues.count)
            if let created { state.createdSinceFetch = try recordNames(in: created, "createdSinceFetch") }
            if let skipped {
                var cursor = ColumnCursor(source: source, range: skipped, name: "skippedVersions")
                while !cursor.isAtEnd {
                    state.skippedVersions[try cursor.readString()] = ChangeTag(try cursor.readString())
                }
                crc = CRC32.combine(crc, cursor.checksum, length: skipped.count)
            }
            if let unknown {
                // Rare and small (fields other clients wrote): read whole, with the log's field codec.
                let bytes = Data(try source.bytes(at: unknown.lowerBound, count: unknown.count))
                crc = CRC32.checksum(bytes, continuing: crc)
                state.unknownFields = try decode(unknownFields: bytes)
            }
            if let whole { state.sendWhole = try recordNames(in: whole, "sendWhole") }
            if let bases {
                // Rare and small, as the unknown fields, and laid out as they are.
                let bytes = Data(try source.bytes(at: bases.lowerBound, count: bases.count))
                crc = CRC32.checksum(bytes, continuing: crc)
                state.mergeBases = try decode(unknownFields: bytes)
            }
            if let unknownFates { state.savesOfUnknownFate = try recordNames(in: unknownFates, "savesOfUnknownFate") }
            if let firstVersionHost {
                let bytes = Data(try source.bytes(at: firstVersionHost.lowerBound, count: firstVersionHost.count))
                crc = CRC32.checksum(bytes, continuing: crc)
                state.hostRecords = try HostRecordTable.decodeFirstVersion(bytes, zone: expectedZone)
            }
            let offsets = try hostOffsets.map { (range) throws(FlatSyncError) in
                try source.bytes(at: range.lowerBound, count: range.count)
            }
            if let host {
                // Read whole with the log's field codec: host records are fields, not columns.
                let bytes = try source.bytes(at: host.lowerBound, count: host.count)
                let (table, sectionCRC) = try HostRecordTable.decodeWithChecksum(
                    bytes, zone: expectedZone, recordOffsets: offsets)
                crc = CRC32.combine(crc, sectionCRC, length: bytes.count)
                state.hostRecords = table
            }
            if let offsets { crc = offsets.withUnsafeBytes { CRC32.checksum($0, continuing: crc) } }
            if let unconfirmed { state.unconfirmedByReset = try recordNames(in: unconfirmed, "unconfirmedByReset") }
        } catch  where error.code == .damagedFile {
            throw FlatSyncError(
                .damagedFile, "The snapshot's columns are damaged: \(error.message)", cause: error, path: path)
        }
        guard crc == UInt32(checksum) else {
            throw FlatSyncError(.damagedFile, "The snapshot's checksum does not match its contents.", path: path)
        }
        return state
    }
}

// MARK: - Combining checksums

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A store snapshot as written to disk: a binary property list made by `PropertyListEncoder`, holding a
/// format version, the zone, its change token, the mutation sequence it covers, the known change tags,
/// and the items as packed columns, with a CRC-32 over all of it.
///
/// Why packed columns: `PropertyListDecoder` costs about 4 µs per value on Linux (100k integers: ~400 ms;
/// 100k ten-field items: ~2.8 s), so one plist value per field would make a 100k-item cold start take
/// seconds. Each column is one plist `Data` value in ``BinaryWriter``'s layout instead.
///
/// Why the checksum: a flipped byte inside a `Data` value still decodes as a plist; the CRC makes any
/// damage certain to be noticed, so the file is quarantined instead of silently read wrong.
///
/// Reading does not go through this type: ``readState(of:from:path:)`` streams the columns from the file
/// straight into the zone's table (see `SnapshotReader.swift`).
package struct SnapshotFile: Codable, Sendable, Equatable {
    /// The format version this code writes. Version 2 stores history items' device IDs once each, with an
    /// index per item (``ReadingHistoryItem/columns(of:)``); version 1 stored the ID with every item.
    package static let currentFormatVersion = 2
    /// The format versions this code reads.
    package static let readableFormatVersions: ClosedRange<Int> = 1...2

    package var formatVersion: Int
    package var zone: String
    package var changeToken: Data?
    package var appliedThroughSequence: UInt64
    package var itemCount: Int
    package var columns: [String: Data]
    package var changeTagNames: Data
    package var changeTagValues: Data
    /// Names of records created since the last fetch (see ``ZoneState/createdSinceFetch``); absent when none.
    package var createdSinceFetch: Data?
    /// Versions skipped for a pending delete (see ``ZoneState/skippedVersions``), as name and tag pairs;
    /// absent when none.
    package var skippedVersions: Data?
    /// Fields of the records that the items do not use (see ``ZoneState/unknownFields``): per record its
    /// name, the number of fields, and each field's name and value in the command log's field codec;
    /// absent when none (and in files written before FlatSync kept them).
    package var unknownFields: Data?
    /// Names of records whose next save sends every field (see ``ZoneState/sendWhole``); absent when none.
    package var sendWhole: Data?
    /// The server versions host records with pending changes were merged with, as ``unknownFields`` is
    /// laid out (see ``ZoneState/mergeBases``); absent when none (and in files written before FlatSync kept
    /// them).
    package var mergeBases: Data?
    /// Names of host records a save of which may be on the server unanswered (see
    /// ``ZoneState/savesOfUnknownFate``), sorted; absent when none.
    package var savesOfUnknownFate: Data?
    /// The zone's host records and their tags as the first version wrote them (see
    /// ``HostRecordTable/decodeFirstVersion(_:zone:)``): read, no longer written.
    package var hostRecords: Data?
    /// The zone's host records and their tags (see ``HostRecordTable/encoded()``); absent when none (and in
    /// files written before FlatSync kept them).
    package var hostRecordTable: Data?
    /// Where every ``HostRecordTable/recordOffsetStride``th record of ``hostRecordTable`` starts (see
    /// ``HostRecordTable/encodedSection()``), so that a cold start reads the records in many runs at once;
    /// absent when there are fewer records (and in files written before FlatSync kept them).
    package var hostRecordOffsets: Data?
    /// While a reset is under way, the names of the records it has not yet confirmed (see
    /// ``ZoneState/unconfirmedByReset``), sorted; absent when no reset is.
    package var unconfirmedByReset: Data?
    package var checksum: UInt32

    /// Builds a snapshot of `state`.
    package init<Item: ColumnarItem>(_ state: ZoneState<Item>, zone: ZoneID = Item.zone) {
        formatVersion = Self.currentFormatVersion
        self.zone = zone.name
        changeToken = state.changeToken?.data
        appliedThroughSequence = state.appliedThroughSequence
        let items = state.items.values
        itemCount = items.count
        columns = Item.columns(of: items)
        let tagCount = state.items.changeTagCount
        var names = BinaryWriter(capacity: tagCount * 24)
        var tags = BinaryWriter(capacity: tagCount * 16)
        state.items.forEachChangeTag { prefix, rest, tag in
            names.write(varint: UInt64(prefix.count + rest.count))
            names.write(raw: prefix)
            names.write(raw: rest)
            tags.write(tag.rawValue)
        }
        changeTagNames = names.data
        changeTagValues = tags.data
        if !state.createdSinceFetch.isEmpty { createdSinceFetch = Self.encode(names: state.createdSinceFetch) }
        if !state.skippedVersions.isEmpty {
            var skipped = BinaryWriter()
            for (name, tag) in state.skippedVersions.sorted(by: { $0.key < $1.key }) {
                skipped.write(name)
                skipped.write(tag.rawValue)
            }
            skippedVersions = skipped.data
        }
        if !state.unknownFields.isEmpty {
            unknownFields = Self.encode(unknownFields: state.unknownFields)
        }
        if !state.sendWhole.isEmpty { sendWhole = Self.encode(names: state.sendWhole) }
        if !state.mergeBases.isEmpty {
            mergeBases = Self.encode(unknownFields: state.mergeBases)
        }
        if !state.savesOfUnknownFate.isEmpty { savesOfUnknownFate = Self.encode(names: state.savesOfUnknownFate) }
        if !state.hostRecords.isEmpty {
            (hostRecordTable, hostRecordOffsets) = state.hostRecords.encodedSection()
        }
        if let unconfirmed = state.unconfirmedByReset { unconfirmedByReset = Self.encode(names: unconfirmed) }
        checksum = 0
        checksum = computedChecksum()
    }

    /// Sets ``checksum`` for the fields as they are now (for tests that build files by hand).
    package mutating func updateChecksum() {
        checksum = computedChecksum()
    }

    /// The CRC-32 of everything but the checksum itself.
    private func computedChecksum() -> UInt32 {
        var crc = Self.headerChecksum(
            formatVersion: formatVersion, zone: zone, changeToken: changeToken,
            appliedThroughSequence: appliedThroughSequence, itemCount: itemCount)
        for name in columns.keys.sorted() {
            crc = CRC32.checksum(Data(name.utf8), continuing: crc)
            crc = CRC32.checksum(columns[name]!, continuing: crc)
        }
        crc = CRC32.checksum(changeTagNames, continuing: crc)
        crc = CRC32.checksum(changeTagValues, continuing: crc)
        if let createdSinceFetch { crc = CRC32.checksum(createdSinceFetch, continuing: crc) }
        if let skippedVersions { crc = CRC32.checksum(skippedVersions, continuing: crc) }
        if let unknownFields { crc = CRC32.checksum(unknownFields, continuing: crc) }
        if let sendWhole { crc = CRC32.checksum(sendWhole, continuing: crc) }
        if let mergeBases { crc = CRC32.checksum(mergeBases, continuing: crc) }
        if let savesOfUnknownFate { crc = CRC32.checksum(savesOfUnknownFate, continuing: crc) }
        if let hostRecords { crc = CRC32.checksum(hostRecords, continuing: crc) }
        if let hostRecordTable { crc = CRC32.checksum(hostRecordTable, continuing: crc) }
        if let hostRecordOffsets { crc = CRC32.checksum(hostRecordOffsets, continuing: crc) }
        if let unconfirmedByReset { crc = CRC32.checksum(unconfirmedByReset, continuing: crc) }
        return crc
    }

    /// The bytes of a set of record names: each as a string, sorted.
    private static func encode(names: Set<String>) -> Data {
        var writer = BinaryWriter()
        for name in names.sorted() { writer.write(name) }
        return writer.data
    }

    /// The bytes of ``unknownFields``, records and fields in name order.
    static func encode(unknownFields: [String: [String: FieldValue]]) -> Data {
        var writer = BinaryWriter()
        for name in unknownFields.keys.sorted() {
            let fields = unknownFields[name]!
            writer.write(name)
            writer.write(varint: UInt64(fields.count))
            for key in fields.keys.sorted() {
                writer.write(key)
                writer.write(fields[key]!, tags: .commandLog)
            }
        }
        return writer.data
    }

    /// Reads what ``encode(unknownFields:)`` wrote.
    static func decode(unknownFields data: Data) throws(FlatSyncError) -> [String: [String: FieldValue]] {
        try data.withBinaryReader { (reader) throws(FlatSyncError) in
            var result: [String: [String: FieldValue]] = [:]
            while !reader.isAtEnd {
                let name = try reader.readString()
                let count = try reader.readCount()
                var fields: [String: FieldValue] = [:]
                for _ in 0..<count {
                    let key = try reader.readString()
                    fields[key] = try reader.readFieldValue(tags: .commandLog)
                }
                result[name] = fields
            }
            return result
        }
    }

    /// The CRC-32 of the fields before the columns, the first piece of ``checksum``.
    static func headerChecksum(
        formatVersion: Int, zone: String, changeToken: Data?, appliedThroughSequence: UInt64, itemCount: Int
    ) -> UInt32 {
        var header = BinaryWriter()
        // Bit patterns: a damaged or hand-made count must not trap while it is being checked.
        header.write(varint: UInt64(bitPattern: Int64(formatVersion)))
        header.write(zone)
        header.write(changeToken)
        header.write(varint: appliedThroughSequence)
        header.write(varint: UInt64(bitPattern: Int64(itemCount)))
        return CRC32.checksum(header.data)
    }

    /// The encoded file contents.
    package func encoded() throws(FlatSyncError) -> Data {
        try BinaryPropertyList.encode(self, what: "The snapshot of \(zone)")
    }

    /// Reads the zone state of a snapshot held in memory; see ``readState(of:from:path:)``.
    package static func decodeState<Item: ColumnarItem>(
        of type: Item.Type, zone: ZoneID = Item.zone, from data: Data, path: String
    ) throws(FlatSyncError) -> ZoneState<Item> {
        try readState(of: type, zone: zone, from: DataSnapshotSource(data), path: path)
    }
}

extension BinaryWriter {
    fileprivate mutating func write(_ value: Data?) {
        if let value {
            write(UInt8(1))
            write(value)
        } else {
            write(UInt8(0))
        }
    }
}

import Foundation

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
package struct SnapshotFile: Codable, Sendable, Equatable {
    package static let currentFormatVersion = 1

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
    package var checksum: UInt32

    /// Builds a snapshot of `state`.
    package init<Item: ColumnarItem>(_ state: ZoneState<Item>) {
        formatVersion = Self.currentFormatVersion
        zone = Item.zone.name
        changeToken = state.changeToken?.data
        appliedThroughSequence = state.appliedThroughSequence
        let items = Array(state.items.values)
        itemCount = items.count
        columns = Item.columns(of: items)
        var names = BinaryWriter(capacity: state.changeTags.count * 24)
        var tags = BinaryWriter(capacity: state.changeTags.count * 16)
        for (name, tag) in state.changeTags {
            names.write(name)
            tags.write(tag.rawValue)
        }
        changeTagNames = names.data
        changeTagValues = tags.data
        if !state.createdSinceFetch.isEmpty {
            var created = BinaryWriter()
            for name in state.createdSinceFetch.sorted() { created.write(name) }
            createdSinceFetch = created.data
        }
        if !state.skippedVersions.isEmpty {
            var skipped = BinaryWriter()
            for (name, tag) in state.skippedVersions.sorted(by: { $0.key < $1.key }) {
                skipped.write(name)
                skipped.write(tag.rawValue)
            }
            skippedVersions = skipped.data
        }
        checksum = 0
        checksum = computedChecksum()
    }

    /// The CRC-32 of everything but the checksum itself.
    private func computedChecksum() -> UInt32 {
        var header = BinaryWriter()
        header.write(varint: UInt64(formatVersion))
        header.write(zone)
        header.write(changeToken)
        header.write(varint: appliedThroughSequence)
        header.write(varint: UInt64(itemCount))
        var crc = CRC32.checksum(header.data)
        for name in columns.keys.sorted() {
            crc = CRC32.checksum(Data(name.utf8), continuing: crc)
            crc = CRC32.checksum(columns[name]!, continuing: crc)
        }
        crc = CRC32.checksum(changeTagNames, continuing: crc)
        crc = CRC32.checksum(changeTagValues, continuing: crc)
        if let createdSinceFetch { crc = CRC32.checksum(createdSinceFetch, continuing: crc) }
        if let skippedVersions { crc = CRC32.checksum(skippedVersions, continuing: crc) }
        return crc
    }

    /// The encoded file contents.
    package func encoded() throws(FlatSyncError) -> Data {
        try BinaryPropertyList.encode(self, what: "The snapshot of \(zone)")
    }

    /// Decodes and checks a snapshot file, failing with ``FlatSyncError/Code-swift.struct/damagedFile`` or
    /// ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion``.
    package static func decode(_ data: Data, path: String) throws(FlatSyncError) -> SnapshotFile {
        struct VersionProbe: Decodable { var formatVersion: Int }
        let decoder = PropertyListDecoder()
        let version: Int
        do {
            try BinaryPropertyList.validate(data)
            version = try decoder.decode(VersionProbe.self, from: data).formatVersion
        } catch {
            throw FlatSyncError(.damagedFile, "The snapshot is not a readable property list.", cause: error, path: path)
        }
        guard version == currentFormatVersion else {
            throw FlatSyncError(
                .unsupportedFormatVersion,
                "The snapshot has format version \(version); this FlatSync reads version \(currentFormatVersion).",
                path: path
            )
        }
        let file: SnapshotFile
        do {
            file = try decoder.decode(SnapshotFile.self, from: data)
        } catch {
            throw FlatSyncError(.damagedFile, "The snapshot's structure is damaged.", cause: error, path: path)
        }
        guard file.checksum == file.computedChecksum() else {
            throw FlatSyncError(.damagedFile, "The snapshot's checksum does not match its contents.", path: path)
        }
        return file
    }

    /// The zone state the snapshot holds.
    package func state<Item: ColumnarItem>(of type: Item.Type, path: String) throws(FlatSyncError) -> ZoneState<Item> {
        guard zone == Item.zone.name else {
            throw FlatSyncError(.damagedFile, "The snapshot holds zone \(zone), not \(Item.zone.name).", path: path)
        }
        var state = ZoneState<Item>()
        state.changeToken = changeToken.map(ChangeToken.init(data:))
        state.appliedThroughSequence = appliedThroughSequence
        do throws(FlatSyncError) {
            let items = try Item.items(from: columns, count: itemCount)
            state.items.reserveCapacity(items.count)
            for item in items { state.items[item.articleID] = item }
            try changeTagNames.withBinaryReader { (names) throws(FlatSyncError) in
                try changeTagValues.withBinaryReader { (tags) throws(FlatSyncError) in
                    while !names.isAtEnd {
                        state.changeTags[try names.readString()] = ChangeTag(rawValue: try tags.readString())
                    }
                    guard tags.isAtEnd else {
                        throw FlatSyncError(.damagedFile, "Change tag columns differ in length.")
                    }
                }
            }
            try createdSinceFetch?.withBinaryReader { (names) throws(FlatSyncError) in
                while !names.isAtEnd { state.createdSinceFetch.insert(try names.readString()) }
            }
            try skippedVersions?.withBinaryReader { (pairs) throws(FlatSyncError) in
                while !pairs.isAtEnd {
                    state.skippedVersions[try pairs.readString()] = ChangeTag(try pairs.readString())
                }
            }
        } catch {
            throw FlatSyncError(
                .damagedFile, "The snapshot's columns are damaged: \(error.message)", cause: error, path: path)
        }
        return state
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

/// An item that can be stored as packed snapshot columns.
package protocol ColumnarItem: SyncedItem {
    /// The items' fields as named columns.
    static func columns(of items: [Self]) -> [String: Data]
    /// Items rebuilt from columns holding `count` values each.
    static func items(from columns: [String: Data], count: Int) throws(FlatSyncError) -> [Self]
}

/// Reads one packed column, checking it holds exactly the expected number of values.
package struct ColumnReader: ~Copyable {
    private let data: Data
    private let name: String

    package init(_ columns: [String: Data], _ name: String) throws(FlatSyncError) {
        guard let data = columns[name] else {
            throw FlatSyncError(.damagedFile, "The snapshot has no column \(name).")
        }
        self.data = data
        self.name = name
    }

    /// Reads `count` values with `read`, failing if the column holds more or fewer.
    ///
    /// Every value takes at least one byte, so a count the column cannot hold (negative, or larger than its
    /// bytes) is damage, reported before anything is allocated for it.
    package func values<T>(_ count: Int, _ read: (inout BinaryReader) throws(FlatSyncError) -> T) throws(FlatSyncError)
        -> [T]
    {
        let name = self.name
        guard count >= 0, count <= data.count else {
            throw FlatSyncError(
                .damagedFile,
                "The column \(name) of \(data.count) bytes cannot hold the \(count) values the snapshot says.")
        }
        return try data.withBinaryReader { (reader) throws(FlatSyncError) -> [T] in
            var values: [T] = []
            values.reserveCapacity(count)
            for _ in 0..<count { values.append(try read(&reader)) }
            guard reader.isAtEnd else {
                throw FlatSyncError(.damagedFile, "The column \(name) holds more than \(count) values.")
            }
            return values
        }
    }
}

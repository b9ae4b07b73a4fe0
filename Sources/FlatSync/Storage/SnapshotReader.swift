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
// straight into the zone's table. A 100k-item history snapshot (8.8 MB) used to be held whole, decoded
// into a `SnapshotFile` holding copies of every column, then into an array per column, then into items:
// ~50 MB at the peak of a cold start. Streaming holds 16 KB per column.
//
// The checksum is the one `SnapshotFile` computes over its fields in a fixed order; the columns are read
// side by side, so each piece's CRC is computed as it streams and the pieces are combined afterwards.

/// Random access to a snapshot's bytes.
package protocol SnapshotSource {
    /// The number of bytes.
    var count: Int { get }
    /// Fills `buffer` with the bytes at `offset`, which the caller keeps within ``count``.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError)
}

extension SnapshotSource {
    /// The `count` bytes at `offset`.
    func bytes(at offset: Int, count: Int) throws(FlatSyncError) -> [UInt8] {
        var failure: FlatSyncError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(FlatSyncError) {
                try read(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
                initialized = count
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }
}

/// A snapshot in memory.
package struct DataSnapshotSource: SnapshotSource {
    package let data: Data

    package init(_ data: Data) { self.data = data }

    package var count: Int { data.count }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError) {
        guard buffer.count > 0 else { return }
        data.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + offset, byteCount: buffer.count)
        }
    }
}

/// A snapshot file, read with `pread` as the columns stream. (The one place the snapshot reader calls the
/// file system: `open`, `fstat`, `pread`, `close`.)
package final class FileSnapshotSource: SnapshotSource {
    private let descriptor: Int32
    package let count: Int
    private let path: String
    private let fileSystem: FileSystem

    /// Opens the file at `path` through `fileSystem`, or returns nil when there is none.
    package static func open(_ path: String, fileSystem: FileSystem = .posix) throws(FlatSyncError)
        -> FileSnapshotSource?
    {
        guard try fileSystem.itemKind(path) != nil else { return nil }
        let fd = try fileSystem.open(path, flags: O_RDONLY | O_CLOEXEC)
        let count: Int
        do {
            count = try fileSystem.size(fd, path: path)
        } catch {
            fileSystem.close(fd)
            throw error
        }
        return FileSnapshotSource(descriptor: fd, count: count, path: path, fileSystem: fileSystem)
    }

    private init(descriptor: Int32, count: Int, path: String, fileSystem: FileSystem) {
        self.descriptor = descriptor
        self.count = count
        self.path = path
        self.fileSystem = fileSystem
    }

    deinit { fileSystem.close(descriptor) }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError) {
        let got = try fileSystem.read(descriptor, into: buffer, at: offset, path: path)
        if got < buffer.count {
            throw FlatSyncError(.damagedFile, "The snapshot ended early (it shrank while being read).", path: path)
        }
    }
}

// MARK: - Binary property list structure

/// The values of a snapshot's top-level dictionary, with `Data` values left in the file as byte ranges.
struct SnapshotPlist {
    enum Value {
        case int(UInt64)
        case string(String)
        case data(Range<Int>)
        case dictionary([String: Value])
        case other
    }

    let values: [String: Value]

    /// Reads the structure of the binary property list in `source`; throws `damagedFile` when it is not one.
    init(_ source: some SnapshotSource) throws(FlatSyncError) {
        var reader = PlistStructureReader(source: source)
        values = try reader.topLevelDictionary()
    }
}

/// Reads the objects of a binary property list (`bplist00`) one at a time: the trailer, the offset table,
/// dictionaries, strings and integers in full, `Data` as ranges. Every offset and length is checked.
private struct PlistStructureReader<Source: SnapshotSource> {
    let source: Source
    private var objectOffsets: [Int] = []
    private var referenceSize = 1
    /// A window of the file kept in memory, since objects are small and close together.
    private var window: [UInt8] = []
    private var windowStart = 0

    init(source: Source) {
        self.source = source
    }

    private static func damaged(_ what: String) -> FlatSyncError {
        FlatSyncError(.damagedFile, "The snapshot is not a readable property list: \(what).")
    }

    /// `count` bytes at `offset`, from the window or a fresh one.
    private mutating func bytes(at offset: Int, count: Int) throws(FlatSyncError) -> ArraySlice<UInt8> {
        guard offset >= 0, count >= 0, offset <= source.count - count else { throw Self.damaged("offset out of range") }
        if offset < windowStart || offset + count > windowStart + window.count {
            let length = min(source.count - offset, max(count, 4096))
            window = try source.bytes(at: offset, count: length)
            windowStart = offset
        }
        let start = offset - windowStart
        return window[start..<start + count]
    }

    private mutating func bigEndian(at offset: Int, size: Int) throws(FlatSyncError) -> UInt64 {
        var value: UInt64 = 0
        for byte in try bytes(at: offset, count: size) { value = value << 8 | UInt64(byte) }
        return value
    }

    mutating func topLevelDictionary() throws(FlatSyncError) -> [String: SnapshotPlist.Value] {
        guard source.count >= 40, try Array(bytes(at: 0, count: 8)) == Array("bplist00".utf8) else {
            throw Self.damaged("no bplist00 header")
        }
        let trailer = source.count - 32
        let offsetSize = Int(try bigEndian(at: trailer + 6, size: 1))
        referenceSize = Int(try bigEndian(at: trailer + 7, size: 1))
        let objectCount = try bigEndian(at: trailer + 8, size: 8)
        let top = try bigEndian(at: trailer + 16, size: 8)
        let tableOffset = try bigEndian(at: trailer + 24, size: 8)
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize), objectCount > 0,
            objectCount <= UInt64(source.count), top < objectCount, tableOffset < UInt64(trailer),
            objectCount * UInt64(offsetSize) <= UInt64(trailer) - tableOffset
        else { throw Self.damaged("bad trailer") }
        let table = try bytes(at: Int(tableOffset), count: Int(objectCount) * offsetSize)
        objectOffsets.reserveCapacity(Int(objectCount))
        var index = table.startIndex
        for _ in 0..<Int(objectCount) {
            var offset = 0
            for byte in table[index..<index + offsetSize] { offset = offset << 8 | Int(byte) }
            guard offset >= 8, offset < Int(tableOffset) else { throw Self.damaged("bad object offset") }
            objectOffsets.append(offset)
            index += offsetSize
        }
        guard case .dictionary(let values) = try object(Int(top), depth: 0) else {
            throw Self.damaged("the top object is not a dictionary")
        }
        return values
    }

    /// The object with reference `reference`; dictionaries nest at most one level (the columns).
    private mutating func object(_ reference: Int, depth: Int) throws(FlatSyncError) -> SnapshotPlist.Value {
        guard reference < objectOffsets.count else { throw Self.damaged("bad object reference") }
        let offset = objectOffsets[reference]
        let marker = try bytes(at: offset, count: 1).first!
        let low = Int(marker & 0x0F)
        switch marker >> 4 {
        case 0x1:
            guard low <= 4 else { throw Self.damaged("bad integer") }
            let size = 1 << low
            if size == 16 {
                // A 128-bit integer: how values above Int64.max are written; the high half must be zero.
                guard try bigEndian(at: offset + 1, size: 8) == 0 else { throw Self.damaged("integer too large") }
                return .int(try bigEndian(at: offset + 9, size: 8))
            }
            return .int(try bigEndian(at: offset + 1, size: size))
        case 0x4:
            let (count, start) = try length(low, at: offset)
            guard start <= source.count - count else { throw Self.damaged("data out of range") }
            return .data(start..<start + count)
        case 0x5:
            let (count, start) = try length(low, at: offset)
            let ascii = try bytes(at: start, count: count)
            guard ascii.allSatisfy({ $0 < 0x80 }) else { throw Self.damaged("bad ASCII string") }
            return .string(String(decoding: ascii, as: UTF8.self))
        case 0x6:
            let (count, start) = try length(low, at: offset)
            guard count <= (source.count - start) / 2 else { throw Self.damaged("string out of range") }
            let raw = try bytes(at: start, count: count * 2)
            var units: [UInt16] = []
            units.reserveCapacity(count)
            var index = raw.startIndex
            while index < raw.endIndex {
                units.append(UInt16(raw[index]) << 8 | UInt16(raw[index + 1]))
                index += 2
            }
            guard let string = String(validating: units, as: UTF16.self) else { throw Self.damaged("bad UTF-16") }
            return .string(string)
        case 0xD:
            guard depth < 2 else { throw Self.damaged("dictionaries nested too deep") }
            let (count, start) = try length(low, at: offset)
            guard count <= (source.count - start) / (2 * referenceSize) else { throw Self.damaged("bad dictionary") }
            var references: [Int] = []
            references.reserveCapacity(count * 2)
            for index in 0..<(count * 2) {
                // Up to 8 bytes: checked before it becomes an `Int`, which a value above `Int.max` would trap.
                let reference = try bigEndian(at: start + index * referenceSize, size: referenceSize)
                guard reference < UInt64(objectOffsets.count) else { throw Self.damaged("bad object reference") }
                references.append(Int(reference))
            }
            var values: [String: SnapshotPlist.Value] = [:]
            for index in 0..<count {
                guard case .string(let key) = try object(references[index], depth: depth + 1) else {
                    throw Self.damaged("a dictionary key is not a string")
                }
                values[key] = try object(references[count + index], depth: depth + 1)
            }
            return .dictionary(values)
        default:
            return .other
        }
    }

    /// The count in a marker's low nibble, or in the integer object after it when the nibble is 0xF, and
    /// where the contents start.
    private mutating func length(_ low: Int, at offset: Int) throws(FlatSyncError) -> (count: Int, start: Int) {
        guard low == 0xF else { return (low, offset + 1) }
        let marker = try bytes(at: offset + 1, count: 1).first!
        guard marker >> 4 == 0x1, marker & 0x0F <= 3 else { throw Self.damaged("bad length") }
        let size = 1 << Int(marker & 0x0F)
        let count = try bigEndian(at: offset + 2, size: size)
        guard count <= UInt64(source.count) else { throw Self.damaged("length out of range") }
        return (Int(count), offset + 2 + size)
    }
}

// MARK: - Columns

/// The packed columns of a snapshot, each read through a ``ColumnCursor``; it remembers each column's CRC
/// for the file's checksum.
package struct SnapshotColumns: ~Copyable {
    fileprivate let source: any SnapshotSource
    fileprivate let ranges: [String: Range<Int>]
    /// Each column's CRC-32, once a cursor has read all of it.
    fileprivate var checksums: [String: UInt32] = [:]

    fileprivate init(source: any SnapshotSource, ranges: [String: Range<Int>]) {
        self.source = source
        self.ranges = ranges
    }

    /// True when the snapshot has a column `name`.
    package func has(_ name: String) -> Bool { ranges[name] != nil }

    /// The most items a snapshot with these columns can hold: every item takes at least one byte of the
    /// column `name`. Reserve no more than this for the count a damaged header claims.
    package func itemLimit(_ name: String) -> Int { ranges[name]?.count ?? 0 }

    /// A cursor over the column `name`.
    package func cursor(_ name: String) throws(FlatSyncError) -> ColumnCursor {
        guard let range = ranges[name] else { throw FlatSyncError(.damagedFile, "The snapshot has no column \(name).") }
        return ColumnCursor(source: source, range: range, name: name)
    }

    /// Records that `cursor` read its whole column, failing if values are left over.
    package mutating func finish(_ cursor: consuming ColumnCursor) throws(FlatSyncError) {
        guard cursor.isAtEnd else {
            throw FlatSyncError(.damagedFile, "The column \(cursor.name) holds more values than the snapshot's count.")
        }
        checksums[cursor.name] = cursor.checksum
    }
}

/// Reads one packed column (``BinaryWriter``'s layout) through a 16 KB buffer, checking every length
/// against what is left of the column, and computing the column's CRC-32 as it goes.
package struct ColumnCursor: ~Copyable {
    fileprivate let name: String
    private let source: any SnapshotSource
    private var buffer: UnsafeMutableRawBufferPointer
    /// Unread bytes are `buffer[start..<end]`; the column's bytes from `nextOffset` to `endOffset` are not
    /// read yet.
    private var start = 0
    private var end = 0
    private var nextOffset: Int
    private let endOffset: Int
    fileprivate private(set) var checksum: UInt32 = 0

    fileprivate init(source: any SnapshotSource, range: Range<Int>, name: String) {
        self.source = source
        self.name = name
        nextOffset = range.lowerBound
        endOffset = range.upperBound
        buffer = .allocate(byteCount: min(16 << 10, max(64, range.count)), alignment: 8)
    }

    deinit { buffer.deallocate() }

    /// True once every byte of the column is read.
    package var isAtEnd: Bool { start == end && nextOffset == endOffset }

    private func damaged(_ what: String) -> FlatSyncError {
        FlatSyncError(.damagedFile, "Malformed binary data in column \(name): \(what).")
    }

    /// Makes `count` bytes readable at `start`, failing if the column ends before.
    @inline(__always)
    private mutating func need(_ count: Int) throws(FlatSyncError) {
        if end - start < count { try refill(count) }
    }

    private mutating func refill(_ count: Int) throws(FlatSyncError) {
        let available = end - start
        guard count - available <= endOffset - nextOffset else { throw damaged("unexpected end") }
        if count > buffer.count {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, buffer.count * 2), alignment: 8)
            larger.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: available)
            buffer.deallocate()
            buffer = larger
        } else if available > 0 {
            buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: available)
        }
        start = 0
        end = available
        let length = min(buffer.count - end, endOffset - nextOffset)
        let chunk = UnsafeMutableRawBufferPointer(rebasing: buffer[end..<end + length])
        try source.read(into: chunk, at: nextOffset)
        checksum = CRC32.checksum(UnsafeRawBufferPointer(chunk), continuing: checksum)
        nextOffset += length
        end += length
    }

    /// Reads the rest of the column so that its checksum covers all of it.
    fileprivate mutating func skipToEnd() throws(FlatSyncError) {
        while nextOffset < endOffset {
            start = end
            try refill(min(buffer.count, endOffset - nextOffset))
        }
        start = end
    }

    package mutating func readByte() throws(FlatSyncError) -> UInt8 {
        try need(1)
        defer { start += 1 }
        return buffer[start]
    }

    package mutating func readVarint() throws(FlatSyncError) -> UInt64 {
        var decoder = VarintDecoder()
        // Fast path: the whole varint is in the buffer, so no byte needs a refill check.
        if end - start >= 10 {
            var index = start
            while true {
                let byte = buffer[index]
                index += 1
                switch decoder.take(byte) {
                case .more: continue
                case .value(let value):
                    start = index
                    return value
                case .damaged(let reason): throw damaged(reason)
                }
            }
        }
        while true {
            switch decoder.take(try readByte()) {
            case .more: continue
            case .value(let value): return value
            case .damaged(let reason): throw damaged(reason)
            }
        }
    }

    package mutating func readSigned() throws(FlatSyncError) -> Int64 {
        let raw = try readVarint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    package mutating func readDouble() throws(FlatSyncError) -> Double {
        try need(8)
        defer { start += 8 }
        return Double(bitPattern: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: start, as: UInt64.self)))
    }

    /// A finite date, as ``BinaryWriter/write(_:)-(Date)`` writes one.
    package mutating func readDate() throws(FlatSyncError) -> Date {
        let interval = try readDouble()
        guard interval.isFinite else { throw damaged("non-finite date") }
        return Date(timeIntervalSinceReferenceDate: interval)
    }

    package mutating func readBool() throws(FlatSyncError) -> Bool {
        switch try readByte() {
        case 0: return false
        case 1: return true
        default: throw damaged("bad boolean")
        }
    }

    /// Runs `body` with the bytes of the next length-prefixed string, checked to be valid UTF-8; `isASCII`
    /// says whether every byte is below 0x80.
    @inline(__always)
    private mutating func withStringBytes<T>(
        _ body: (_ utf8: UnsafeRawBufferPointer, _ isASCII: Bool) -> T
    ) throws(FlatSyncError) -> T {
        let length = try readVarint()
        guard length <= UInt64(end - start + endOffset - nextOffset) else { throw damaged("string past the end") }
        let count = Int(length)
        try need(count)
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[start..<start + count])
        let isASCII = CompactString.isASCII(bytes)
        if !isASCII && String(validating: bytes.assumingMemoryBound(to: UInt8.self), as: UTF8.self) == nil {
            throw damaged("invalid UTF-8")
        }
        start += count
        return body(bytes, isASCII)
    }

    package mutating func readString() throws(FlatSyncError) -> String {
        try withStringBytes { utf8, _ in String(decoding: utf8, as: UTF8.self) }
    }

    package mutating func readOptionalString() throws(FlatSyncError) -> String? {
        try readBool() ? try readString() : nil
    }

    /// Runs `body` with the bytes of the next string, checked to be valid UTF-8, and whether they are all
    /// ASCII, without making a `String`.
    package mutating func readStringBytes<T>(
        _ body: (_ utf8: UnsafeRawBufferPointer, _ isASCII: Bool) -> T
    ) throws(FlatSyncError) -> T {
        try withStringBytes(body)
    }

    /// A string as a ``CompactString``, without making a `String` of a short one.
    package mutating func readCompactString() throws(FlatSyncError) -> CompactString {
        try withStringBytes { utf8, _ in CompactString(validUTF8: utf8) }
    }

    /// A string, or an equal one from `recent` instead of a new copy; a new one joins the front of `recent`,
    /// which keeps at most four. For columns that repeat a handful of values, such as the device IDs of
    /// 100,000 history items, each of which would otherwise hold its own copy.
    package mutating func readString(reusing recent: inout [String]) throws(FlatSyncError) -> String {
        try withStringBytes { utf8, _ in
            for candidate in recent where candidate.utf8.count == utf8.count {
                var candidate = candidate
                let same = candidate.withUTF8 { mine in
                    utf8.isEmpty || memcmp(mine.baseAddress!, utf8.baseAddress!, utf8.count) == 0
                }
                if same { return candidate }
            }
            let string = String(decoding: utf8, as: UTF8.self)
            recent.insert(string, at: 0)
            if recent.count > 4 { recent.removeLast() }
            return string
        }
    }

    /// An optional string read with ``readString(reusing:)``.
    package mutating func readOptionalString(reusing recent: inout [String]) throws(FlatSyncError) -> String? {
        try readBool() ? try readString(reusing: &recent) : nil
    }
}

// MARK: - Reading a zone state

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
        let firstVersionHost = try range("hostRecords", required: false)
        let host = try range("hostRecordTable", required: false)
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
            if let created {
                var cursor = ColumnCursor(source: source, range: created, name: "createdSinceFetch")
                while !cursor.isAtEnd { state.createdSinceFetch.insert(try cursor.readString()) }
                crc = CRC32.combine(crc, cursor.checksum, length: created.count)
            }
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
            if let whole {
                var cursor = ColumnCursor(source: source, range: whole, name: "sendWhole")
                while !cursor.isAtEnd { state.sendWhole.insert(try cursor.readString()) }
                crc = CRC32.combine(crc, cursor.checksum, length: whole.count)
            }
            if let firstVersionHost {
                let bytes = Data(try source.bytes(at: firstVersionHost.lowerBound, count: firstVersionHost.count))
                crc = CRC32.checksum(bytes, continuing: crc)
                state.hostRecords = try HostRecordTable.decodeFirstVersion(bytes, zone: expectedZone)
            }
            if let host {
                // Read whole with the log's field codec: host records are fields, not columns.
                let bytes = try source.bytes(at: host.lowerBound, count: host.count)
                crc = bytes.withUnsafeBytes { CRC32.checksum($0, continuing: crc) }
                state.hostRecords = try HostRecordTable.decode(bytes, zone: expectedZone)
            }
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

extension CRC32 {
    /// The CRC-32 of two pieces of bytes one after the other, from the CRC of each and the second's length
    /// (zlib's `crc32_combine`): multiplies the first CRC by x^(8·length) modulo the polynomial.
    package static func combine(_ first: UInt32, _ second: UInt32, length: Int) -> UInt32 {
        multiplyModP(powerOfX(eightTimes: length), first) ^ second
    }

    /// a·b modulo the CRC polynomial, in its bit-reflected form.
    private static func multiplyModP(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var a = a
        var b = b
        var product: UInt32 = 0
        var mask: UInt32 = 1 << 31
        while mask != 0 {
            if a & mask != 0 {
                product ^= b
                a ^= mask
                if a == 0 { break }
            }
            mask >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ 0xEDB8_8320 : b >> 1
        }
        return product
    }

    /// x^(2^k) modulo the polynomial, for k = 0..<32.
    private static let powersOfX: [UInt32] = {
        var table: [UInt32] = []
        var power: UInt32 = 1 << 30  // x^1
        for _ in 0..<32 {
            table.append(power)
            power = multiplyModP(power, power)
        }
        return table
    }()

    /// x^(8·length) modulo the polynomial.
    private static func powerOfX(eightTimes length: Int) -> UInt32 {
        var result: UInt32 = 1 << 31  // x^0
        var n = UInt64(length)
        var k = 3  // 8 = 2^3
        while n != 0 {
            if n & 1 != 0 { result = multiplyModP(powersOfX[k & 31], result) }
            n >>= 1
            k += 1
        }
        return result
    }
}

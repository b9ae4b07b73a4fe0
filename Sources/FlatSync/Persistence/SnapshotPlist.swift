#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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

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

/// Reads one packed column (``BinaryWriter``'s layout) through a 16 KB buffer, checking every length
/// against what is left of the column, and computing the column's CRC-32 as it goes.
package struct ColumnCursor: ~Copyable {
    let name: String
    private let source: any SnapshotSource
    private var buffer: UnsafeMutableRawBufferPointer
    /// Unread bytes are `buffer[start..<end]`; the column's bytes from `nextOffset` to `endOffset` are not
    /// read yet.
    private var start = 0
    private var end = 0
    private var nextOffset: Int
    private let endOffset: Int
    private(set) var checksum: UInt32 = 0

    init(source: any SnapshotSource, range: Range<Int>, name: String) {
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
    mutating func skipToEnd() throws(FlatSyncError) {
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

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

/// Reads values written by ``BinaryWriter``, checking every length against the bytes that remain, so
/// damaged input fails with ``FlatSyncError/Code-swift.struct/damagedFile`` instead of crashing.
package struct BinaryReader {
    private let bytes: UnsafeRawBufferPointer
    package private(set) var offset: Int = 0

    /// Reads from `bytes`, which must stay valid while the reader is used.
    package init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    package var isAtEnd: Bool { offset >= bytes.count }
    package var remaining: Int { bytes.count - offset }

    private func damaged(_ what: String) -> FlatSyncError {
        FlatSyncError(.damagedFile, "Malformed binary data: \(what) at byte \(offset).")
    }

    package mutating func readByte() throws(FlatSyncError) -> UInt8 {
        guard offset < bytes.count else { throw damaged("unexpected end") }
        let value = bytes[offset]
        offset += 1
        return value
    }

    /// The next byte, left to read.
    package func peekByte() throws(FlatSyncError) -> UInt8 {
        guard offset < bytes.count else { throw damaged("unexpected end") }
        return bytes[offset]
    }

    /// Steps over the next `count` bytes.
    package mutating func skip(byteCount count: Int) throws(FlatSyncError) {
        guard count >= 0, remaining >= count else { throw damaged("unexpected end") }
        offset += count
    }

    package mutating func readVarint() throws(FlatSyncError) -> UInt64 {
        var decoder = VarintDecoder()
        while true {
            switch decoder.take(try readByte()) {
            case .more: continue
            case .value(let value): return value
            case .damaged(let reason): throw damaged(reason)
            }
        }
    }

    /// A length or an element count. Every element takes at least one byte, so a count larger than the
    /// bytes left after it is damage; checking that here keeps damaged input from allocating huge buffers.
    package mutating func readCount() throws(FlatSyncError) -> Int {
        let value = try readVarint()
        guard value <= UInt64(remaining) else { throw damaged("count \(value) over the \(remaining) bytes left") }
        return Int(value)
    }

    package mutating func readSigned() throws(FlatSyncError) -> Int64 {
        let raw = try readVarint()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    package mutating func readBool() throws(FlatSyncError) -> Bool {
        switch try readByte() {
        case 0: return false
        case 1: return true
        default: throw damaged("bad boolean")
        }
    }

    package mutating func readDouble() throws(FlatSyncError) -> Double {
        Double(bitPattern: try readFixed64())
    }

    /// A 4-byte little-endian integer written by ``BinaryWriter/write(fixed32:)``.
    package mutating func readFixed32() throws(FlatSyncError) -> UInt32 {
        try readFixed(UInt32.self)
    }

    /// An 8-byte little-endian integer written by ``BinaryWriter/write(fixed64:)``.
    package mutating func readFixed64() throws(FlatSyncError) -> UInt64 {
        try readFixed(UInt64.self)
    }

    private mutating func readFixed<T: FixedWidthInteger>(_: T.Type) throws(FlatSyncError) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw damaged("unexpected end") }
        let value = bytes.loadUnaligned(fromByteOffset: offset, as: T.self)
        offset += size
        return T(littleEndian: value)
    }

    /// The next `count` bytes as they are, written by ``BinaryWriter/write(raw:)``.
    package mutating func readRaw(count: Int) throws(FlatSyncError) -> [UInt8] {
        guard count >= 0, remaining >= count else { throw damaged("unexpected end") }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    package mutating func readString() throws(FlatSyncError) -> String {
        try readString(byteCount: try readCount())
    }

    /// The `count` bytes at the offset as a string; `count` comes from ``readCount()``, so they are there.
    private mutating func readString(byteCount count: Int) throws(FlatSyncError) -> String {
        let start = offset
        offset += count
        guard count > 0 else { return "" }
        // The bytes come from a Data, whose memory is bound to UInt8.
        let utf8 = UnsafeBufferPointer(
            start: (bytes.baseAddress! + start).assumingMemoryBound(to: UInt8.self), count: count)
        // ASCII, the usual case, is valid as it stands: `String(decoding:)` takes it without the slower
        // generic validation.
        if utf8.allSatisfy({ $0 < 0x80 }) { return String(decoding: utf8, as: UTF8.self) }
        guard let string = String(validating: utf8, as: UTF8.self) else {
            throw damaged("invalid UTF-8")
        }
        return string
    }

    /// The next string, whose bytes were checked to be UTF-8 when they were first read (or written from a
    /// `String`): made without checking them again (`String(decoding:)` would repair them if they were not).
    package mutating func readCheckedString() throws(FlatSyncError) -> String {
        let count = try readCount()
        defer { offset += count }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]), as: UTF8.self)
    }

    /// Runs `body` with the bytes of the next string, checked to be valid UTF-8 (ASCII at a glance), without
    /// making a `String` of them.
    package mutating func withStringBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) throws(FlatSyncError) -> T {
        let count = try readCount()
        let utf8 = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
        if !CompactString.isASCII(utf8)
            && String(validating: utf8.assumingMemoryBound(to: UInt8.self), as: UTF8.self) == nil
        {
            throw damaged("invalid UTF-8")
        }
        offset += count
        return body(utf8)
    }

    package mutating func readOptionalString() throws(FlatSyncError) -> String? {
        try readBool() ? try readString() : nil
    }

    /// A string, or an equal one from `recent` instead of a new copy; a new one joins the front of
    /// `recent`, which keeps at most four. For columns that repeat a handful of values, such as the
    /// device IDs of 100,000 history items, each of which would otherwise hold its own copy.
    package mutating func readString(reusing recent: inout [String]) throws(FlatSyncError) -> String {
        let count = try readCount()
        guard count > 0 else { return "" }
        let bytes = UnsafeRawBufferPointer(rebasing: self.bytes[offset..<offset + count])
        for candidate in recent where candidate.utf8.count == count {
            // Compared with memcmp: `elementsEqual` on the UTF-8 view went byte by byte through iterators.
            var candidate = candidate
            if candidate.withUTF8({ memcmp($0.baseAddress!, bytes.baseAddress!, count) == 0 }) {
                offset += count
                return candidate
            }
        }
        let string = try readString(byteCount: count)
        recent.insert(string, at: 0)
        if recent.count > 4 { recent.removeLast() }
        return string
    }

    /// An optional string read with ``readString(reusing:)``.
    package mutating func readOptionalString(reusing recent: inout [String]) throws(FlatSyncError) -> String? {
        try readBool() ? try readString(reusing: &recent) : nil
    }

    package mutating func readData() throws(FlatSyncError) -> Data {
        let count = try readCount()
        let data = Data(bytes[offset..<offset + count])
        offset += count
        return data
    }

    package mutating func readDate() throws(FlatSyncError) -> Date {
        let interval = try readDouble()
        guard interval.isFinite else { throw damaged("non-finite date") }
        return Date(timeIntervalSinceReferenceDate: interval)
    }
}

extension Data {
    /// Runs `body` with a ``BinaryReader`` over the data's bytes.
    package func withBinaryReader<T>(_ body: (inout BinaryReader) throws(FlatSyncError) -> T) throws(FlatSyncError) -> T
    {
        let result: Result<T, FlatSyncError> = withUnsafeBytes { buffer in
            var reader = BinaryReader(buffer)
            do throws(FlatSyncError) {
                return .success(try body(&reader))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}

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

/// Reads ``BinaryWriter``'s layout: ``BinaryReader`` from bytes in memory, ``ColumnCursor`` from a snapshot
/// column streamed from its file. Each says where the bytes come from; the values are decoded once, here,
/// and every length is checked against the bytes that remain, so damaged input fails with
/// ``FlatSyncError/Code-swift.struct/damagedFile`` instead of crashing.
package protocol BinaryLayoutReading: ~Copyable {
    /// The number of bytes left to read.
    var remaining: Int { get }
    /// The next `count` bytes, contiguous, left to read: valid until the next call that reads or steps;
    /// throws ``FlatSyncError/Code-swift.struct/damagedFile`` when fewer remain.
    mutating func peek(_ count: Int) throws(FlatSyncError) -> UnsafeRawBufferPointer
    /// Steps over `count` bytes that ``peek(_:)`` made available.
    mutating func advance(_ count: Int)
    mutating func readByte() throws(FlatSyncError) -> UInt8
    /// A varint (LEB128, see ``VarintDecoder``).
    mutating func readVarint() throws(FlatSyncError) -> UInt64
    /// A ``FlatSyncError/Code-swift.struct/damagedFile`` error saying what is wrong, and where.
    func damaged(_ what: String) -> FlatSyncError
}

extension BinaryLayoutReading where Self: ~Copyable {
    /// Passes the next `count` bytes, contiguous, to `body` and steps over them.
    @inline(__always)
    package mutating func take<T>(_ count: Int, _ body: (UnsafeRawBufferPointer) -> T) throws(FlatSyncError) -> T {
        let result = body(try peek(count))
        advance(count)
        return result
    }

    /// A length or an element count. Every element takes at least one byte, so a count larger than the
    /// bytes left after it is damage; checking that here keeps damaged input from allocating huge buffers.
    @inline(__always)
    package mutating func readCount() throws(FlatSyncError) -> Int {
        let value = try readVarint()
        guard value <= UInt64(remaining) else { throw damaged("count \(value) over the \(remaining) bytes left") }
        return Int(value)
    }

    @inline(__always)
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

    @inline(__always)
    package mutating func readDouble() throws(FlatSyncError) -> Double {
        try take(8) { Double(bitPattern: UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self))) }
    }

    /// A finite date, as ``BinaryWriter/write(_:)-(Date)`` writes one.
    @inline(__always)
    package mutating func readDate() throws(FlatSyncError) -> Date {
        let interval = try readDouble()
        guard interval.isFinite else { throw damaged("non-finite date") }
        return Date(timeIntervalSinceReferenceDate: interval)
    }

    package mutating func readData() throws(FlatSyncError) -> Data {
        try take(try readCount()) { Data($0) }
    }

    /// Runs `body` with the bytes of the next string, checked to be valid UTF-8, and whether they are all
    /// ASCII, without making a `String` of them.
    @inline(__always)
    package mutating func readStringBytes<T>(
        _ body: (_ utf8: UnsafeRawBufferPointer, _ isASCII: Bool) -> T
    ) throws(FlatSyncError) -> T {
        let count = try readCount()
        let utf8 = try peek(count)
        let isASCII = CompactString.isASCII(utf8)
        if !isASCII && String(validating: utf8.assumingMemoryBound(to: UInt8.self), as: UTF8.self) == nil {
            throw damaged("invalid UTF-8")
        }
        let result = body(utf8, isASCII)
        advance(count)
        return result
    }

    /// Runs `body` with the bytes of the next string, checked to be valid UTF-8, without making a `String`.
    @inline(__always)
    package mutating func withStringBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) throws(FlatSyncError) -> T {
        try readStringBytes { utf8, _ in body(utf8) }
    }

    @inline(__always)
    package mutating func readString() throws(FlatSyncError) -> String {
        // Checked already: `String(decoding:)` takes the bytes without the slower generic validation.
        try readStringBytes { utf8, _ in String(decoding: utf8, as: UTF8.self) }
    }

    package mutating func readOptionalString() throws(FlatSyncError) -> String? {
        try readBool() ? try readString() : nil
    }

    /// A string as a ``CompactString``, without making a `String` of a short one.
    package mutating func readCompactString() throws(FlatSyncError) -> CompactString {
        try readStringBytes { utf8, _ in CompactString(validUTF8: utf8) }
    }

    /// A string, or an equal one from `recent` instead of a new copy; a new one joins the front of `recent`,
    /// which keeps at most four. For columns that repeat a handful of values, such as the device IDs of
    /// 100,000 history items, each of which would otherwise hold its own copy.
    package mutating func readString(reusing recent: inout [String]) throws(FlatSyncError) -> String {
        try readStringBytes { utf8, _ in
            for candidate in recent where candidate.utf8.count == utf8.count {
                // Compared with memcmp: `elementsEqual` on the UTF-8 view goes byte by byte through iterators.
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

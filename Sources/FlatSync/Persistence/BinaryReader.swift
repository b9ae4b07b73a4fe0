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

/// Reads values written by ``BinaryWriter`` from bytes in memory (see ``BinaryLayoutReading``, which
/// decodes them), and the fixed-width fields of headers.
package struct BinaryReader: BinaryLayoutReading {
    private let bytes: UnsafeRawBufferPointer
    package private(set) var offset: Int = 0

    /// Reads from `bytes`, which must stay valid while the reader is used.
    package init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    package var isAtEnd: Bool { offset >= bytes.count }
    package var remaining: Int { bytes.count - offset }

    package func damaged(_ what: String) -> FlatSyncError {
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

    @inline(__always)
    package mutating func readVarint() throws(FlatSyncError) -> UInt64 {
        // Most varints are one byte: counts, lengths, numbers of types.
        if offset < bytes.count, bytes[offset] < 0x80 {
            defer { offset += 1 }
            return UInt64(bytes[offset])
        }
        return try readLongVarint()
    }

    private mutating func readLongVarint() throws(FlatSyncError) -> UInt64 {
        var decoder = VarintDecoder()
        while true {
            switch decoder.take(try readByte()) {
            case .more: continue
            case .value(let value): return value
            case .damaged(let reason): throw damaged(reason)
            }
        }
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

    package func peek(_ count: Int) throws(FlatSyncError) -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw damaged("unexpected end") }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    package mutating func advance(_ count: Int) {
        offset += count
    }

    /// The next string, whose bytes were checked to be UTF-8 when they were first read (or written from a
    /// `String`): made without checking them again (`String(decoding:)` would repair them if they were not).
    package mutating func readCheckedString() throws(FlatSyncError) -> String {
        try take(try readCount()) { String(decoding: $0, as: UTF8.self) }
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

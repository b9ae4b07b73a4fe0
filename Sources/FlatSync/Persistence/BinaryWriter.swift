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

/// Appends primitive values to a byte buffer in FlatSync's compact binary layout: LEB128 variable-length
/// integers, length-prefixed UTF-8 strings and little-endian IEEE doubles, plus fixed-width integers and
/// raw bytes for headers whose fields sit at fixed offsets.
///
/// Used for command-log payloads and the packed columns of store snapshots, where
/// `PropertyListEncoder` costs ~20 µs per small value on Linux and would dominate every enqueue.
/// ``BinaryReader`` reads the same layout back.
package struct BinaryWriter {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package var data: Data { Data(bytes) }

    /// Appends another writer's bytes.
    package mutating func append(_ other: BinaryWriter) {
        bytes.append(contentsOf: other.bytes)
    }

    package mutating func write(_ value: UInt8) {
        bytes.append(value)
    }

    /// An unsigned integer in 1–10 bytes (7 bits per byte, high bit set on all but the last).
    package mutating func write(varint value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    /// A signed integer, zig-zag encoded so small negative numbers stay short.
    package mutating func write(signed value: Int64) {
        write(varint: UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    package mutating func write(_ value: Bool) {
        bytes.append(value ? 1 : 0)
    }

    package mutating func write(_ value: Double) {
        write(fixed64: value.bitPattern)
    }

    /// An unsigned integer in exactly 4 bytes, little-endian. For headers whose fields sit at fixed
    /// offsets (so a tool or a test can find them) and checksums stored after what they cover; prefer
    /// ``write(varint:)`` elsewhere.
    package mutating func write(fixed32 value: UInt32) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// An unsigned integer in exactly 8 bytes, little-endian; see ``write(fixed32:)``.
    package mutating func write(fixed64 value: UInt64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Bytes as they are, with no length before them: for signatures and magic numbers, whose length the
    /// reader knows (``BinaryReader/readRaw(count:)``). Bytes of varying length go in as `Data`, which is
    /// length-prefixed.
    package mutating func write(raw: some Sequence<UInt8>) {
        bytes.append(contentsOf: raw)
    }

    package mutating func write(_ value: String) {
        // Appending the UTF-8 view directly is about a quarter faster than going through `withUTF8`.
        let utf8 = value.utf8
        write(varint: UInt64(utf8.count))
        bytes.append(contentsOf: utf8)
    }

    /// An optional string: a presence byte, then the string.
    package mutating func write(_ value: String?) {
        if let value {
            bytes.append(1)
            write(value)
        } else {
            bytes.append(0)
        }
    }

    package mutating func write(_ value: Data) {
        write(varint: UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    package mutating func write(_ value: Date) {
        write(value.timeIntervalSinceReferenceDate)
    }
}

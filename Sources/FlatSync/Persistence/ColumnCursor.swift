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

/// Reads one packed column (``BinaryWriter``'s layout, decoded by ``BinaryLayoutReading``) through a 16 KB
/// buffer, computing the column's CRC-32 as it goes.
package struct ColumnCursor: BinaryLayoutReading, ~Copyable {
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

    /// The bytes of the column not read yet.
    package var remaining: Int { end - start + endOffset - nextOffset }

    package func damaged(_ what: String) -> FlatSyncError {
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

    package mutating func peek(_ count: Int) throws(FlatSyncError) -> UnsafeRawBufferPointer {
        try need(count)
        return UnsafeRawBufferPointer(rebasing: buffer[start..<start + count])
    }

    package mutating func advance(_ count: Int) {
        start += count
    }
}

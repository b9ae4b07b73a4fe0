import Foundation
import Testing

@testable import FlatSync

/// The fixed-width and raw pieces of ``BinaryWriter`` and ``BinaryReader``, for headers that keep their
/// fields at fixed offsets. (The variable-length pieces are exercised by the snapshot and command-log tests.)
@Suite struct BinaryCodecTests {
    @Test func fixedWidthIntegersRoundTripLittleEndianAtFixedOffsets() throws {
        let values32: [UInt32] = [0, 1, 0x7F, 0x80, 0x1234_5678, .max]
        let values64: [UInt64] = [0, 1, 0x80, 0x0102_0304_0506_0708, .max]
        var writer = BinaryWriter()
        for value in values32 { writer.write(fixed32: value) }
        for value in values64 { writer.write(fixed64: value) }
        #expect(writer.bytes.count == 4 * values32.count + 8 * values64.count, "every value takes its full width")
        #expect(Array(writer.bytes[16..<20]) == [0x78, 0x56, 0x34, 0x12], "little-endian")
        #expect(Array(writer.bytes[48..<56]) == [8, 7, 6, 5, 4, 3, 2, 1], "little-endian")

        let read = try writer.data.withBinaryReader { (reader) throws(FlatSyncError) -> ([UInt32], [UInt64]) in
            let read32 = try values32.map { _ throws(FlatSyncError) in try reader.readFixed32() }
            let read64 = try values64.map { _ throws(FlatSyncError) in try reader.readFixed64() }
            #expect(reader.isAtEnd)
            return (read32, read64)
        }
        #expect(read.0 == values32)
        #expect(read.1 == values64)
    }

    @Test func varintsRoundTripAtTheExtremesAndRefuseMoreThan64Bits() throws {
        let values: [UInt64] = [0, 1, 127, 128, 300, UInt64(UInt32.max), .max - 1, .max]
        var writer = BinaryWriter()
        for value in values { writer.write(varint: value) }
        let read = try writer.data.withBinaryReader { (reader) throws(FlatSyncError) -> [UInt64] in
            try values.map { _ throws(FlatSyncError) in try reader.readVarint() }
        }
        #expect(read == values)

        func decode(_ bytes: [UInt8]) -> String {
            var decoder = VarintDecoder()
            for byte in bytes {
                switch decoder.take(byte) {
                case .more: continue
                case .value(let value): return "\(value)"
                case .damaged(let reason): return reason
                }
            }
            return "unfinished"
        }
        let nine = [UInt8](repeating: 0xFF, count: 9)
        #expect(decode(nine + [0x01]) == "\(UInt64.max)")
        #expect(decode(nine + [0x02]) == "varint overflow", "a tenth byte may carry one bit only")
        #expect(decode(nine + [0x81]) == "varint overflow", "and never continues")
        #expect(decode([0x80]) == "unfinished")
        let refused = #expect(throws: FlatSyncError.self) {
            try Data(nine + [0x02]).withBinaryReader { (reader) throws(FlatSyncError) in _ = try reader.readVarint() }
        }
        #expect(refused?.code == .damagedFile)
    }

    @Test func rawBytesRoundTripWithoutALength() throws {
        var writer = BinaryWriter()
        writer.write(raw: Array("MAGIC".utf8))
        writer.write(raw: Data([0, 0xFF]))
        writer.write(varint: 300)
        #expect(writer.bytes.prefix(7) == [77, 65, 71, 73, 67, 0, 0xFF], "no length before the bytes")

        let read = try writer.data.withBinaryReader {
            (reader) throws(FlatSyncError) -> ([UInt8], [UInt8], [UInt8], UInt64) in
            let magic = try reader.readRaw(count: 5)
            let empty = try reader.readRaw(count: 0)
            let pair = try reader.readRaw(count: 2)
            return (magic, empty, pair, try reader.readVarint())
        }
        #expect(read.0 == Array("MAGIC".utf8))
        #expect(read.1 == [])
        #expect(read.2 == [0, 0xFF])
        #expect(read.3 == 300)
    }

    /// Every read past the end, by any number of bytes, is damage rather than a crash or a short value.
    @Test(arguments: 0..<8)
    func truncatedInputIsDamage(_ length: Int) {
        let bytes = Data((0..<length).map { UInt8($0 + 1) })
        if length < 4 {
            expectError(.damagedFile) {
                try bytes.withBinaryReader { (reader) throws(FlatSyncError) in try reader.readFixed32() }
            }
        }
        expectError(.damagedFile) {
            try bytes.withBinaryReader { (reader) throws(FlatSyncError) in try reader.readFixed64() }
        }
        expectError(.damagedFile) {
            try bytes.withBinaryReader { (reader) throws(FlatSyncError) in try reader.readRaw(count: length + 1) }
        }
        // Reading what is there leaves nothing behind for the next field.
        expectError(.damagedFile) {
            try bytes.withBinaryReader { (reader) throws(FlatSyncError) in
                _ = try reader.readRaw(count: length)
                _ = try reader.readFixed32()
            }
        }
    }

    @Test func aNegativeRawCountIsDamage() {
        expectError(.damagedFile) {
            try Data([1, 2, 3]).withBinaryReader { (reader) throws(FlatSyncError) in try reader.readRaw(count: -1) }
        }
    }
}

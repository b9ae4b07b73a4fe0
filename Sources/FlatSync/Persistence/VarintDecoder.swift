/// Decodes one varint (LEB128, as ``BinaryWriter/write(varint:)`` writes it) a byte at a time: the rules
/// every reader shares, whatever holds its bytes.
package struct VarintDecoder {
    private var result: UInt64 = 0
    private var shift: UInt64 = 0

    package enum Step {
        /// More bytes follow.
        case more
        /// That byte ended the varint.
        case value(UInt64)
        /// The bytes do not make a 64-bit value.
        case damaged(String)
    }

    package init() {}

    /// Takes the next byte of the varint. The tenth byte may carry one bit and no continuation, so a
    /// varint never runs longer than ten bytes.
    @inline(__always)
    package mutating func take(_ byte: UInt8) -> Step {
        if shift == 63 && byte > 1 { return .damaged("varint overflow") }
        result |= UInt64(byte & 0x7F) << shift
        if byte & 0x80 == 0 { return .value(result) }
        shift += 7
        return .more
    }
}

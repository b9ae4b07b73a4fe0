#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// CRC-32 (the IEEE polynomial used by zlib and PNG), for detecting damaged bytes in log frames and
/// snapshot files.
package enum CRC32 {
    /// Sixteen 256-entry tables for slicing-by-16: sixteen bytes per step instead of one, since every cold
    /// start checksums its whole snapshot.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 16 * 256)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            tables[n] = c
        }
        for n in 0..<256 {
            for k in 1..<16 {
                let previous = tables[(k - 1) * 256 + n]
                tables[k * 256 + n] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    /// The checksum of `bytes`, continuing from `crc` (pass the result of an earlier call to checksum
    /// data in pieces).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var c = ~crc
        guard let base = bytes.baseAddress else { return crc }
        var index = 0
        let count = bytes.count
        tables.withUnsafeBufferPointer { t in
            @inline(__always) func at(_ table: Int, _ byte: UInt32) -> UInt32 { t[table << 8 | Int(byte & 0xFF)] }
            while count - index >= 16 {
                let w0 = base.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian ^ c
                let w1 = base.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                let w2 = base.loadUnaligned(fromByteOffset: index + 8, as: UInt32.self).littleEndian
                let w3 = base.loadUnaligned(fromByteOffset: index + 12, as: UInt32.self).littleEndian
                c =
                    at(15, w0) ^ at(14, w0 >> 8) ^ at(13, w0 >> 16) ^ at(12, w0 >> 24)
                    ^ at(11, w1) ^ at(10, w1 >> 8) ^ at(9, w1 >> 16) ^ at(8, w1 >> 24)
                    ^ at(7, w2) ^ at(6, w2 >> 8) ^ at(5, w2 >> 16) ^ at(4, w2 >> 24)
                    ^ at(3, w3) ^ at(2, w3 >> 8) ^ at(1, w3 >> 16) ^ at(0, w3 >> 24)
                index += 16
            }
            while index < count {
                c = t[Int((c ^ UInt32(base.load(fromByteOffset: index, as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                index += 1
            }
        }
        return ~c
    }

    /// The checksum of `data`, continuing from `crc`.
    package static func checksum(_ data: Data, continuing crc: UInt32 = 0) -> UInt32 {
        data.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}

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

import Foundation

/// CRC-32 (the IEEE polynomial used by zlib and PNG), for detecting damaged bytes in log frames and
/// snapshot files.
package enum CRC32 {
    /// Eight 256-entry tables for slicing-by-8: about eight bytes per step instead of one.
    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for n in 0..<256 {
            var c = UInt32(n)
            for _ in 0..<8 { c = (c & 1) != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
            tables[0][n] = c
        }
        for n in 0..<256 {
            for k in 1..<8 { tables[k][n] = (tables[k - 1][n] >> 8) ^ tables[0][Int(tables[k - 1][n] & 0xFF)] }
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
            let t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5], t6 = t[6], t7 = t[7]
            while count - index >= 8 {
                let lo = base.loadUnaligned(fromByteOffset: index, as: UInt32.self).littleEndian ^ c
                let hi = base.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self).littleEndian
                c =
                    t7[Int(lo & 0xFF)] ^ t6[Int((lo >> 8) & 0xFF)] ^ t5[Int((lo >> 16) & 0xFF)]
                    ^ t4[Int(lo >> 24)] ^ t3[Int(hi & 0xFF)] ^ t2[Int((hi >> 8) & 0xFF)]
                    ^ t1[Int((hi >> 16) & 0xFF)] ^ t0[Int(hi >> 24)]
                index += 8
            }
            while index < count {
                c = t0[Int((c ^ UInt32(base.load(fromByteOffset: index, as: UInt8.self))) & 0xFF)] ^ (c >> 8)
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

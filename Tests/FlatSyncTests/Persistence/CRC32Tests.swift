import Foundation
import Testing

@testable import FlatSync

@Suite struct CRC32Tests {
    @Test func matchesTheStandardCheckValue() {
        // "123456789" → 0xCBF43926 is the published check value of CRC-32/ISO-HDLC.
        #expect(CRC32.checksum(Data("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum(Data()) == 0)
    }

    @Test func checksumsInPiecesEqualTheWhole() {
        let bytes = Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        let whole = CRC32.checksum(bytes)
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let first = CRC32.checksum(bytes.prefix(split))
            #expect(CRC32.checksum(bytes.suffix(from: split), continuing: first) == whole, "split at \(split)")
        }
    }
}

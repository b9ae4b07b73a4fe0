import Foundation
import Testing

@testable import FlatSyncTesting

@Suite("CKWS emulator: JSON writer")
struct CloudKitJSONWriterTests {
    private func text(_ value: Any) -> String {
        String(decoding: CloudKitJSONWriter.data(value), as: UTF8.self)
    }

    @Test func writesSortedObjectsAndExactNumbers() {
        let object: [String: Any] = [
            "b": [Int64.max, Int64.min, 0] as [Any], "a": true, "c": NSNull(), "d": [String: Any](),
            "e": 0.1 + 0.2, "f": -0.0, "g": Double.leastNonzeroMagnitude, "h": 2.0, "i": Double.infinity, "j": 7,
        ]
        #expect(
            text(object)
                == #"{"a":true,"b":[9223372036854775807,-9223372036854775808,0],"c":null,"d":{},"#
                + #""e":0.30000000000000004,"f":-0.0,"g":5e-324,"h":2.0,"i":null,"j":7}"#)
    }

    @Test func escapesOnlyWhatJSONRequires() throws {
        let string = "a\"b\\c/d\n\r\t\u{0}\u{1f}é👋\u{2028}"
        let written = text(["s": string])
        #expect(written == #"{"s":"a\"b\\c/d\n\r\t\u0000\u001fé👋\#u{2028}"}"#)
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any]
        #expect(parsed?["s"] as? String == string)
    }

    @Test func doublesReadBackBitForBit() throws {
        let values: [Double] = [0.1, -0.1, 1e300, 1.7976931348623157e308, 2.2250738585072014e-308, 123_456.789, 1e-7]
        let parsed = try #require(try JSONSerialization.jsonObject(with: CloudKitJSONWriter.data(values)) as? [Any])
        // Read back as the emulator reads a DOUBLE field.
        let read = try parsed.map { (value) throws(CloudKitJSON.Problem) in try CloudKitJSON.double(value, "x") }
        #expect(read.map(\.bitPattern) == values.map(\.bitPattern))
    }
}

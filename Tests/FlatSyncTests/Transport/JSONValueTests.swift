import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

@Suite("CKWS transport: JSON reader and writer")
struct JSONValueTests {
    private func parse(_ text: String) throws -> JSONValue { try JSONValue.parse(Data(text.utf8)) }

    @Test func valuesOfEveryKindAreRead() throws {
        let value = try parse(
            #" {"s":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00","n":-12.5e3,"i":9223372036854775807,"t":true,"f":false,"z":null,"l":[1,[],{}]} "#
        )
        #expect(value["s"] == .string("a\"b\\c/d\n\té😀"))
        #expect(value["n"]?.doubleValue == -12_500)
        #expect(value["i"]?.int64Value == .max, "integers are read exactly, past 2^53")
        #expect(value["t"] == .bool(true) && value["f"] == .bool(false) && value["z"] == .null)
        #expect(value["l"] == .array([.number("1"), .array([]), .object([])]))
        #expect(value["missing"] == nil)
    }

    @Test(arguments: [
        "", "{", #"{"a":1,}"#, "[1 2]", #""unterminated"#, #"{"a" 1}"#, "tru", "01x", "-", "1.", "1e",
        #""\x""#, #""\ud800""#, #""\udc00""#, "\"a\u{01}b\"", "{} {}", "NaN",
    ])
    func whatIsNotJSONIsRefusedWithoutACrash(_ text: String) {
        #expect(throws: JSONValue.ParseError.self) { try parse(text) }
    }

    @Test func nestingIsBounded() throws {
        let deep = String(repeating: "[", count: JSONValue.maximumDepth + 1) + String(repeating: "]", count: 65)
        #expect(throws: JSONValue.ParseError.self) { try parse(deep) }
        let fine = String(repeating: "[", count: 10) + String(repeating: "]", count: 10)
        _ = try parse(fine)
    }

    @Test func whatTheWriterWritesReadsBackTheSame() throws {
        let text = "quote \" backslash \\ newline \n tab \t bell \u{07} é 😀 nul \u{0}"
        var writer = JSONValue.Writer()
        writer.object { object in
            object.member("s") { $0.string(text) }
            object.member("i") { $0.int(.min) }
            object.member("d") { $0.double(0.1) }
            object.member("l") { $0.array([1, 2]) { $0.int($1) } }
            object.member("b") { $0.bool(true) }
        }
        let value = try JSONValue.parse(writer.data)
        #expect(value["s"] == .string(text))
        #expect(value["i"]?.int64Value == .min)
        #expect(value["d"]?.doubleValue == 0.1)
        #expect(value["l"] == .array([.number("1"), .number("2")]))
        #expect(value["b"] == .bool(true))
        // Foundation reads it too: it is JSON, not just what this reader accepts.
        let foundation = try JSONSerialization.jsonObject(with: writer.data) as? [String: Any]
        #expect(foundation?["s"] as? String == text)
    }
}

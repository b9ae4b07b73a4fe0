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
        #expect(throws: JSONValue.ParseError.self) { try readThroughTheReader(deep) }
        let deepest = String(repeating: "[", count: JSONValue.maximumDepth) + String(repeating: "]", count: 64)
        #expect(try readThroughTheReader(deepest) == parse(deepest))
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.Reader.read(Data(deep.utf8)) { try $0.skip() } }
        try JSONValue.Reader.read(Data(deepest.utf8)) { try $0.skip() }
        let deepObject =
            String(repeating: #"{"a":"#, count: JSONValue.maximumDepth + 1) + "1"
            + String(repeating: "}", count: JSONValue.maximumDepth + 1)
        #expect(throws: JSONValue.ParseError.self) { try parse(deepObject) }
        #expect(throws: JSONValue.ParseError.self) { try readThroughTheReader(deepObject) }
        #expect(throws: JSONValue.ParseError.self) {
            try JSONValue.Reader.read(Data(deepObject.utf8)) { try $0.skip() }
        }
    }

    // MARK: - The reader

    private func readThroughTheReader(_ text: String) throws -> JSONValue {
        try JSONValue.Reader.read(Data(text.utf8)) { try CloudKitResponseFuzzing.rebuilt(from: &$0) }
    }

    @Test func theReaderWalksWhatTheParserParses() throws {
        let text =
            #" {"s":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00","n":-12.5e3,"t":true,"z":null,"#
            + #""l":[1,[],{},[{"k":[]}]],"o":{"a":{"b":"c"}},"s":"again"} "#
        #expect(try readThroughTheReader(text) == parse(text))
        #expect(try readThroughTheReader("[]") == .array([]))
        #expect(try readThroughTheReader(" 7 ") == .number("7"))
    }

    @Test(arguments: [
        "", "{", #"{"a":1,}"#, "[1 2]", #""unterminated"#, #"{"a" 1}"#, "tru", "01x", "-", "1.", "1e",
        #""\x""#, #""\ud800""#, #""\udc00""#, "\"a\u{01}b\"", "{} {}", "NaN", #"{"a":1 "b":2}"#, "[1,]", "{1:2}",
    ])
    func theReaderRefusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONValue.ParseError.self) { try readThroughTheReader(text) }
        #expect(throws: JSONValue.ParseError.self, "skipped") {
            try JSONValue.Reader.read(Data(text.utf8)) { try $0.skip() }
        }
    }

    @Test func aValueOfAnotherKindReadsAsNilAndIsSkippedWhole() throws {
        let read = try JSONValue.Reader.read(Data(#"{"a":{"x":[1,{"y":2}]},"b":"B","c":[true]}"#.utf8)) {
            reader in
            var seen: [String: String?] = [:]
            let wasObject = try reader.readObject { key, reader in seen[key] = try reader.string() }
            return (wasObject, seen)
        }
        #expect(read.0)
        #expect(read.1 == ["a": nil, "b": "B", "c": nil])
        // Not an object: read whole, and said so.
        let notObject = try JSONValue.Reader.read(Data("[1,[2]]".utf8)) { reader in
            try reader.readObject { _, reader in try reader.skip() }
        }
        #expect(!notObject)
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

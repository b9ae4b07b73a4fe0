import FlatSync
import Foundation

/// A parsed JSON value, as the CKWS transport reads responses (and the emulator in `FlatSyncTesting` reads
/// requests: the grammar is shared, the mapping of records and errors is written on each side apart).
///
/// Numbers keep their text, so an INT64 is read exactly (a `Double` would round past 2^53) and a DOUBLE
/// by `Double(_:)`'s correctly rounded parse. Foundation's `JSONDecoder` spent about 40 µs per record on
/// Linux (a third of a sync's time through the emulator); this reader and ``JSONValue/Writer`` do the
/// same work in a fraction of it.
package enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    /// A number, as written.
    case number(String)
    case string(String)
    case array([JSONValue])
    /// An object's members in the order written. (CKWS objects are small: looking a key up by walking them
    /// beats hashing every key into a dictionary while parsing.)
    case object([(key: String, value: JSONValue)])

    /// Why bytes are not JSON, and where.
    package struct ParseError: Error, CustomStringConvertible {
        package var offset: Int
        package var reason: String
        package var description: String { "\(reason) at byte \(offset)" }
    }

    /// The value `data` holds: one JSON value, with nothing but whitespace around it.
    package static func parse(_ data: Data) throws(ParseError) -> JSONValue {
        let result: Result<JSONValue, ParseError> = data.withUnsafeBytes { buffer in
            var parser = Parser(bytes: buffer)
            do throws(ParseError) {
                let value = try parser.value(depth: 0)
                parser.skipWhitespace()
                guard parser.index == buffer.count else { throw parser.error("text after the JSON value") }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    // MARK: - Reading values

    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        // A key given twice means its last value, as most parsers do.
        return members.last { $0.key == key }?.value
    }

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    package var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    package var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The number as an exact 64-bit integer (`12`, `12.0`, `1.2e1`), or nil.
    package var int64Value: Int64? {
        guard case .number(let text) = self else { return nil }
        if let exact = Int64(text) { return exact }
        guard let double = Double(text), double.rounded() == double, abs(double) < 9.2e18 else { return nil }
        return Int64(double)
    }

    package var doubleValue: Double? {
        guard case .number(let text) = self else { return nil }
        return Double(text)
    }

    // MARK: - Parser

    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    package static let maximumDepth = 64

    struct Parser {
        let bytes: UnsafeRawBufferPointer
        var index = 0

        func error(_ reason: String) -> ParseError { ParseError(offset: index, reason: reason) }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func value(depth: Int) throws(ParseError) -> JSONValue {
            skipWhitespace()
            guard index < bytes.count else { throw error("the JSON ends too early") }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                guard depth < JSONValue.maximumDepth else { throw error("JSON nested too deeply") }
                return try object(depth: depth + 1)
            case UInt8(ascii: "["):
                guard depth < JSONValue.maximumDepth else { throw error("JSON nested too deeply") }
                return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw error("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws(ParseError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw error("the JSON ends too early") }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] {
                throw error("unexpected character")
            }
            index += count
        }

        mutating func object(depth: Int) throws(ParseError) -> JSONValue {
            var members: [(key: String, value: JSONValue)] = []
            guard openContainer(closing: UInt8(ascii: "}")) else { return .object(members) }
            // CKWS objects have a few members (a field's value and type, a record's half dozen): room for them
            // at once instead of growing 1, 2, 4, 8.
            members.reserveCapacity(8)
            repeat {
                let key = try memberKey()
                members.append((key, try value(depth: depth)))
            } while try !endOfElement(closing: UInt8(ascii: "}"))
            return .object(members)
        }

        mutating func array(depth: Int) throws(ParseError) -> JSONValue {
            var elements: [JSONValue] = []
            guard openContainer(closing: UInt8(ascii: "]")) else { return .array(elements) }
            repeat {
                elements.append(try value(depth: depth))
            } while try !endOfElement(closing: UInt8(ascii: "]"))
            return .array(elements)
        }

        // The grammar of containers, shared by the tree and by ``JSONValue/Reader``.

        /// Steps past the `{` or `[` at `index`: false when the container is empty (its end read too).
        mutating func openContainer(closing: UInt8) -> Bool {
            index += 1
            skipWhitespace()
            guard index < bytes.count, bytes[index] == closing else { return true }
            index += 1
            return false
        }

        /// An object member's `"key":`.
        mutating func memberKey() throws(ParseError) -> String {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a key") }
            let key = try string()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            return key
        }

        /// After a member or element: true at the container's end (read), false after a comma.
        mutating func endOfElement(closing: UInt8) throws(ParseError) -> Bool {
            skipWhitespace()
            guard index < bytes.count else { throw error("the JSON ends too early") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                return false
            case closing:
                index += 1
                return true
            default:
                throw error(closing == UInt8(ascii: "}") ? "expected ',' or '}'" : "expected ',' or ']'")
            }
        }

        mutating func number() throws(ParseError) -> String {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            var digits = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                index += 1
                digits += 1
            }
            guard digits > 0 else { throw error("a number without digits") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                let before = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                guard index > before else { throw error("a number without digits after '.'") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                let before = index
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                guard index > before else { throw error("a number without digits in its exponent") }
            }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }

        mutating func string() throws(ParseError) -> String {
            // Never nil when kept.
            try scanString(keeping: true) ?? ""
        }

        /// Reads a string as ``string()`` does, refusing the same, without making it.
        mutating func skipString() throws(ParseError) {
            _ = try scanString(keeping: false)
        }

        /// Reads the string at `index`; returns it when `keeping`.
        private mutating func scanString(keeping: Bool) throws(ParseError) -> String? {
            index += 1
            let start = index
            // The usual case: no escapes, so the bytes are the string.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text =
                        keeping
                        ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self) : nil
                    index += 1
                    return text
                }
                if byte == UInt8(ascii: "\\") { break }
                guard byte >= 0x20 else { throw error("a control character inside a string") }
                index += 1
            }
            var scalars = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    index += 1
                    return keeping ? String(decoding: scalars, as: UTF8.self) : nil
                case UInt8(ascii: "\\"):
                    index += 1
                    guard index < bytes.count else { throw error("the JSON ends inside an escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escape)
                    case UInt8(ascii: "b"): scalars.append(0x08)
                    case UInt8(ascii: "f"): scalars.append(0x0C)
                    case UInt8(ascii: "n"): scalars.append(0x0A)
                    case UInt8(ascii: "r"): scalars.append(0x0D)
                    case UInt8(ascii: "t"): scalars.append(0x09)
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800..<0xDC00).contains(code) {
                            // A high surrogate must be followed by an escaped low one.
                            guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else { throw error("an unpaired surrogate") }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error("an unpaired surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(code) {
                            throw error("an unpaired surrogate")
                        }
                        scalars.append(contentsOf: String(Character(Unicode.Scalar(code)!)).utf8)
                    default:
                        throw error("an unknown escape")
                    }
                default:
                    guard byte >= 0x20 else { throw error("a control character inside a string") }
                    scalars.append(byte)
                    index += 1
                }
            }
            throw error("the JSON ends inside a string")
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("the JSON ends inside an escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw error("a bad \\u escape")
                }
                value = value * 16 + digit
                index += 1
            }
            return value
        }
    }

    // MARK: - Writer

    /// Writes JSON text into one growing buffer: objects, arrays, strings escaped as JSON requires,
    /// exact integers. Commas are placed by the writer, which remembers for each open container whether it
    /// already holds something.
    package struct Writer {
        package fileprivate(set) var bytes: [UInt8] = []
        /// For each open container, whether a value was written in it (so the next needs a comma).
        private var filled: [Bool] = []
        /// A key was just written: the next value follows its colon without a comma.
        private var afterKey = false

        package init(capacity: Int = 1_024) { bytes.reserveCapacity(capacity) }

        package var data: Data { Data(bytes) }

        /// Before a value: a comma if the open container already holds one.
        private mutating func separate() {
            if afterKey {
                afterKey = false
                return
            }
            guard let last = filled.last else { return }
            if last { bytes.append(UInt8(ascii: ",")) } else { filled[filled.count - 1] = true }
        }

        /// `{`, then `body` writes members with ``member(_:_:)``, then `}`.
        package mutating func object(_ body: (inout Writer) throws -> Void) rethrows {
            separate()
            bytes.append(UInt8(ascii: "{"))
            filled.append(false)
            try body(&self)
            filled.removeLast()
            bytes.append(UInt8(ascii: "}"))
        }

        /// Inside an object: `"key":` followed by what `value` writes.
        package mutating func member(_ key: String, _ value: (inout Writer) throws -> Void) rethrows {
            string(key)
            bytes.append(UInt8(ascii: ":"))
            afterKey = true
            try value(&self)
        }

        /// `[`, one element per item written by `body`, `]`.
        package mutating func array<S: Sequence>(_ items: S, _ body: (inout Writer, S.Element) throws -> Void) rethrows
        {
            separate()
            bytes.append(UInt8(ascii: "["))
            filled.append(false)
            for item in items { try body(&self, item) }
            filled.removeLast()
            bytes.append(UInt8(ascii: "]"))
        }

        package mutating func string(_ value: String) {
            separate()
            writeString(value)
        }

        private mutating func writeString(_ value: String) {
            bytes.append(UInt8(ascii: "\""))
            var value = value
            value.withUTF8 { utf8 in
                // Most strings (names, keys, base64) need no escape: copied whole, not byte by byte.
                if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                    bytes.append(contentsOf: utf8)
                    return
                }
                for byte in utf8 {
                    switch byte {
                    case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                    case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                    case 0x0A: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                    case 0x0D: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                    case 0x09: bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                    case 0..<0x20:
                        let hex: StaticString = "0123456789abcdef"
                        bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), 0x30, 0x30])
                        bytes.append(hex.utf8Start[Int(byte >> 4)])
                        bytes.append(hex.utf8Start[Int(byte & 0xF)])
                    default: bytes.append(byte)
                    }
                }
            }
            bytes.append(UInt8(ascii: "\""))
        }

        package mutating func int(_ value: Int64) {
            separate()
            if value == 0 {
                bytes.append(UInt8(ascii: "0"))
                return
            }
            // Digits written backwards into a small buffer, then copied: no String in between.
            var magnitude = value.magnitude
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
            withUnsafeMutableBytes(of: &digits) { buffer in
                var index = buffer.count
                while magnitude > 0 {
                    index -= 1
                    buffer[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                }
                if value < 0 {
                    index -= 1
                    buffer[index] = UInt8(ascii: "-")
                }
                bytes.append(contentsOf: buffer[index...])
            }
        }

        /// A finite double (the caller refuses the others), in the shortest form that reads back exactly.
        package mutating func double(_ value: Double) {
            separate()
            bytes.append(contentsOf: "\(value)".utf8)
        }

        package mutating func bool(_ value: Bool) {
            separate()
            bytes.append(contentsOf: (value ? "true" : "false").utf8)
        }

        package mutating func null() {
            separate()
            bytes.append(contentsOf: "null".utf8)
        }

        /// A whole value. `sortingKeys`: each object's members in key order rather than as stored (how the
        /// emulator answers, so its bodies compare byte for byte); a number goes out as its text.
        package mutating func value(_ value: JSONValue, sortingKeys: Bool = false) {
            switch value {
            case .null: null()
            case .bool(let bool): self.bool(bool)
            case .number(let text):
                separate()
                bytes.append(contentsOf: text.utf8)
            case .string(let string): self.string(string)
            case .array(let elements):
                array(elements) { $0.value($1, sortingKeys: sortingKeys) }
            case .object(let members):
                // Most of the emulator's objects are built in key order already: checked, not copied and sorted.
                let ordered =
                    sortingKeys && !members.isInKeyOrder ? members.sorted { $0.key < $1.key } : members
                object { writer in
                    for member in ordered {
                        writer.member(member.key) { $0.value(member.value, sortingKeys: sortingKeys) }
                    }
                }
            }
        }
    }

    /// The writer as it writes an object's members.
    package typealias ObjectWriter = Writer
}

// Literals, so a value can be written as it reads: `["zoneName": "Reading", "atomic": true]`.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(integerLiteral value: Int64) { self = .integer(value) }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Members in the order written.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements.map { (key: $0.0, value: $0.1) })
    }

    /// An integer, exactly.
    package static func integer(_ value: Int64) -> JSONValue { .number(String(value)) }

    /// A double in the shortest text that reads back as the same value; JSON has no infinity or NaN, so
    /// those are `null`.
    package static func double(_ value: Double) -> JSONValue { value.isFinite ? .number("\(value)") : .null }
}

extension Array where Element == (key: String, value: JSONValue) {
    /// True when the members' keys are in ascending order.
    fileprivate var isInKeyOrder: Bool {
        guard count > 1 else { return true }
        for index in 1..<count where !(self[index - 1].key < self[index].key) { return false }
        return true
    }
}

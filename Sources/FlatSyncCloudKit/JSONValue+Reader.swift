import Foundation

extension JSONValue {
    /// Reads JSON text in one pass, value by value, without building a tree: the transport decodes
    /// responses with it straight into its wire types.
    ///
    /// A tree of every response (a dozen objects per record), built, walked once and freed, was most of
    /// the transport's time in a sync through the emulator. The grammar is ``JSONValue/parse(_:)``'s; a
    /// caller reads objects and arrays with closures that read (or ``skip()``) each member's value, and
    /// may take a small value whole as a ``JSONValue`` (a field's value, whose type may come after it).
    ///
    /// The reader lives inside ``read(_:_:)`` only: it points into the bytes of the `Data` it reads.
    package struct Reader {
        /// The kinds of JSON values.
        package enum Kind {
            case object, array, string, number, bool, null
        }

        private var parser: Parser
        private var depth = 0

        private init(parser: Parser) { self.parser = parser }

        /// Reads `data` with `body`, which must read one value; only whitespace may follow it. Throws
        /// ``JSONValue/ParseError`` for text that is not JSON, else what `body` throws.
        package static func read<T>(_ data: Data, _ body: (inout Reader) throws -> T) throws -> T {
            try data.withUnsafeBytes { buffer in
                var reader = Reader(parser: Parser(bytes: buffer))
                let value = try body(&reader)
                reader.parser.skipWhitespace()
                guard reader.parser.index == buffer.count else {
                    throw reader.parser.error("text after the JSON value")
                }
                return value
            }
        }

        /// The kind of the next value, which is not read.
        package mutating func peek() throws(ParseError) -> Kind {
            parser.skipWhitespace()
            guard parser.index < parser.bytes.count else { throw parser.error("the JSON ends too early") }
            switch parser.bytes[parser.index] {
            case UInt8(ascii: "{"): return .object
            case UInt8(ascii: "["): return .array
            case UInt8(ascii: "\""): return .string
            case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
            case UInt8(ascii: "n"): return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
            default: throw parser.error("unexpected character")
            }
        }

        /// Reads an object, calling `member` with each key in the order written; `member` must read the
        /// key's value or ``skip()`` it. Returns false, reading the value, when it is not an object.
        @discardableResult
        package mutating func readObject(_ member: (String, inout Reader) throws -> Void) throws -> Bool {
            guard try peek() == .object else {
                try skip()
                return false
            }
            try enter()
            if parser.openContainer(closing: UInt8(ascii: "}")) {
                repeat {
                    let key = try parser.memberKey()
                    try member(key, &self)
                } while try !parser.endOfElement(closing: UInt8(ascii: "}"))
            }
            depth -= 1
            return true
        }

        /// Reads an array, calling `element` for each element, which it must read or ``skip()``. Returns
        /// false, reading the value, when it is not an array.
        @discardableResult
        package mutating func readArray(_ element: (inout Reader) throws -> Void) throws -> Bool {
            guard try peek() == .array else {
                try skip()
                return false
            }
            try enter()
            if parser.openContainer(closing: UInt8(ascii: "]")) {
                repeat {
                    try element(&self)
                } while try !parser.endOfElement(closing: UInt8(ascii: "]"))
            }
            depth -= 1
            return true
        }

        /// One level deeper, refused past ``JSONValue/maximumDepth`` as the tree parser does.
        private mutating func enter() throws(ParseError) {
            guard depth < JSONValue.maximumDepth else { throw parser.error("JSON nested too deeply") }
            depth += 1
        }

        /// The next value, whole (as deep as the reader may still go).
        package mutating func value() throws(ParseError) -> JSONValue {
            try parser.value(depth: depth)
        }

        /// Reads the next value and drops it, refusing what the parser refuses, without making it: a record's
        /// `created` and `zoneID`, which FlatSync does not use, were trees built and freed for every record.
        package mutating func skip() throws(ParseError) {
            switch try peek() {
            case .object:
                try enter()
                if parser.openContainer(closing: UInt8(ascii: "}")) {
                    repeat {
                        _ = try parser.memberKey()
                        try skip()
                    } while try !parser.endOfElement(closing: UInt8(ascii: "}"))
                }
                depth -= 1
            case .array:
                try enter()
                if parser.openContainer(closing: UInt8(ascii: "]")) {
                    repeat { try skip() } while try !parser.endOfElement(closing: UInt8(ascii: "]"))
                }
                depth -= 1
            case .string:
                try parser.skipString()
            case .number, .bool, .null:
                _ = try parser.value(depth: depth)
            }
        }

        /// The next value if it is a string; any other value is read and gives nil.
        package mutating func string() throws(ParseError) -> String? {
            guard try peek() == .string else {
                try skip()
                return nil
            }
            return try parser.string()
        }

        /// The next value if it is `true` or `false`; any other value is read and gives nil.
        package mutating func bool() throws(ParseError) -> Bool? {
            try value().boolValue
        }

        /// The next value if it is a number, as a `Double`; any other value is read and gives nil.
        package mutating func double() throws(ParseError) -> Double? {
            try value().doubleValue
        }
    }
}

import FlatSync
import Foundation

extension CloudKitWire {
    /// One field's value as CKWS writes it: `{"value": …, "type": "…"}`.
    ///
    /// FlatSync always sends `type` (the server guesses from the JSON shape otherwise, and a timestamp
    /// sent as a bare number is refused). TIMESTAMP is an integer count of milliseconds since 1970, BYTES a
    /// base64 string, lists `<TYPE>_LIST` arrays. Reading, a missing `type` is inferred from the JSON
    /// (a string is always STRING, never BYTES); a type FlatSync cannot hold (REFERENCE, ASSET,
    /// LOCATION, …) is skipped.
    enum Field {
        /// CKWS's type name for a value.
        static func typeName(of value: FieldValue) throws(FieldProblem) -> String {
            switch value {
            case .string: return "STRING"
            case .int: return "INT64"
            case .double: return "DOUBLE"
            case .date: return "TIMESTAMP"
            case .bytes: return "BYTES"
            case .list(let elements):
                // CKWS lists hold one type; an empty one is sent as a STRING_LIST (its type is not kept).
                guard let first = elements.first else { return "STRING_LIST" }
                let element = try typeName(of: first)
                guard !element.hasSuffix("_LIST") else {
                    throw FieldProblem("a list field holds a list; CloudKit lists do not nest")
                }
                for other in elements.dropFirst() {
                    let otherType = try typeName(of: other)
                    if otherType != element { throw FieldProblem("a list field mixes \(element) with \(otherType)") }
                }
                return element + "_LIST"
            }
        }

        // MARK: Writing

        /// Writes `{"type": …, "value": …}`.
        static func write(_ value: FieldValue, to writer: inout JSONValue.Writer) throws(FieldProblem) {
            let type = try typeName(of: value)
            var problem: FieldProblem?
            writer.object { field in
                field.member("type") { $0.string(type) }
                field.member("value") {
                    do throws(FieldProblem) {
                        try writeValue(value, to: &$0)
                    } catch {
                        problem = error
                        $0.bool(false)
                    }
                }
            }
            if let problem { throw problem }
        }

        private static func writeValue(_ value: FieldValue, to writer: inout JSONValue.Writer) throws(FieldProblem) {
            switch value {
            case .string(let string): writer.string(string)
            case .int(let int): writer.int(int)
            case .double(let double):
                guard double.isFinite else { throw FieldProblem("a DOUBLE is \(double); JSON has no such number") }
                writer.double(double)
            case .date(let date): writer.int(try milliseconds(date))
            case .bytes(let data): writer.string(data.base64EncodedString())
            case .list(let elements):
                var problem: FieldProblem?
                writer.array(elements) { writer, element in
                    do throws(FieldProblem) {
                        try writeValue(element, to: &writer)
                    } catch {
                        problem = error
                        writer.bool(false)
                    }
                }
                if let problem { throw problem }
            }
        }

        /// A date as CKWS's TIMESTAMP: whole milliseconds since 1970, rounded to the nearest.
        static func milliseconds(_ date: Date) throws(FieldProblem) -> Int64 {
            let milliseconds = (date.timeIntervalSince1970 * 1_000).rounded()
            // ±2^63 ms is ±292 million years; a date outside that has no TIMESTAMP.
            guard milliseconds.isFinite, abs(milliseconds) < 9.2e18 else {
                throw FieldProblem("the date \(date) is outside the range of a TIMESTAMP")
            }
            return Int64(milliseconds)
        }

        /// The date a TIMESTAMP names, as `Date.roundedToMilliseconds` produces it, so that a date
        /// stamped by FlatSync comes back equal.
        static func date(milliseconds: Double) -> Date {
            Date(timeIntervalSince1970: milliseconds / 1_000)
        }

        // MARK: Reading

        /// Reads a field entry and decodes its value: nil for a field FlatSync cannot hold (or with a null
        /// value, or one that is no object), a ``FieldProblem`` for a value its type does not allow. Its
        /// `value` is taken whole, as its `type` may come after it. Throws what the reader throws.
        static func read(from reader: inout JSONValue.Reader) throws -> Result<FieldValue?, FieldProblem> {
            var value: JSONValue?
            var type: String?
            try reader.readObject { key, reader in
                switch key {
                case "value": value = try reader.value()
                case "type": type = try reader.string()
                default: try reader.skip()
                }
            }
            return Result { () throws(FieldProblem) -> FieldValue? in
                guard let value, value != .null else { return nil }
                guard let type else { return infer(value) }
                return try decode(value, type: type)
            }
        }

        private static func decode(_ value: JSONValue, type: String) throws(FieldProblem) -> FieldValue? {
            if type.hasSuffix("_LIST") {
                let elementType = String(type.dropLast("_LIST".count))
                guard isSupported(elementType) else { return nil }
                guard let elements = value.arrayValue else { throw FieldProblem("a \(type) holds no list") }
                var result: [FieldValue] = []
                result.reserveCapacity(elements.count)
                for element in elements {
                    guard let decoded = try decode(element, type: elementType) else { return nil }
                    result.append(decoded)
                }
                return .list(result)
            }
            switch type {
            case "STRING":
                guard let string = value.stringValue else { throw FieldProblem("a STRING holds no string") }
                return .string(string)
            case "INT64":
                // A number, or (with `numbersAsStrings`) a string.
                if let int = value.int64Value { return .int(int) }
                if let text = value.stringValue, let int = Int64(text) { return .int(int) }
                throw FieldProblem("an INT64 holds no 64-bit integer")
            case "DOUBLE":
                if let double = value.doubleValue { return .double(double) }
                if let text = value.stringValue, let double = Double(text) { return .double(double) }
                throw FieldProblem("a DOUBLE holds no number")
            case "TIMESTAMP":
                if let whole = value.int64Value { return .date(date(milliseconds: Double(whole))) }
                if let double = value.doubleValue, double.isFinite { return .date(date(milliseconds: double)) }
                throw FieldProblem("a TIMESTAMP holds no number of milliseconds")
            case "BYTES":
                guard let text = value.stringValue, let data = Data(base64Encoded: text) else {
                    throw FieldProblem("a BYTES field holds text that is not base64")
                }
                return .bytes(data)
            default:
                return nil
            }
        }

        private static func isSupported(_ type: String) -> Bool {
            ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES"].contains(type)
        }

        /// A value sent without `type`: inferred from its JSON shape, never as BYTES or TIMESTAMP.
        private static func infer(_ value: JSONValue) -> FieldValue? {
            switch value {
            case .string(let string): return .string(string)
            case .number:
                if let int = value.int64Value, case .number(let text) = value, !text.contains(".") { return .int(int) }
                return value.doubleValue.map(FieldValue.double)
            case .array(let elements):
                var result: [FieldValue] = []
                for element in elements {
                    guard let inferred = infer(element), inferred.listValue == nil else { return nil }
                    result.append(inferred)
                }
                return .list(result)
            default:
                return nil
            }
        }
    }
}

import Foundation

extension CloudKitWire {
    /// One field: `{"value": …, "type": "…"}`.
    ///
    /// FlatSync always sends `type` (the server guesses from the JSON shape otherwise, and a timestamp
    /// sent as a bare number is refused). TIMESTAMP is an integer count of milliseconds since 1970, BYTES a
    /// base64 string, lists `<TYPE>_LIST` arrays. Reading, a missing `type` is inferred from the JSON
    /// (a string is always STRING, never BYTES); a type FlatSync cannot hold (REFERENCE, ASSET,
    /// LOCATION, …) leaves ``value`` nil and the field is skipped.
    struct Field: Codable, Hashable {
        var value: FieldValue?

        init(_ value: FieldValue) {
            self.value = value
        }

        private enum CodingKeys: String, CodingKey {
            case value, type
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            let type = try container.decodeIfPresent(String.self, forKey: .type)
            guard container.contains(.value), try !container.decodeNil(forKey: .value) else {
                value = nil
                return
            }
            let valueDecoder = try container.superDecoder(forKey: .value)
            value = try Self.decodeValue(type: type, from: valueDecoder)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            guard let value else { return }
            try container.encode(try Self.typeName(of: value), forKey: .type)
            try Self.encodeValue(value, to: container.superEncoder(forKey: .value))
        }

        // MARK: Types

        /// CKWS's type name for a value.
        static func typeName(of value: FieldValue) throws -> String {
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
                for other in elements.dropFirst() where try typeName(of: other) != element {
                    throw FieldProblem("a list field mixes \(element) with \(try typeName(of: other))")
                }
                return element + "_LIST"
            }
        }

        // MARK: Encoding

        private static func encodeValue(_ value: FieldValue, to encoder: any Encoder) throws {
            switch value {
            case .list(let elements):
                var container = encoder.unkeyedContainer()
                for element in elements { try encodeValue(element, to: container.superEncoder()) }
            default:
                var container = encoder.singleValueContainer()
                switch value {
                case .string(let string): try container.encode(string)
                case .int(let int): try container.encode(int)
                case .double(let double):
                    guard double.isFinite else { throw FieldProblem("a DOUBLE is \(double); JSON has no such number") }
                    try container.encode(double)
                case .date(let date): try container.encode(try milliseconds(date))
                case .bytes(let data): try container.encode(data.base64EncodedString())
                case .list: break
                }
            }
        }

        /// A date as CKWS's TIMESTAMP: whole milliseconds since 1970, rounded to the nearest.
        static func milliseconds(_ date: Date) throws -> Int64 {
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

        // MARK: Decoding

        private static func decodeValue(type: String?, from decoder: any Decoder) throws -> FieldValue? {
            guard let type else { return try inferValue(from: decoder) }
            if type.hasSuffix("_LIST") {
                let elementType = String(type.dropLast("_LIST".count))
                guard isSupported(elementType) else { return nil }
                var container = try decoder.unkeyedContainer()
                var elements: [FieldValue] = []
                while !container.isAtEnd {
                    guard let element = try decodeValue(type: elementType, from: try container.superDecoder()) else {
                        return nil
                    }
                    elements.append(element)
                }
                return .list(elements)
            }
            guard isSupported(type) else { return nil }
            let container = try decoder.singleValueContainer()
            switch type {
            case "STRING":
                return .string(try container.decode(String.self))
            case "INT64":
                // With `numbersAsStrings`, integers arrive as strings.
                if let text = try? container.decode(String.self) {
                    guard let value = Int64(text) else {
                        throw FieldProblem("an INT64 field holds \"\(text)\", which is no 64-bit integer")
                    }
                    return .int(value)
                }
                return .int(try container.decode(Int64.self))
            case "DOUBLE":
                if let text = try? container.decode(String.self), let value = Double(text) { return .double(value) }
                return .double(try container.decode(Double.self))
            case "TIMESTAMP":
                if let whole = try? container.decode(Int64.self) { return .date(date(milliseconds: Double(whole))) }
                return .date(date(milliseconds: try container.decode(Double.self)))
            case "BYTES":
                let text = try container.decode(String.self)
                guard let data = Data(base64Encoded: text) else {
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
        private static func inferValue(from decoder: any Decoder) throws -> FieldValue? {
            if var list = try? decoder.unkeyedContainer() {
                var elements: [FieldValue] = []
                while !list.isAtEnd {
                    guard let element = try inferValue(from: try list.superDecoder()), element.listValue == nil else {
                        return nil
                    }
                    elements.append(element)
                }
                return .list(elements)
            }
            guard let container = try? decoder.singleValueContainer() else { return nil }
            if let string = try? container.decode(String.self) { return .string(string) }
            if let int = try? container.decode(Int64.self) { return .int(int) }
            if let double = try? container.decode(Double.self) { return .double(double) }
            return nil
        }
    }

    /// Why a field cannot be sent, or a field received cannot be read.
    struct FieldProblem: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}

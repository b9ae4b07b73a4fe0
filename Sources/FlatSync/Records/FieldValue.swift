import Foundation

/// A typed value stored in one field of a ``Record``.
public enum FieldValue: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A string.
    case string(String)
    /// A 64-bit integer; FlatSync stores counts, flags and enumerations this way.
    case int(Int64)
    /// A point in time, stored with the precision of `Date`.
    case date(Date)

    /// The string, if this is a string field.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer, if this is an integer field.
    public var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    /// The date, if this is a timestamp field.
    public var dateValue: Date? {
        if case .date(let value) = self { return value }
        return nil
    }

    public var description: String {
        switch self {
        case .string(let value): return "\"\(value)\""
        case .int(let value): return String(value)
        case .date(let value): return value.formatted(.iso8601)
        }
    }

    /// A rough count of the bytes this value takes on the wire, used to enforce the 1 MB record limit.
    package var approximateSize: Int {
        switch self {
        case .string(let value): return value.utf8.count
        case .int: return 8
        case .date: return 8
        }
    }
}

import Foundation

/// A typed value stored in one field of a ``Record``.
///
/// The cases are CloudKit's field types that FlatSync can carry: FlatSync's own stores use strings,
/// integers and dates; doubles, bytes and lists exist so that records written by other clients (or a
/// later version of the app) come back from the server whole.
public enum FieldValue: Hashable, Sendable, Codable, CustomStringConvertible {
    /// A string.
    case string(String)
    /// A 64-bit integer; FlatSync stores counts, flags and enumerations this way.
    case int(Int64)
    /// A point in time. CloudKit keeps timestamps to the millisecond, so FlatSync's stores stamp their
    /// dates at that precision (see `Date.roundedToMilliseconds`).
    case date(Date)
    /// A double-precision number.
    case double(Double)
    /// Raw bytes.
    case bytes(Data)
    /// A list of values of one type (CloudKit's `STRING_LIST`, `INT64_LIST`, …). Lists do not nest.
    case list([FieldValue])

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

    /// The number, if this is a double field.
    public var doubleValue: Double? {
        if case .double(let value) = self { return value }
        return nil
    }

    /// The bytes, if this is a bytes field.
    public var bytesValue: Data? {
        if case .bytes(let value) = self { return value }
        return nil
    }

    /// The elements, if this is a list field.
    public var listValue: [FieldValue]? {
        if case .list(let value) = self { return value }
        return nil
    }

    public var description: String {
        switch self {
        case .string(let value): return "\"\(value)\""
        case .int(let value): return String(value)
        case .date(let value): return value.formatted(.iso8601)
        case .double(let value): return String(value)
        case .bytes(let value): return "<\(value.count) bytes>"
        case .list(let values): return "[" + values.map(\.description).joined(separator: ", ") + "]"
        }
    }

    /// A rough count of the bytes this value takes on the wire, used to enforce the 1 MB record limit.
    package var approximateSize: Int {
        switch self {
        case .string(let value): return value.utf8.count
        case .int, .date, .double: return 8
        case .bytes(let value): return value.count
        case .list(let values): return values.reduce(0) { $0 + $1.approximateSize }
        }
    }
}

extension Date {
    /// The date at millisecond precision, the precision CloudKit keeps for a timestamp: a date that
    /// makes a round trip through the server comes back equal to this one.
    public var roundedToMilliseconds: Date {
        let milliseconds = (timeIntervalSince1970 * 1_000).rounded()
        guard milliseconds.isFinite else { return self }
        return Date(timeIntervalSince1970: milliseconds / 1_000)
    }
}

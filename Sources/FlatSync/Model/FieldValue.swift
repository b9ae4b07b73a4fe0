#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A typed value stored in one field of a ``Record``.
///
/// The cases are CloudKit's field types: FlatSync's own stores use strings, integers and dates; doubles,
/// bytes, references and lists are for a host's records and for records other clients write; a type
/// FlatSync does not interpret (a location, an asset) is kept as ``opaque(_:)``, so that a record written by
/// another client (or a later version of the app) comes back from the server whole.
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
    /// A reference to another record (CloudKit's `REFERENCE`).
    case reference(RecordReference)
    /// A value of a type FlatSync keeps without interpreting it, as CloudKit sent it (`LOCATION`, `ASSET`,
    /// …).
    case opaque(OpaqueFieldValue)

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

    /// The reference, if this is a reference field.
    public var referenceValue: RecordReference? {
        if case .reference(let value) = self { return value }
        return nil
    }

    /// The kept value, if this is a field of a type FlatSync does not interpret.
    public var opaqueValue: OpaqueFieldValue? {
        if case .opaque(let value) = self { return value }
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
        case .reference(let value): return value.description
        case .opaque(let value): return value.description
        }
    }

    /// A rough count of the bytes this value takes on the wire, used to enforce the 1 MB record limit.
    package var approximateSize: Int {
        switch self {
        case .string(let value): return value.utf8.count
        case .int, .date, .double: return 8
        case .bytes(let value): return value.count
        case .list(let values): return values.reduce(0) { $0 + $1.approximateSize }
        case .reference(let value): return value.recordName.utf8.count + (value.zoneName?.utf8.count ?? 0) + 1
        case .opaque(let value): return value.json.utf8.count
        }
    }
}

// Equal values are equal also when they hold NaN: a value must equal itself (a record read back from the
// log compares equal to the one written, and `Hashable` collections find it), so every NaN is one value
// here. Otherwise as `Double` compares (0.0 == -0.0).
extension FieldValue {
    /// Equal values of one kind; any NaN equals any other NaN (as a double or a date's time interval).
    public static func == (lhs: FieldValue, rhs: FieldValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.date(let a), .date(let b)):
            return a.timeIntervalSinceReferenceDate.isSameStoredValue(as: b.timeIntervalSinceReferenceDate)
        case (.double(let a), .double(let b)): return a.isSameStoredValue(as: b)
        case (.bytes(let a), .bytes(let b)): return a == b
        case (.list(let a), .list(let b)): return a == b
        case (.reference(let a), .reference(let b)): return a == b
        case (.opaque(let a), .opaque(let b)): return a == b
        default: return false
        }
    }

    /// Hashes the kind and the value; every NaN alike, as `==` has them equal.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .string(let value):
            hasher.combine(0)
            hasher.combine(value)
        case .int(let value):
            hasher.combine(1)
            hasher.combine(value)
        case .date(let value):
            hasher.combine(2)
            hasher.combine(storedValue: value.timeIntervalSinceReferenceDate)
        case .double(let value):
            hasher.combine(3)
            hasher.combine(storedValue: value)
        case .bytes(let value):
            hasher.combine(4)
            hasher.combine(value)
        case .list(let values):
            hasher.combine(5)
            hasher.combine(values)
        case .reference(let value):
            hasher.combine(6)
            hasher.combine(value)
        case .opaque(let value):
            hasher.combine(7)
            hasher.combine(value)
        }
    }
}

extension Double {
    /// Equal as a stored value: as `==` says, except that every NaN is the same value (see `FieldValue`).
    package func isSameStoredValue(as other: Double) -> Bool {
        self == other || (isNaN && other.isNaN)
    }
}

extension Hasher {
    /// Hashes `value` so that values equal by `isSameStoredValue(as:)` hash alike.
    fileprivate mutating func combine(storedValue value: Double) {
        combine(value.isNaN ? Double.nan : value)
    }
}

extension FieldValue {
    /// The value with its dates (its own, or its list's) at millisecond precision, as CloudKit keeps them:
    /// what a store keeps of a host's value, so that the record it sends comes back from the server equal.
    package var roundedToMilliseconds: FieldValue {
        switch self {
        case .date(let date): return .date(date.roundedToMilliseconds)
        case .list(let values) where values.contains(where: { $0.dateValue != nil }):
            return .list(values.map(\.roundedToMilliseconds))
        default: return self
        }
    }
}

extension [String: FieldValue] {
    /// Rounds every date among the values (a list's too) to the millisecond: see
    /// ``FieldValue/roundedToMilliseconds``.
    package mutating func roundDatesToMilliseconds() {
        for (key, value) in self {
            switch value {
            case .date, .list: self[key] = value.roundedToMilliseconds
            default: break
            }
        }
    }
}

extension Date {
    /// The date at millisecond precision, the precision CloudKit keeps for a timestamp: a date that
    /// makes a round trip through the server comes back equal to this one.
    package var roundedToMilliseconds: Date {
        let milliseconds = (timeIntervalSince1970 * 1_000).rounded()
        guard milliseconds.isFinite else { return self }
        return Date(timeIntervalSince1970: milliseconds / 1_000)
    }
}

extension FieldValue {
    /// False when the value is, or a list holds, a double that is not finite, or a date that is not or is
    /// beyond ±2^63 milliseconds from 1970 (±292 million years): JSON cannot carry the one, and CloudKit Web
    /// Services' TIMESTAMP (milliseconds as an integer) the other.
    package var fitsCloudKitWebServices: Bool {
        switch self {
        case .double(let value): value.isFinite
        case .date(let date):
            abs(date.timeIntervalSince1970 * 1_000) < 9.2e18  // false for NaN too
        case .list(let values): values.allSatisfy(\.fitsCloudKitWebServices)
        default: true
        }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// A `Codable` value as a record's fields and back, for ``SyncableRecord`` types that are `Codable`: each
// stored property is a field of the same name (but `id`, which is the record's name). Strings, integers,
// `Bool` (as 0 or 1), `Double`/`Float`, `Date`, `Data`, ``RecordReference``, optionals (nil: no field),
// arrays of those and sets of those (as sorted lists) map to CloudKit's types, and a ``CloudAsset`` to the
// field it was read from. A property of any other
// type (a nested struct, an array of them, a dictionary, an enum) is stored as what its own `Codable`
// conformance makes of it in JSON: the one string or integer it encodes as (an enum's raw value, a URL),
// else its JSON as bytes, keys sorted so that equal values are equal bytes and an unchanged value is not
// sent again. CloudKit has no nested fields.

extension SyncableRecord where Self: Codable {
    /// The value's stored properties as fields, through its `Codable` conformance (`id` left out).
    public var fields: [String: FieldValue] {
        get throws(FlatSyncError) {
            let encoder = FieldEncoder(recordName: id)
            do {
                try encode(to: encoder)
            } catch let error as FlatSyncError {
                throw error
            } catch {
                throw FlatSyncError(.invalidArgument, "\(Self.self) \(id) cannot be encoded as fields: \(error)")
            }
            // A nil optional is no field, so a key its type does not declare would pass until the first save
            // where it holds a value: refused now, on the first save.
            if let key = encoder.storage.absentKeys.subtracting(["id"]).sorted().first(where: {
                Self.fieldTypes[$0] == nil
            }) {
                throw FlatSyncError(
                    .invalidArgument,
                    "\(Self.self) has the property \(key), which its fieldTypes do not declare (nil now, it would be "
                        + "refused once it holds a value).")
            }
            var fields = encoder.storage.fields
            fields["id"] = nil
            return fields
        }
    }

    /// Reads a value through its `Codable` conformance, with `id` as the record's name.
    public init(id: String, fields: RecordFields) throws(FlatSyncError) {
        do {
            self = try Self(from: FieldDecoder(fields: fields, id: id))
        } catch let error as FlatSyncError {
            throw error
        } catch {
            throw FlatSyncError(
                .malformedRecord, "The record \(fields.recordName) does not read as a \(Self.self): \(error)")
        }
    }
}

/// Collects the fields a value encodes. A class, so the encoder's containers can fill it.
private final class FieldStorage {
    var fields: [String: FieldValue] = [:]
    /// The keys of optional properties that were nil: no field, but a property of the type all the same.
    var absentKeys: Set<String> = []
}

private struct FieldEncoder: Encoder {
    let recordName: String
    let storage = FieldStorage()
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(FieldKeyedContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        FailingUnkeyedContainer(problem: unsupported("a list at the top level"))
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        FailingSingleValueContainer(problem: unsupported("a single value at the top level"))
    }

    func unsupported(_ what: String) -> FlatSyncError {
        FlatSyncError(
            .invalidArgument,
            "The record \(recordName) cannot hold \(what): a Codable record is one field per property (strings, "
                + "integers, Bool, Double, Date, Data, RecordReference, CloudAsset, or any other Codable type as its JSON)."
        )
    }

    /// True for the types ``fieldValue(_:)`` makes a field value of, but lists.
    static func isFieldValueType(_ type: Any.Type) -> Bool {
        type == String.self || type == Bool.self || type == Int.self || type == Int64.self || type == Int32.self
            || type == Int16.self || type == Int8.self || type == UInt32.self || type == UInt16.self
            || type == UInt8.self || type == Double.self || type == Float.self || type == Date.self
            || type == Data.self || type == RecordReference.self || type == FieldValue.self
    }

    /// A property's value as a field value, or nil when its type has no CloudKit field type.
    static func fieldValue(_ value: some Encodable) -> FieldValue? {
        switch value {
        case let value as String: return .string(value)
        case let value as Bool: return .int(value ? 1 : 0)
        case let value as Int: return .int(Int64(value))
        case let value as Int64: return .int(value)
        case let value as Int32: return .int(Int64(value))
        case let value as Int16: return .int(Int64(value))
        case let value as Int8: return .int(Int64(value))
        case let value as UInt32: return .int(Int64(value))
        case let value as UInt16: return .int(Int64(value))
        case let value as UInt8: return .int(Int64(value))
        case let value as Double: return .double(value)
        case let value as Float: return .double(Double(value))
        case let value as Date: return .date(value)
        case let value as Data: return .bytes(value)
        case let value as RecordReference: return .reference(value)
        case let value as FieldValue: return value
        // The value as the server sent it: kept unchanged, the field is not sent back.
        case let value as CloudAsset: return value.fieldValue
        case let values as any ListOfFieldValues: return values.listValue
        default: return nil
        }
    }
}

/// An array whose elements are field values: a list field.
private protocol ListOfFieldValues {
    var listValue: FieldValue? { get }
}

extension Array: ListOfFieldValues where Element: Encodable {
    fileprivate var listValue: FieldValue? {
        // By the element type, not by the elements: an empty array of enums is its JSON like a full one.
        guard FieldEncoder.isFieldValueType(Element.self) else { return nil }
        var values: [FieldValue] = []
        values.reserveCapacity(count)
        for element in self {
            guard let value = FieldEncoder.fieldValue(element), value.listValue == nil else { return nil }
            values.append(value)
        }
        return .list(values)
    }
}

/// A set of field values is a list, sorted: a set's own order changes from one process to the next, and a
/// field that changes with every encoding would be sent with every save.
extension Set: ListOfFieldValues where Element: Encodable & Comparable {
    fileprivate var listValue: FieldValue? { sorted().listValue }
}

private struct FieldKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: FieldEncoder
    var codingPath: [any CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws {
        encoder.storage.fields[key.stringValue] = nil
        encoder.storage.absentKeys.insert(key.stringValue)
    }

    // Optionals, each type's own requirement (the defaults skip a nil without a word): a nil one's key is
    // noted (see ``FieldStorage/absentKeys``).
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeOptional(value, key) }
    // Requirements since Swift 6 (the package's platforms have them): without these, an `Int128?` took the
    // default, and its nil went unnoted.
    mutating func encodeIfPresent(_ value: Int128?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent(_ value: UInt128?, forKey key: Key) throws { try encodeOptional(value, key) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        try encodeOptional(value, key)
    }

    private mutating func encodeOptional<T: Encodable>(_ value: T?, _ key: Key) throws {
        guard let value else { return try encodeNil(forKey: key) }
        try encode(value, forKey: key)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        if let field = FieldEncoder.fieldValue(value) {
            encoder.storage.fields[key.stringValue] = field
            return
        }
        do {
            encoder.storage.fields[key.stringValue] = try JSONField.encode(value)
        } catch {
            throw encoder.unsupported("the property \(key.stringValue) of type \(T.self) (\(error))")
        }
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FailingKeyedContainer<NestedKey>(problem: encoder.unsupported("a nested value")))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        FailingUnkeyedContainer(problem: encoder.unsupported("a nested list"))
    }

    mutating func superEncoder() -> any Encoder { encoder }
    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder }
}

/// Containers for shapes a record cannot hold: each call throws the problem.
private struct FailingKeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let problem: FlatSyncError
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil(forKey key: Key) throws { throw problem }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { throw problem }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        KeyedEncodingContainer(FailingKeyedContainer<NestedKey>(problem: problem))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        FailingUnkeyedContainer(problem: problem)
    }
    mutating func superEncoder() -> any Encoder { FieldEncoder(recordName: "") }
    mutating func superEncoder(forKey key: Key) -> any Encoder { FieldEncoder(recordName: "") }
}

private struct FailingUnkeyedContainer: UnkeyedEncodingContainer {
    let problem: FlatSyncError
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws { throw problem }
    mutating func encode<T: Encodable>(_ value: T) throws { throw problem }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        KeyedEncodingContainer(FailingKeyedContainer<NestedKey>(problem: problem))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
    mutating func superEncoder() -> any Encoder { FieldEncoder(recordName: "") }
}

private struct FailingSingleValueContainer: SingleValueEncodingContainer {
    let problem: FlatSyncError
    var codingPath: [any CodingKey] { [] }
    mutating func encodeNil() throws { throw problem }
    mutating func encode<T: Encodable>(_ value: T) throws { throw problem }
}

// MARK: - Decoding

private struct FieldDecoder: Decoder {
    let fields: RecordFields
    let id: String
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(FieldKeyedDecodingContainer<Key>(decoder: self))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw FlatSyncError(.malformedRecord, "A Codable record is read as properties, not as a list.")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw FlatSyncError(.malformedRecord, "A Codable record is read as properties, not as one value.")
    }

    /// The field of a property (`id`: the record's name).
    func field(_ key: String) -> FieldValue? {
        key == "id" ? .string(id) : fields[key]
    }

    func wrongType(_ key: String, _ type: Any.Type) -> FlatSyncError {
        FlatSyncError(
            .malformedRecord, "The record \(fields.recordName) has no field \(key) that reads as \(type).")
    }

    /// A field value as `T`, or nil when it does not read as one.
    static func value<T: Decodable>(_ field: FieldValue, as type: T.Type) -> T? {
        switch type {
        case is String.Type: return field.stringValue as? T
        case is Bool.Type: return field.intValue.map { $0 != 0 } as? T
        case is Int.Type: return field.intValue.flatMap { Int(exactly: $0) } as? T
        case is Int64.Type: return field.intValue as? T
        case is Int32.Type: return field.intValue.flatMap { Int32(exactly: $0) } as? T
        case is Int16.Type: return field.intValue.flatMap { Int16(exactly: $0) } as? T
        case is Int8.Type: return field.intValue.flatMap { Int8(exactly: $0) } as? T
        case is UInt32.Type: return field.intValue.flatMap { UInt32(exactly: $0) } as? T
        case is UInt16.Type: return field.intValue.flatMap { UInt16(exactly: $0) } as? T
        case is UInt8.Type: return field.intValue.flatMap { UInt8(exactly: $0) } as? T
        case is Double.Type: return field.doubleValue as? T
        case is Float.Type: return field.doubleValue.map { Float($0) } as? T
        case is Date.Type: return field.dateValue as? T
        case is Data.Type: return field.bytesValue as? T
        case is RecordReference.Type: return field.referenceValue as? T
        case is FieldValue.Type: return field as? T
        case is CloudAsset.Type: return field.assetValue as? T
        case let list as any DecodableList.Type: return list.decode(field) as? T
        default: return nil
        }
    }
}

/// An array type whose elements decode from field values: a list field.
private protocol DecodableList {
    static func decode(_ field: FieldValue) -> Self?
}

extension Array: DecodableList where Element: Decodable {
    fileprivate static func decode(_ field: FieldValue) -> [Element]? {
        // CloudKit drops an empty list: a missing list field is an empty list (see `decodeIfPresent` too).
        guard let values = field.listValue else { return nil }
        var elements: [Element] = []
        elements.reserveCapacity(values.count)
        for value in values {
            guard let element = FieldDecoder.value(value, as: Element.self) else { return nil }
            elements.append(element)
        }
        return elements
    }
}

extension Set: DecodableList where Element: Decodable {
    fileprivate static func decode(_ field: FieldValue) -> Set<Element>? {
        guard let elements = [Element].decode(field) else { return nil }
        return Set(elements)
    }
}

private struct FieldKeyedDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: FieldDecoder
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] {
        decoder.fields.all.keys.compactMap { Key(stringValue: $0) } + [Key(stringValue: "id")].compactMap { $0 }
    }

    func contains(_ key: Key) -> Bool { decoder.field(key.stringValue) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { decoder.field(key.stringValue) == nil }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        guard let field = decoder.field(key.stringValue) else {
            // A list CloudKit dropped because it was empty.
            if let list = type as? any DecodableList.Type, let empty = list.decode(.list([])) as? T { return empty }
            throw decoder.wrongType(key.stringValue, T.self)
        }
        if let value = FieldDecoder.value(field, as: T.self) { return value }
        // A property stored as its JSON (see `JSONField`).
        guard let value = JSONField.decode(T.self, from: field) else {
            throw decoder.wrongType(key.stringValue, T.self)
        }
        return value
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        throw decoder.wrongType(key.stringValue, type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw decoder.wrongType(key.stringValue, [Any].self)
    }

    func superDecoder() throws -> any Decoder { decoder }
    func superDecoder(forKey key: Key) throws -> any Decoder { decoder }
}

// MARK: - Values of other types

/// A property of a type no CloudKit field holds, stored as what its `Codable` conformance makes of it in
/// JSON: the one string or integer it encodes as (an enum's raw value, a URL), else its JSON as bytes.
private enum JSONField {
    static func encode(_ value: some Encodable) throws -> FieldValue {
        let encoder = JSONEncoder()
        // Sorted, so that equal values are equal bytes: a field that changes with every encoding would be
        // sent with every save.
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(value)
        switch data.first ?? 0 {
        case UInt8(ascii: "\""):
            return .string(try JSONDecoder().decode(String.self, from: data))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            if let integer = try? JSONDecoder().decode(Int64.self, from: data) { return .int(integer) }
            return .bytes(data)
        default:
            return .bytes(data)
        }
    }

    /// The value `field` holds as `T`'s JSON, or nil when it holds none.
    static func decode<T: Decodable>(_ type: T.Type, from field: FieldValue) -> T? {
        let json: Data
        switch field {
        case .bytes(let data): json = data
        case .string(let string):
            guard let data = try? JSONEncoder().encode(string) else { return nil }
            json = data
        case .int(let integer): json = Data(String(integer).utf8)
        default: return nil
        }
        return try? JSONDecoder().decode(T.self, from: json)
    }
}

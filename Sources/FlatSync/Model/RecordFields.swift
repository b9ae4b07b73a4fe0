#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A record's fields, read with typed accessors that throw
/// ``FlatSyncError/Code-swift.struct/malformedRecord`` naming the record and the field when one is missing
/// or has another type: what ``SyncableRecord/init(id:fields:)`` reads.
public struct RecordFields: Sendable {
    /// The record's name, for error messages.
    public let recordName: String
    /// The fields as a dictionary, or nil when they are encoded: the values of `keys` (sorted) in the
    /// command log's field codec, one after another, at `range` of `encoded`'s bytes, each decoded when it
    /// is read. Stored side by side rather than as an enum's cases, so that reading a field copies no
    /// payload; the encoded form is one reference, so that making fields for each of many records retains
    /// one object (see ``EncodedRecordFields``).
    private let dictionary: [String: FieldValue]?
    private let encoded: EncodedRecordFields
    private let shape: Int
    private let range: Range<Int>

    /// Fields of the record named `recordName`.
    public init(_ all: [String: FieldValue], recordName: String) {
        self.recordName = recordName
        dictionary = all
        encoded = .empty
        shape = 0
        range = 0..<0
    }

    /// The values of `encoded`'s `shape`th set of keys at `range` of its bytes (in the command log's field
    /// codec, in the order of the keys), already checked: how ``HostRecordTable`` keeps them.
    @usableFromInline package init(encoded: EncodedRecordFields, shape: Int, range: Range<Int>, recordName: String) {
        self.recordName = recordName
        dictionary = nil
        self.encoded = encoded
        self.shape = shape
        self.range = range
    }

    private var keys: [String] { encoded.shapes[shape] }

    /// Every field, by key.
    public var all: [String: FieldValue] {
        if let dictionary { return dictionary }
        var fields = [String: FieldValue](minimumCapacity: keys.count)
        for (position, key) in keys.enumerated() {
            fields[key] = encodedValue(at: position) { (reader) throws(FlatSyncError) in
                try reader.readFieldValue(tags: .commandLog)
            }
        }
        return fields
    }

    /// The field's value, or nil when the record lacks it.
    public subscript(key: String) -> FieldValue? {
        if let dictionary { return dictionary[key] }
        return encodedValue(key) { (reader) throws(FlatSyncError) in try reader.readFieldValue(tags: .commandLog) }
    }

    /// `read`'s value of the encoded field `key`, or nil when there is none or `read` throws.
    private func encodedValue<T>(_ key: String, _ read: (inout BinaryReader) throws(FlatSyncError) -> T?) -> T? {
        // A record has a handful of fields: a scan of short keys beats hashing one.
        guard let position = encoded.shapes[shape].firstIndex(of: key) else { return nil }
        return encodedValue(at: position, read)
    }

    /// `read`'s value of the `position`th encoded field, stepping over the values before it.
    private func encodedValue<T>(at position: Int, _ read: (inout BinaryReader) throws(FlatSyncError) -> T?) -> T? {
        // Read through `self`, which holds it: a copy of the reference would be retained and released.
        encoded.bytes.withUnsafeBytes { buffer in
            var reader = BinaryReader(UnsafeRawBufferPointer(rebasing: buffer[range]))
            do throws(FlatSyncError) {
                var references: [RecordReference] = []
                for _ in 0..<position { try reader.checkFieldValue(tags: .commandLog, references: &references) }
                return try read(&reader)
            } catch {
                return nil
            }
        }
    }

    /// A required string field.
    public func string(_ key: String) throws(FlatSyncError) -> String {
        if dictionary == nil {
            // Read in place: no ``FieldValue`` on the way.
            let tag = FieldValueTags.commandLog.string
            guard
                let value = encodedValue(
                    key,
                    { (reader) throws(FlatSyncError) in
                        try reader.readByte() == tag ? try reader.readCheckedString() : nil
                    })
            else { throw missing(key, "string") }
            return value
        }
        guard let value = self[key]?.stringValue else { throw missing(key, "string") }
        return value
    }

    /// A required integer field.
    public func int(_ key: String) throws(FlatSyncError) -> Int64 {
        if dictionary == nil {
            let tag = FieldValueTags.commandLog.int
            guard
                let value = encodedValue(
                    key,
                    { (reader) throws(FlatSyncError) in
                        try reader.readByte() == tag ? try reader.readSigned() : nil
                    })
            else { throw missing(key, "integer") }
            return value
        }
        guard let value = self[key]?.intValue else { throw missing(key, "integer") }
        return value
    }

    /// A required Boolean, kept as an integer (CloudKit has no Boolean type): anything but 0 is true.
    public func bool(_ key: String) throws(FlatSyncError) -> Bool {
        try int(key) != 0
    }

    /// A required double field.
    public func double(_ key: String) throws(FlatSyncError) -> Double {
        guard let value = self[key]?.doubleValue else { throw missing(key, "double") }
        return value
    }

    /// A required date field.
    public func date(_ key: String) throws(FlatSyncError) -> Date {
        guard let value = self[key]?.dateValue else { throw missing(key, "timestamp") }
        return value
    }

    /// A required bytes field.
    public func bytes(_ key: String) throws(FlatSyncError) -> Data {
        guard let value = self[key]?.bytesValue else { throw missing(key, "bytes") }
        return value
    }

    /// A required reference field.
    public func reference(_ key: String) throws(FlatSyncError) -> RecordReference {
        guard let value = self[key]?.referenceValue else { throw missing(key, "reference") }
        return value
    }

    /// A required asset field (see ``CloudAsset``).
    public func asset(_ key: String) throws(FlatSyncError) -> CloudAsset {
        guard let value = self[key]?.assetValue else { throw missing(key, "asset") }
        return value
    }

    /// A required list field (a missing list is an empty one: CloudKit drops empty lists).
    public func list(_ key: String) throws(FlatSyncError) -> [FieldValue] {
        guard let field = self[key] else { return [] }
        guard let value = field.listValue else { throw missing(key, "list") }
        return value
    }

    /// An optional field: nil when the record lacks it, else `read`'s value.
    public func optional<T>(
        _ key: String, _ read: (RecordFields) -> (String) throws(FlatSyncError) -> T
    ) throws(FlatSyncError) -> T? {
        guard self[key] != nil else { return nil }
        return try read(self)(key)
    }

    private func missing(_ key: String, _ type: String) -> FlatSyncError {
        FlatSyncError(.malformedRecord, "The record \(recordName) has no \(type) field \(key).")
    }
}

/// The encoded fields of many records: the sets of keys they use and the bytes of their values, which
/// each record's ``RecordFields`` reads at its own range.
///
/// A class, so that a record's fields hold one reference rather than the two arrays; each piece of
/// ``HostRecordTable/values(of:)`` makes its own, so that two cores never retain the same object.
@usableFromInline package final class EncodedRecordFields: Sendable {
    /// The sets of keys, each sorted.
    let shapes: [[String]]
    /// The values, in the command log's field codec.
    let bytes: [UInt8]

    @usableFromInline package init(shapes: [[String]], bytes: [UInt8]) {
        self.shapes = shapes
        self.bytes = bytes
    }

    /// No keys and no bytes: what fields given as a dictionary refer to.
    static let empty = EncodedRecordFields(shapes: [[]], bytes: [])
}

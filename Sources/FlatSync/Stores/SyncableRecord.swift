#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A value of the host app's own that FlatSync syncs as one CloudKit record: a note, a recipe, a favourite
/// search.
///
/// A type declares where its records live (``zone``), what they are called (``recordType``), the CloudKit
/// type of each field (``fieldTypes``, which also goes into the schema you deploy) and how a value maps to
/// fields and back. Register it when you open the store (``LocalStore/Options/recordTypes``), then read and
/// write its values through ``RecordStore``, with the guarantees of the built-in stores: a write returns
/// once it is durable, changes to one record coalesce field by field, and a ``SyncContext`` sends them,
/// fetches other devices' changes and merges conflicts.
///
/// ```swift
/// struct Note: SyncableRecord {
///     static let zone = ZoneID.readingList        // a reference must stay in its zone
///     static let recordType = "Note"
///     static let fieldTypes: [String: CloudSchema.FieldType] = [
///         "article": .reference, "text": .string, "created": .timestamp,
///     ]
///
///     var id: String
///     var articleID: String
///     var text: String
///     var created: Date
///
///     var fields: [String: FieldValue] {
///         [
///             // Deleting the saved article deletes its notes, here and on every device.
///             "article": .reference(ReadingListEntry.reference(to: articleID, action: .deleteSelf)),
///             "text": .string(text), "created": .date(created),
///         ]
///     }
///
///     init(id: String, fields: RecordFields) throws(FlatSyncError) {
///         self.id = id
///         articleID = try ReadingListEntry.articleID(from: fields.reference("article"))
///         text = try fields.string("text")
///         created = try fields.date("created")
///     }
/// }
/// ```
///
/// **Fields** are those ``FieldValue`` holds: strings, integers (a `Bool` as 0 or 1), doubles, dates,
/// bytes, lists of them, and references to another record *of the same zone* (CloudKit allows no other),
/// with the action ``RecordReference/Action/none`` or ``RecordReference/Action/deleteSelf``. A field the
/// value leaves out of ``fields`` is removed from the record; a field of the record that ``fieldTypes`` does
/// not declare (another client wrote it) is kept and never sent back.
///
/// **Codable values.** A type that is also `Codable` needs no mapping: each stored property but `id` is a
/// field of its name (see <doc:SyncingYourOwnRecords>).
///
/// **Merging.** When this device's change meets a newer version on the server, ``merge(_:_:changedFields:)``
/// decides. The default is three-way and field by field: the fields this device changed since the version
/// it last knew keep this device's values, every other field takes the server's.
public protocol SyncableRecord: Sendable, Equatable {
    /// The zone the records live in. A record may refer only to records of its own zone.
    static var zone: ZoneID { get }
    /// The CloudKit record type, such as `Note`. No two registered types may share one in a zone.
    static var recordType: String { get }
    /// The CloudKit type of each field the value writes, by key: the record type's schema.
    static var fieldTypes: [String: CloudSchema.FieldType] { get }
    /// How long a ``SyncContext`` waits after a change before it sends the zone's changes; each new change
    /// of the type starts the wait again, so a burst of edits (typing, a slider) goes out as one request.
    /// Zero, the default, sends at once. A ``SyncContext/syncNow()`` sends without waiting, and a change
    /// that another store in the zone sends at once takes these along.
    static var sendDebounce: Duration { get }

    /// The record's name, unique in its zone and stable for the life of the value.
    var id: String { get }
    /// The value's fields, by key, each of the type ``fieldTypes`` declares. A `Codable` type gets this
    /// from its conformance (each stored property but `id` is a field of its name); it throws
    /// ``FlatSyncError/Code-swift.struct/invalidArgument`` for a property no CloudKit type can hold.
    var fields: [String: FieldValue] { get throws(FlatSyncError) }
    /// Reads a value back from its record's name and fields; throws
    /// ``FlatSyncError/Code-swift.struct/malformedRecord`` when a field is missing or of the wrong type
    /// (``RecordFields`` throws that for you).
    init(id: String, fields: RecordFields) throws(FlatSyncError)

    /// The value to keep when `mine`, this device's version with its unsent changes to `changedFields`,
    /// meets `server`, a newer version another device saved. The default takes `mine`'s value of each changed
    /// field and `server`'s of every other.
    static func merge(_ mine: Self, _ server: Self, changedFields: Set<String>) -> Self
}

extension SyncableRecord {
    /// Zero: changes are sent at once.
    public static var sendDebounce: Duration { .zero }

    public static func merge(_ mine: Self, _ server: Self, changedFields: Set<String>) -> Self {
        guard var fields = try? server.fields, let own = try? mine.fields else { return mine }
        for key in changedFields { fields[key] = own[key] }
        return (try? Self(id: mine.id, fields: RecordFields(fields, recordName: mine.id))) ?? mine
    }

    /// The ID of the record of the value named `id`.
    public static func recordID(_ id: String) -> RecordID {
        RecordID(zone: zone, name: id)
    }

    /// A reference to the record of the value named `id`, for a field of another record of the zone.
    public static func reference(to id: String, action: RecordReference.Action = .none) -> RecordReference {
        RecordReference(recordName: id, action: action)
    }
}

extension ReadingListEntry {
    /// A reference to the reading-list entry of an article, for a field of a host record in the
    /// ``ZoneID/readingList`` zone; with ``RecordReference/Action/deleteSelf``, unsaving the article
    /// deletes the record that holds it.
    public static func reference(to articleID: String, action: RecordReference.Action = .none) -> RecordReference {
        RecordReference(recordName: recordID(for: articleID).name, action: action)
    }

    /// The article an entry reference points at (see ``reference(to:action:)``); throws
    /// ``FlatSyncError/Code-swift.struct/malformedRecord`` for a reference to anything else.
    public static func articleID(from reference: RecordReference) throws(FlatSyncError) -> String {
        guard reference.zoneName == nil || reference.zoneName == zone.name,
            let articleID = articleID(fromRecordName: reference.recordName)
        else {
            throw FlatSyncError(.malformedRecord, "The reference \(reference) is not to a reading-list entry.")
        }
        return articleID
    }
}

/// A record's fields, read with typed accessors that throw
/// ``FlatSyncError/Code-swift.struct/malformedRecord`` naming the record and the field when one is missing
/// or has another type: what ``SyncableRecord/init(id:fields:)`` reads.
public struct RecordFields: Sendable {
    /// The record's name, for error messages.
    public let recordName: String
    /// The fields as a dictionary, or nil when they are encoded: the values of `keys` (sorted) in the
    /// command log's field codec, one after another, at `range` of `bytes`, each decoded when it is read.
    /// Stored side by side rather than as an enum's cases, so that reading a field copies no payload.
    private let dictionary: [String: FieldValue]?
    private let keys: [String]
    private let bytes: [UInt8]
    private let range: Range<Int>

    /// Fields of the record named `recordName`.
    public init(_ all: [String: FieldValue], recordName: String) {
        self.recordName = recordName
        dictionary = all
        keys = []
        bytes = []
        range = 0..<0
    }

    /// The values of `keys` encoded at `range` of `bytes` (in the command log's field codec, in the order of
    /// `keys`), already checked: how ``HostRecordTable`` keeps them.
    package init(keys: [String], encoded bytes: [UInt8], range: Range<Int>, recordName: String) {
        self.recordName = recordName
        dictionary = nil
        self.keys = keys
        self.bytes = bytes
        self.range = range
    }

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
        guard let position = keys.firstIndex(of: key) else { return nil }
        return encodedValue(at: position, read)
    }

    /// `read`'s value of the `position`th encoded field, stepping over the values before it.
    private func encodedValue<T>(at position: Int, _ read: (inout BinaryReader) throws(FlatSyncError) -> T?) -> T? {
        bytes.withUnsafeBytes { buffer in
            var reader = BinaryReader(UnsafeRawBufferPointer(rebasing: buffer[range]))
            do throws(FlatSyncError) {
                for _ in 0..<position { try reader.skipFieldValue(tags: .commandLog) }
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

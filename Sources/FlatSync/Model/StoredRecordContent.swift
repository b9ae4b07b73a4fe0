/// A store's own form of the fields of its records: the value a store keeps, held by a ``Record`` in place of
/// its field dictionary (see `Record.Content`).
///
/// A store that makes a record for every mutation and reads it back from the command log at every open
/// (the reading history makes thousands in a burst) saves building, hashing and taking apart a dictionary
/// each time by keeping its own value in the record, and building the fields only when someone asks for
/// them. Records, the command log and snapshots know nothing of the value's type: they reach its fields
/// through this protocol, and the log writes it in the store's own form (``writeLogSave(_:ofChangeAt:to:)``)
/// or as fields.
package protocol StoredRecordContent: Sendable {
    /// The record's fields by key.
    var recordFields: [String: FieldValue] { get }
    /// How many fields ``recordFields`` holds.
    var recordFieldCount: Int { get }
    /// Calls `body` with each field of ``recordFields``, in no set order, without building the dictionary.
    func forEachRecordField(_ body: (String, FieldValue) -> Void)
    /// The value of one field, without building the others.
    func recordField(_ key: String) -> FieldValue?
    /// True when the records of both hold equal fields (as ``FieldValue`` compares them).
    func hasSameRecordFields(as other: Self) -> Bool

    /// The keys that the bits of a change's key mask stand for, when the store gives its changed keys as a
    /// mask (``RecordChange/save(content:type:id:keyMask:sequence:)``); nil when it gives sets.
    static var recordKeySets: RecordKeySets? { get }

    /// True when the command log writes saves of this type's records in the type's own form
    /// (``writeLogSave(_:ofChangeAt:to:)``), false when it writes them as fields.
    static var hasOwnLogForm: Bool { get }
    /// The operation bytes under which the command log holds saves in this type's own form (never 1, 2 or 5,
    /// the log's own operations); empty when it has none.
    static var logOperations: [UInt8] { get }
    /// Writes a save whose record holds `value` in the type's own form, or returns false, having written
    /// nothing, to have the log write it as fields.
    static func writeLogSave(
        _ value: Self, ofChangeAt change: UnsafePointer<RecordChange>, to writer: inout InternedWriter
    ) -> Bool
    /// Reads a save that ``writeLogSave(_:ofChangeAt:to:)`` wrote under `operation`, one of ``logOperations``.
    static func readLogSave(
        operation: UInt8, _ reader: inout BinaryReader, sequence: UInt64, reusing recent: inout LogStrings
    ) throws(FlatSyncError) -> RecordChange
}

extension StoredRecordContent {
    package var recordFieldCount: Int { recordFields.count }

    package func forEachRecordField(_ body: (String, FieldValue) -> Void) {
        for (key, value) in recordFields { body(key, value) }
    }

    package func recordField(_ key: String) -> FieldValue? { recordFields[key] }

    package static var recordKeySets: RecordKeySets? { nil }

    package static var hasOwnLogForm: Bool { false }

    package static var logOperations: [UInt8] { [] }

    package static func writeLogSave(
        _ value: Self, ofChangeAt change: UnsafePointer<RecordChange>, to writer: inout InternedWriter
    ) -> Bool { false }

    package static func readLogSave(
        operation: UInt8, _ reader: inout BinaryReader, sequence: UInt64, reusing recent: inout LogStrings
    ) throws(FlatSyncError) -> RecordChange {
        throw FlatSyncError(.damagedFile, "A record change has the operation \(operation), which no store reads.")
    }
}

/// A store's value boxed as a record's content: one allocation, which keeps a ``Record`` small however large
/// the value, and a class, so that the layers below the stores reach the value through its methods without
/// knowing its type.
///
/// Abstract: ``StoredRecordContentBox`` is the only subclass.
package class RecordContentBox: @unchecked Sendable {
    // @unchecked: the class has no stored state, and its one subclass is final and holds a `let` of a Sendable
    // value (a non-final class cannot be checked).

    fileprivate init() {}

    /// The boxed value's ``StoredRecordContent/recordFields``.
    package var fields: [String: FieldValue] { preconditionFailure("abstract") }
    /// The boxed value's ``StoredRecordContent/recordFieldCount``.
    package var fieldCount: Int { preconditionFailure("abstract") }
    /// The boxed value's ``StoredRecordContent/forEachRecordField(_:)``.
    package func forEachField(_ body: (String, FieldValue) -> Void) { preconditionFailure("abstract") }
    /// The boxed value's ``StoredRecordContent/recordField(_:)``.
    package func field(_ key: String) -> FieldValue? { preconditionFailure("abstract") }
    /// True when both boxes stand for equal fields.
    package func hasSameFields(as other: RecordContentBox) -> Bool { preconditionFailure("abstract") }
    /// The boxed type's ``StoredRecordContent/recordKeySets``.
    package var keySets: RecordKeySets? { preconditionFailure("abstract") }
    /// The boxed type's ``StoredRecordContent/hasOwnLogForm``.
    package var hasOwnLogForm: Bool { preconditionFailure("abstract") }
    /// The boxed type's ``StoredRecordContent/writeLogSave(_:ofChangeAt:to:)``.
    package func writeLogSave(ofChangeAt change: UnsafePointer<RecordChange>, to writer: inout InternedWriter) -> Bool {
        preconditionFailure("abstract")
    }
    /// True when the boxed value is of the same type as `other`'s.
    package func holdsSameType(as other: RecordContentBox) -> Bool {
        ObjectIdentifier(type(of: self)) == ObjectIdentifier(type(of: other))
    }
}

/// A value of type `Value` boxed as a record's content.
package final class StoredRecordContentBox<Value: StoredRecordContent>: RecordContentBox, @unchecked Sendable {
    // @unchecked: its one stored property is a `let` of a Sendable value (restated from the superclass).
    /// The store's value.
    package let value: Value

    package init(_ value: consuming Value) {
        self.value = value
        super.init()
    }

    package override var fields: [String: FieldValue] { value.recordFields }
    package override var fieldCount: Int { value.recordFieldCount }
    package override func forEachField(_ body: (String, FieldValue) -> Void) { value.forEachRecordField(body) }
    package override func field(_ key: String) -> FieldValue? { value.recordField(key) }

    package override func hasSameFields(as other: RecordContentBox) -> Bool {
        guard let other = other as? StoredRecordContentBox<Value> else { return fields == other.fields }
        return value.hasSameRecordFields(as: other.value)
    }

    package override var keySets: RecordKeySets? { Value.recordKeySets }
    package override var hasOwnLogForm: Bool { Value.hasOwnLogForm }

    package override func writeLogSave(
        ofChangeAt change: UnsafePointer<RecordChange>, to writer: inout InternedWriter
    ) -> Bool {
        Value.writeLogSave(value, ofChangeAt: change, to: &writer)
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The values of one host-defined record type (see ``SyncableRecord``): read them, save them, delete them.
///
/// Get one from a ``SyncContext`` (``SyncContext/records(_:)``), which sends every change, or from a
/// ``LocalStore`` alone, offline. Every write returns once it is durable in the store's command log, like
/// the reading list's; a context sends it right away, or after the type's ``SyncableRecord/sendDebounce``
/// when it sets one. Bad input throws a ``FlatSyncError`` and writes
/// nothing: a type that was not registered (``LocalStore/Options/recordTypes``), a bad record name, a field
/// the type does not declare or of another type, a reference out of the zone or with an action other than
/// `none` and `deleteSelf`, a `deleteSelf` reference to a record that does not exist, or a record over
/// CloudKit's 1 MB (``FlatSyncError/Code-swift.struct/recordTooLarge``: over 1,000,000 bytes of names, keys
/// and values). Only this device's value is measured: a merge with another device's edits that grows past
/// the limit is refused by the server when sent, and the change is parked (see ``RefusedChange``).
///
/// ```swift
/// try await context.readingList.add("a1")         // a note's deleteSelf reference needs its article
/// let notes = context.records(Note.self)           // `Note` as in ``SyncableRecord``'s sample
/// try await notes.save(Note(id: "n1", articleID: "a1", text: "Read with tea", created: .now))
/// try await context.readingList.remove("a1")      // deletes the note too: its reference is deleteSelf
/// ```
public struct RecordStore<Value: SyncableRecord>: Sendable {
    @usableFromInline let store: LocalStore
    /// The sync engine, told about every durable change so it can send it.
    let observer: (any LocalChangeObserver)?

    /// Saves a value: creates its record, or changes the fields that differ from the stored one. Returns
    /// false when the store already held an equal value (nothing is written then).
    @discardableResult
    public func save(_ value: Value) async throws -> Bool {
        try await save([value]) > 0
    }

    /// Saves many values as one durable mutation: all of them or, on an error, none. A value named twice
    /// keeps the later one. Returns how many records changed. To save values of several types together (a
    /// record and the records that belong to it), use a ``RecordBatch``.
    @discardableResult
    public func save(_ values: [Value]) async throws -> Int {
        let records = try values.map { (value) throws(FlatSyncError) in try Self.record(of: value) }
        return try await apply(saves: records, deletes: [])
    }

    /// Deletes the value named `id` and every record whose `deleteSelf` reference ties it to it, here at
    /// once and, once sent, on every device. Returns false when there was no such value.
    @discardableResult
    public func delete(_ id: String) async throws -> Bool {
        try await delete([id]) > 0
    }

    /// Deletes many values (and what their `deleteSelf` references tie to them) as one durable mutation.
    /// Returns how many records it deleted, those the references took along included.
    @discardableResult
    public func delete(_ ids: [String]) async throws -> Int {
        for id in ids { try Self.validate(recordName: id) }
        return try await apply(saves: [], deletes: ids)
    }

    /// The value named `id`, if the store has it (and its record reads as one).
    public func value(_ id: String) async -> Value? {
        let table = await store.hostRecordTable(in: Value.zone)
        guard let entry = table.entry(id), table.recordType(of: entry) == Value.recordType else { return nil }
        return try? Value(id: id, fields: table.fields(of: entry))
    }

    /// Every value, in no set order (sort them as your view needs). A record that does not read as a value
    /// (another client wrote it wrong) is left out; ``record(_:)`` still shows it. A store of thousands of
    /// records makes its values on two threads, and returns once all are made.
    @inlinable
    public func values() async -> [Value] {
        // Inlinable, so that the loop is specialized for the host's type where it is called: made through a
        // generic type's witnesses, each value was copied and destroyed again, retaining its strings.
        await store.hostRecordTable(in: Value.zone).values(of: Value.self)
    }

    /// The number of records of the type, including any that do not read as a value (see ``values()``).
    public func count() async -> Int {
        let table = await store.hostRecordTable(in: Value.zone)
        guard let type = table.typeNumber(Value.recordType) else { return 0 }
        return table.entries.lazy.filter { $0.type == type }.count
    }

    /// The value's record as the server knows it: its fields, any field another client wrote, and the change
    /// tag last seen.
    public func record(_ id: String) async -> Record? {
        let record = await store.zones.record(for: Value.recordID(id))
        return record?.type == Value.recordType ? record : nil
    }

    /// A stream of the record names of the type's values that changed, here or on another device (a
    /// save, a delete, a merge, a wipe when the account changes or the user deletes the zone), from now on,
    /// one element per change the store takes in, sorted: a save or delete of this device (with the
    /// records of this type its cascade deleted), or a fetch (every record of this type it brought). Names
    /// of saved and deleted values come together: read each again with ``value(_:)``, nil meaning deleted.
    /// It ends when the store (or the context that holds it) closes.
    ///
    /// ```swift
    /// for await ids in context.records(Bookmark.self).changes() {
    ///     for id in ids {
    ///         let bookmark = await context.records(Bookmark.self).value(id)  // nil: deleted
    ///         print(id, bookmark?.url ?? "deleted")
    ///     }
    /// }
    /// ```
    public func changes() -> AsyncStream<[String]> {
        store.recordChangeHub.subscribe(zone: Value.zone, recordType: Value.recordType)
    }

    private func apply(saves: [Record], deletes: [String]) async throws -> Int {
        let zone = Value.zone
        let changed = try await store.applyDurably { store in
            try store.applyHostMutation(
                in: zone, saves: saves, deletes: Dictionary(deletes.map { ($0, Value.recordType) }) { $1 },
                types: [Value.recordType])
        }
        if changed > 0 { await observer?.localChangeDidBecomeDurable(in: zone, debounce: Value.sendDebounce) }
        return changed
    }

    /// The record a value saves, checked: its name, its fields against ``SyncableRecord/fieldTypes``, its
    /// references and its size.
    static func record(of value: Value) throws(FlatSyncError) -> Record {
        let name = value.id
        try validate(recordName: name)
        let fields = try fields(of: value)
        for key in fields.keys.sorted() {
            let field = fields[key]!
            guard let type = Value.fieldTypes[key] else {
                throw FlatSyncError(
                    .invalidArgument, "\(Value.self) writes the field \(key), which its fieldTypes do not declare.")
            }
            guard type.accepts(field) else {
                throw FlatSyncError(
                    .invalidArgument, "\(Value.self)'s field \(key) holds \(field), not the declared \(type).")
            }
            guard field.fitsCloudKitWebServices else {
                throw FlatSyncError(
                    .invalidArgument,
                    "\(Value.self)'s field \(key) holds \(field): CloudKit Web Services carries numbers as JSON, which "
                        + "has no NaN or infinity, and dates as milliseconds in 64 bits, so the record could never be "
                        + "sent.")
            }
        }
        let record = Record(id: Value.recordID(name), type: Value.recordType, fields: fields)
        for reference in record.references {
            guard !reference.leaves(Value.zone) else {
                throw FlatSyncError(
                    .invalidArgument,
                    "\(Value.self) \(name) refers to \(reference), out of its zone \(Value.zone): CloudKit allows "
                        + "references within one zone only.")
            }
            guard reference.action != .validate else {
                throw FlatSyncError(
                    .invalidArgument, "\(Value.self) \(name): a reference's action must be none or deleteSelf.")
            }
        }
        let size = record.approximateSize
        guard size <= maximumRecordSize else {
            throw FlatSyncError(
                .recordTooLarge,
                "\(Value.self) \(name) is about \(size) bytes; CloudKit takes records of at most \(maximumRecordSize).")
        }
        return record
    }

    /// A value's fields, its dates at millisecond precision: CloudKit keeps a timestamp to the millisecond,
    /// and a date kept finer would differ from the server's (and be sent again as a change).
    static func fields(of value: Value) throws(FlatSyncError) -> [String: FieldValue] {
        var fields = try value.fields
        fields.roundDatesToMilliseconds()
        return fields
    }

    /// The fields a value's record holds over `existing`, the stored version: the value's fields, and any
    /// field of `existing` the type does not declare (another client wrote it).
    static func fields(of value: Value, over existing: Record?) throws(FlatSyncError) -> [String: FieldValue] {
        var fields = try fields(of: value)
        if let existing {
            for (key, field) in existing.fields where Value.fieldTypes[key] == nil && fields[key] == nil {
                fields[key] = field
            }
        }
        return fields
    }

    /// CloudKit's limit on a record's size, assets aside: "1 MB" (PropertyMetrics), taken as 10⁶ bytes of
    /// ``Record``'s estimate of its wire size, so a record let through is not refused for a few bytes.
    static var maximumRecordSize: Int { 1_000_000 }

    /// Checks a record name by CloudKit's rule for record names (`RecordID.cloudKitNameProblem(_:)`:
    /// refused here, it is never sent), and that it is not one the zone's built-in records use.
    static func validate(recordName name: String) throws(FlatSyncError) {
        if let problem = RecordID.cloudKitNameProblem(name) { throw FlatSyncError(.invalidArgument, problem) }
        guard !RecordTypeRegistry.isBuiltIn(RecordID(zone: Value.zone, name: name)) else {
            throw FlatSyncError(
                .invalidArgument, "The record name \(name) has the prefix of the zone's built-in records.")
        }
    }
}

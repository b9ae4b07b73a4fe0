#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Saves and deletes of host-defined records of one zone, of any of its record types, applied as one
/// durable mutation: all of them or, on an error, none.
///
/// A ``RecordStore`` writes one type. Write a record and the records that belong to it (their `deleteSelf`
/// references point at it) in one batch, so that no crash can leave one on the device, and then on every
/// device, without the others:
///
/// ```swift
/// var batch = RecordBatch()
/// try batch.save(Recipe(id: "soup", title: "Soup"))
/// try batch.save([
///     Step(id: "soup-1", recipeID: "soup", text: "Chop the leeks"),
///     Step(id: "soup-2", recipeID: "soup", text: "Simmer for an hour"),
/// ])
/// try batch.delete(Step.self, id: "stew-3")
/// try await context.apply(batch)  // durable here; sent: the recipe, then its steps once the server has it
/// ```
///
/// Each value is checked as it is added, as ``RecordStore/save(_:)-(Value)`` checks it (its name, its
/// fields, its references, its size), and throws a ``FlatSyncError`` there; so does a value of another zone
/// than the batch's first (one mutation changes one zone, as a CloudKit reference ties records of one zone).
/// What only the store knows (the type registered, a `deleteSelf` reference's target present) is checked
/// when the batch is applied, before anything is written. The later of two changes to one record wins.
public struct RecordBatch: Sendable {
    /// The zone of the batch's records: that of the first value added, nil while it is empty.
    public private(set) var zone: ZoneID?
    /// The records to save, by name; the later save of a name replaces the earlier.
    private(set) var saves: [String: Record] = [:]
    /// The records to delete, by name, with their record types.
    private(set) var deletes: [String: String] = [:]
    /// The shortest send debounce of the types added: the batch is sent as soon as any of them would be.
    private(set) var sendDebounce: Duration?

    /// An empty batch.
    public init() {}

    /// True when nothing was added.
    public var isEmpty: Bool { saves.isEmpty && deletes.isEmpty }

    /// Adds the save of `value`: it creates the record, or changes the fields that differ from the stored
    /// one. Replaces an earlier save or delete of the same record in the batch.
    public mutating func save<Value: SyncableRecord>(_ value: Value) throws(FlatSyncError) {
        let record = try RecordStore<Value>.record(of: value)
        try join(Value.self)
        deletes[record.id.name] = nil
        saves[record.id.name] = record
    }

    /// Adds the saves of `values`, as ``save(_:)-(Value)`` does each in turn; on an error, adds none.
    public mutating func save<Value: SyncableRecord>(_ values: [Value]) throws(FlatSyncError) {
        let records = try values.map { (value) throws(FlatSyncError) in try RecordStore<Value>.record(of: value) }
        try join(Value.self)
        for record in records {
            deletes[record.id.name] = nil
            saves[record.id.name] = record
        }
    }

    /// Adds the delete of the value of type `type` named `id`, and so of every record a chain of `deleteSelf`
    /// references ties to it. Replaces an earlier save of the same record in the batch. Deleting a record
    /// the store does not hold (or holds as another type) changes nothing.
    public mutating func delete<Value: SyncableRecord>(_ type: Value.Type, id: String) throws(FlatSyncError) {
        try RecordStore<Value>.validate(recordName: id)
        try join(Value.self)
        saves[id] = nil
        deletes[id] = Value.recordType
    }

    /// Takes `Value`'s zone as the batch's, or checks that it is the batch's.
    private mutating func join<Value: SyncableRecord>(_: Value.Type) throws(FlatSyncError) {
        if let zone, zone != Value.zone {
            throw FlatSyncError(
                .invalidArgument,
                "\(Value.self) lives in zone \(Value.zone), and the batch in zone \(zone): one batch changes one zone.")
        }
        zone = Value.zone
        sendDebounce = min(sendDebounce ?? Value.sendDebounce, Value.sendDebounce)
    }
}

extension LocalStore {
    /// Applies `batch` as one durable mutation and tells `observer`, the context that sends it, once it is
    /// durable; returns how many records changed (see ``applyHostMutation(in:saves:deletes:)``).
    nonisolated func applyDurably(_ batch: RecordBatch, observer: (any LocalChangeObserver)?) async throws -> Int {
        guard let zone = batch.zone, !batch.isEmpty else { return 0 }
        let saves = Array(batch.saves.values)
        let deletes = batch.deletes
        let changed = try await applyDurably { store in
            try store.applyHostMutation(in: zone, saves: saves, deletes: deletes)
        }
        if changed > 0 { await observer?.localChangeDidBecomeDurable(in: zone, debounce: batch.sendDebounce) }
        return changed
    }

    /// Applies `batch` as one durable mutation: every save and delete in it, or on an error none. Returns
    /// how many records changed: saves that changed their record, and deletes with the records their
    /// `deleteSelf` references took along. Changes wait in the store until a ``SyncContext`` opens it; apply
    /// through the context (``SyncContext/apply(_:)``) to send them.
    ///
    /// Throws ``FlatSyncError/Code-swift.struct/invalidArgument`` when a type in the batch was not
    /// registered (``Options/recordTypes``), a saved record is stored as another type, or a `deleteSelf`
    /// reference points at a record that neither exists nor is saved in the batch.
    @discardableResult
    public nonisolated func apply(_ batch: RecordBatch) async throws -> Int {
        try await applyDurably(batch, observer: nil)
    }
}

/// One record's change waiting to be sent: save this record, or delete it.
///
/// A save carries the *whole* record as the store held it right after the mutation, plus the keys the
/// user's mutations changed. Carrying the whole record lets the queue be replayed over a stale snapshot
/// after a crash, and lets a later change to the same record simply supersede an earlier one.
package struct RecordChange: Hashable, Sendable {
    /// What to do with the record.
    package enum Operation: Hashable, Sendable {
        /// Save this record (its change tag is not used; the engine sends the tag it last saw).
        case save(Record)
        /// Delete the record.
        case delete
    }

    /// The record this change is for.
    package var recordID: RecordID
    /// Save or delete.
    package var operation: Operation {
        get { isSave ? .save(carriedRecord) : .delete }
        set {
            // A mask is read over the keys of the record it came with; a cascade's owner is a delete's; the
            // values a save's keys had before it are not another record's.
            switch keys {
            case .mask, .based, .rebased: keys = .set(changedKeys)
            case .owner: keys = .set([])
            case .set: break
            }
            switch newValue {
            case .save(let record):
                carriedRecord = record
                isSave = true
            case .delete:
                carriedRecord = Self.noRecord(recordID)
                isSave = false
            }
        }
    }
    /// The record a save carries, nil for a delete (a copy: read ``carriedRecord`` in place).
    package var savedRecord: Record? {
        isSave ? carriedRecord : nil
    }
    /// The record a save carries; for a delete, a record of the ID it was made with, no type and no fields,
    /// which nothing reads (equality, hashing and the log go by ``isDelete`` and ``recordID``). Code that
    /// reads a save's parts reaches them here in place (after checking ``isDelete``): binding the
    /// operation's payload, or going through ``savedRecord``, copies the whole record (retaining each of its
    /// strings), for every change a batch writes to the log.
    ///
    /// Stored as a record and a flag rather than as an optional record: with the optional, the optimizer
    /// copied every change it made (and its record) and destroyed the original where it could have moved
    /// it, retaining and releasing their strings — about a third of making a batch's changes.
    package private(set) var carriedRecord: Record
    /// True for a save.
    private var isSave: Bool
    /// True for a save that stands for a delete of the record followed by a new one (a delete coalesced
    /// with a later save): sent, it replaces the server's record whole, where another save changes only the
    /// keys it changed (see ``SavePolicy/replaceIfServerRecordUnchanged``).
    package internal(set) var replacesRecord = false
    /// The keys the user's mutations changed (empty for a delete).
    package var changedKeys: Set<String> {
        get {
            switch keys {
            case .set(let keys): keys
            case .mask(let mask): carriedRecord.content.box!.keySets![mask]
            case .owner: []
            case .based(let keys, _), .rebased(let keys, _): keys
            }
        }
        set { keys = .set(newValue) }
    }
    /// For a save of a host record, the values its ``changedKeys`` had in the version it was made over, by
    /// key (a key missing here was not in that version): with the record's other fields, that version.
    /// Nil when not known: a built-in store's change, a new record, a save that replaces the record, or one
    /// logged without them.
    ///
    /// A host's merge gets that version as the common ancestor of its two versions (see
    /// `SyncableRecord.merge(_:_:ancestor:changedFields:)`); coalesced saves keep the earlier values.
    package var baseValues: [String: FieldValue]? {
        switch keys {
        case .based(_, let values), .rebased(_, let values): values
        default: nil
        }
    }
    /// True for a save made over a version the record was merged with (``ZoneState/mergeBases``): its
    /// ``baseValues``, for every key the record's pending changes changed, are that version's, and replace
    /// the earlier changes' on coalescing. The merge is in memory until the zone's snapshot is written; the
    /// save is logged with the merged record, so after a crash it must bring the version along.
    package var rebases: Bool {
        if case .rebased = keys { return true }
        return false
    }
    /// For a delete that a `deleteSelf` reference made (the record went because the record it refers to was
    /// deleted in the same mutation), the name of that record: its owner. Nil for any other change.
    ///
    /// Such a delete is never sent. CloudKit deletes the record itself when the owner's delete goes through,
    /// and the owner's delete may not go through: it can lose to an edit this device had not seen, or be
    /// refused. So the delete waits while the owner's delete is pending, and then the server's answer settles
    /// it (see `SyncContext.settleCascadedDeletes`).
    package var cascadeOwner: String? {
        if case .owner(let name) = keys { return name }
        return nil
    }
    /// ``changedKeys`` as a mask over the keys of the store's value the record holds
    /// (``StoredRecordContent/recordKeySets``), when the store made the change so: the store's own log form
    /// writes it as is, instead of looking each key up.
    package var keyMask: Int? {
        if case .mask(let mask) = keys { return mask }
        return nil
    }
    /// The changed keys as a set, or as a mask until someone asks for the set: a burst of history changes
    /// then neither looks each set up nor retains and releases one at every copy.
    private var keys: ChangedKeys

    private enum ChangedKeys: Sendable {
        case set(Set<String>)
        case mask(Int)
        /// A delete's: the record whose delete it follows (``cascadeOwner``); it changes no keys.
        case owner(String)
        /// A host save's keys, with the values they had before it (``baseValues``).
        case based(Set<String>, [String: FieldValue])
        /// The same, over the version the record was merged with (``rebases``).
        case rebased(Set<String>, [String: FieldValue])
    }

    /// A delete of the record with `recordID`.
    private init(deleting recordID: RecordID, sequence: UInt64) {
        self.recordID = recordID
        self.carriedRecord = Self.noRecord(recordID)
        self.isSave = false
        self.keys = .set([])
        self.sequence = sequence
    }

    /// A save of `record`, built in place.
    private init(recordID: RecordID, saving record: consuming Record, keys: consuming ChangedKeys, sequence: UInt64) {
        self.recordID = recordID
        self.carriedRecord = record
        self.isSave = true
        self.keys = consume keys
        self.sequence = sequence
    }

    /// What a delete carries in place of a record.
    private static func noRecord(_ id: RecordID) -> Record {
        Record(id: id, type: "", content: .fields([:]))
    }

    /// The sequence number of the mutation that last changed this record; mutations are numbered in
    /// the order the store accepted them.
    package var sequence: UInt64

    /// A save of `record`.
    package static func save(
        _ record: consuming Record, changedKeys: Set<String>, sequence: UInt64 = 0
    ) -> RecordChange {
        let id = record.id
        return RecordChange(recordID: id, saving: record, keys: .set(changedKeys), sequence: sequence)
    }

    /// A save of a host record, `changedKeys` of which had `baseValues` before it (see ``baseValues``).
    package static func save(
        _ record: consuming Record, changedKeys: Set<String>, baseValues: [String: FieldValue], rebases: Bool = false,
        sequence: UInt64 = 0
    ) -> RecordChange {
        let id = record.id
        return RecordChange(
            recordID: id, saving: record,
            keys: rebases ? .rebased(changedKeys, baseValues) : .based(changedKeys, baseValues), sequence: sequence)
    }

    /// A save of a record, with ID `id` and type `type`, holding a store's value, whose changed keys are
    /// `mask` over the value's ``StoredRecordContent/recordKeySets``: the record is built in place (built
    /// first and passed in, it was copied once more).
    package static func save<Value: StoredRecordContent>(
        content value: consuming Value, type: String, id: RecordID, changeTag: ChangeTag? = nil, keyMask mask: Int,
        sequence: UInt64
    ) -> RecordChange {
        assert(Value.recordKeySets != nil, "\(Value.self) gives its changed keys as sets")
        return RecordChange(
            recordID: id, saving: Record(id: id, type: type, content: .stored(value), changeTag: changeTag),
            keys: .mask(mask), sequence: sequence)
    }

    /// A delete of the record with `id`.
    package static func delete(_ id: RecordID, sequence: UInt64 = 0) -> RecordChange {
        RecordChange(deleting: id, sequence: sequence)
    }

    /// A delete of the record with `id` that a `deleteSelf` reference to the record named `owner`, deleted in
    /// the same mutation, made (see ``cascadeOwner``).
    package static func cascadedDelete(_ id: RecordID, owner: String, sequence: UInt64 = 0) -> RecordChange {
        var change = RecordChange(deleting: id, sequence: sequence)
        change.keys = .owner(owner)
        return change
    }

    /// The record to save, or `nil` for a delete.
    package var record: Record? {
        savedRecord
    }

    /// True for a delete.
    package var isDelete: Bool {
        !isSave
    }

    /// This change followed by `later`, by the coalescing rules (see <doc:HowSyncWorks>):
    ///
    /// | pending | new | result |
    /// |---|---|---|
    /// | save | save | one save: the later record (which already holds the earlier change), keys united, each key's ``baseValues`` the earlier change's |
    /// | save | delete | the delete |
    /// | delete | save | the save, with the whole record, replacing the server's (``replacesRecord``), with no ``baseValues`` |
    /// | delete | delete | one delete |
    package func coalesced(with later: RecordChange) -> RecordChange {
        precondition(recordID == later.recordID, "coalescing changes of different records")
        switch (isSave, later.isSave) {
        case (true, true):
            var result = later
            // Masks of one store's values unite as masks (a record's changes all come from its one store, but a
            // fetched record merged over a pending change holds fields).
            if let mine = keyMask, let theirs = later.keyMask,
                carriedRecord.content.box!.holdsSameType(as: later.carriedRecord.content.box!)
            {
                result.keys = .mask(mine | theirs)
            } else if !replacesRecord, !later.replacesRecord, let earlier = baseValues, var values = later.baseValues {
                // Each key's value before the first change of it: the version both were made over; or, when
                // the later one was made over a merged version, that version's.
                var keys = later.changedKeys
                for key in changedKeys {
                    keys.insert(key)
                    if !later.rebases { values[key] = earlier[key] }
                }
                result.keys = later.rebases || rebases ? .rebased(keys, values) : .based(keys, values)
            } else {
                result.changedKeys.formUnion(changedKeys)
            }
            result.replacesRecord = replacesRecord || later.replacesRecord
            return result
        case (false, true):
            var result = later
            // The version the record was made over is gone from the server, or will be.
            if result.baseValues != nil { result.changedKeys = later.changedKeys }
            result.replacesRecord = true
            return result
        case (_, false):
            return later
        }
    }

    package static func == (lhs: RecordChange, rhs: RecordChange) -> Bool {
        // The records compared in place (through `savedRecord`, both were copied).
        lhs.recordID == rhs.recordID && lhs.sequence == rhs.sequence && lhs.isSave == rhs.isSave
            && lhs.replacesRecord == rhs.replacesRecord && lhs.cascadeOwner == rhs.cascadeOwner
            && (!lhs.isSave || lhs.carriedRecord == rhs.carriedRecord)
            && (lhs.keyMask != nil && lhs.keyMask == rhs.keyMask
                || lhs.changedKeys == rhs.changedKeys)
            && lhs.baseValues == rhs.baseValues && lhs.rebases == rhs.rebases
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(recordID)
        hasher.combine(operation)
        hasher.combine(changedKeys)
        hasher.combine(sequence)
    }
}

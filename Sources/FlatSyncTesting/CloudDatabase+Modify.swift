import FlatSync

extension CloudDatabase {
    /// Saves and deletes records, with a result for each.
    ///
    /// The whole request is refused, with nothing changed, when it is malformed:
    /// `CloudError.Code.limitExceeded` for more than ``maximumOperationsPerRequest``
    /// operations or a record larger than ``maximumRecordSize``;
    /// `CloudError.Code.invalidArguments` for an empty zone name, record name or record
    /// type, or a record named twice (among the saves and deletes together).
    ///
    /// Otherwise each record succeeds or fails on its own (see `SavePolicy` and `DeletePolicy`):
    /// `CloudError.Code.serverRecordChanged` with the server's record for a stale tag,
    /// `CloudError.Code.unknownItem` for a tagged save of a record that is gone,
    /// `CloudError.Code.zoneNotFound` or `CloudError.Code.userDeletedZone`
    /// for a record in a zone that does not exist. With `atomically`, one failure fails the request:
    /// nothing is applied, failed records keep their errors and the others fail with
    /// `CloudError.Code.batchRequestFailed`.
    ///
    /// References are checked and followed as CloudKit does (see `CloudDatabase+References.swift`): a save
    /// whose reference leaves its zone fails with `CloudError.Code.invalidArguments`, as does
    /// one whose `validate` reference has no target (`VALIDATING_REFERENCE_ERROR`); one that would give a
    /// record more than ``maximumOwningReferencesPerRecord`` `deleteSelf` references fails with
    /// `CloudError.Code.limitExceeded`; deleting a record deletes, in the same request, every
    /// record whose `deleteSelf` reference points at it, and so on down. A `none` or `deleteSelf` reference
    /// to a record that does not exist is saved as it is, as CloudKit documents.
    ///
    /// Every save gets a new change tag and is one step in its zone's history, as is every delete of a
    /// record that existed (cascaded ones included).
    package mutating func modifyRecords(
        saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool
    )
        throws(CloudError) -> ModifyRecordsResult
    {
        try Self.validateModify(saves, deletes)
        // Record IDs are unique within a request, so each record's outcome depends only on the server's
        // state before the request (and, for its references, on which records the request saves and
        // deletes): check them all first, then apply the ones that succeed.
        var failed: [RecordID: CloudError] = [:]
        // A record fault fails the record its scripted fault names, or else the first.
        let faulted: RecordID? =
            if let target = recordFaultTarget {
                saves.contains { $0.record.id == target } || deletes.contains { $0.id == target } ? target : nil
            } else {
                saves.first?.record.id ?? deletes.first?.id
            }
        if let faulted, let error = takeItemFault(for: "the record \(faulted.name)") {
            failed[faulted] = error
        }
        let holdsReferences = saves.contains { !$0.record.references.isEmpty }
        // A record that failed is neither saved nor deleted: what refers to it is checked against the server.
        let saving = holdsReferences ? Set(saves.map(\.record.id)).subtracting(failed.keys) : []
        let deleting = holdsReferences ? Set(deletes.map(\.id)).subtracting(failed.keys) : []
        for save in saves where failed[save.record.id] == nil {
            if let error = saveFailure(save)
                ?? (holdsReferences ? referenceFailure(save, saving: saving, deleting: deleting) : nil)
            {
                failed[save.record.id] = error
            }
        }
        if holdsReferences {
            let accepted = saves.filter { failed[$0.record.id] == nil }
            for (id, error) in owningReferenceFailures(accepted, deleting: deleting) { failed[id] = error }
        }
        for deletion in deletes where failed[deletion.id] == nil {
            if let error = deleteFailure(deletion) { failed[deletion.id] = error }
        }
        if atomically && !failed.isEmpty {
            for id in saves.map(\.record.id) + deletes.map(\.id) where failed[id] == nil {
                failed[id] = CloudError(
                    .batchRequestFailed,
                    "The atomic request failed because another record in it failed; nothing was applied."
                )
            }
            return ModifyRecordsResult(failed: failed)
        }
        var result = ModifyRecordsResult(failed: failed)
        var touched = Set<String>()
        var removed: [RecordID] = []
        for save in saves where failed[save.record.id] == nil {
            result.saved[save.record.id] = applySave(save)
            touched.insert(save.record.id.zone.name)
            if productionSchema == nil { learnTypes(of: save.record) }
        }
        for deletion in deletes where failed[deletion.id] == nil {
            result.deleted.insert(deletion.id)
            if applyDelete(deletion) {
                removed.append(deletion.id)
                touched.insert(deletion.id.zone.name)
            }
        }
        // The records tied to the deleted ones by `deleteSelf` go with them; the result lists only the
        // request's own records (see CloudDatabase+References.swift).
        let cascaded = removed.isEmpty ? 0 : cascadeDeletions(from: removed)
        if !touched.isEmpty {
            databaseSequence += 1
            for name in touched {
                zones[name]!.changedAt = databaseSequence
                zones[name]!.compact(keeping: changeHistoryLimit)
                zones[name]!.trimChangeOrder()
            }
        }
        counters.recordsSaved += result.saved.count
        counters.recordsDeleted += removed.count + cascaded
        return result
    }

    /// The records with these IDs that exist. IDs in zones that do not exist, and of records that do
    /// not exist, are left out.
    ///
    /// - Throws: `CloudError.Code.invalidArguments` for an empty zone or record name.
    package mutating func lookupRecords(_ ids: [RecordID]) throws(CloudError) -> [RecordID: Record] {
        if ids.contains(where: { $0.name.isEmpty || $0.zone.name.isEmpty }) {
            throw CloudError(.invalidArguments, "A record or zone name must not be empty.")
        }
        var found: [RecordID: Record] = [:]
        for id in ids {
            guard let zone = zones[id.zone.name], zone.exists, let record = zone.slots[id.name]?.record else {
                continue
            }
            found[id] = record
        }
        counters.recordsReturned += found.count
        return found
    }

    // MARK: - Applying

    /// Refuses a malformed request as a whole (limits, names, types); see ``modifyRecords(saving:deleting:atomically:)``.
    static func validateModify(_ saves: [RecordSave], _ deletes: [RecordDeletion]) throws(CloudError) {
        let operations = saves.count + deletes.count
        if operations > maximumOperationsPerRequest {
            throw CloudError(
                .limitExceeded,
                "The request has \(operations) operations; the limit is \(maximumOperationsPerRequest). "
                    + "Split it. Nothing was changed."
            )
        }
        if let large = saves.first(where: { $0.record.approximateSize > maximumRecordSize }) {
            throw CloudError(
                .limitExceeded,
                "The record \(large.record.id) is \(large.record.approximateSize) bytes; the limit is "
                    + "\(maximumRecordSize). Nothing was changed."
            )
        }
        var seen = Set<RecordID>()
        for id in saves.map(\.record.id) + deletes.map(\.id) {
            if id.name.isEmpty || id.zone.name.isEmpty {
                throw CloudError(.invalidArguments, "A record or zone name must not be empty. Nothing was changed.")
            }
            if !seen.insert(id).inserted {
                throw CloudError(
                    .invalidArguments,
                    "The record \(id) appears more than once in the request. Nothing was changed."
                )
            }
        }
        if let untyped = saves.first(where: { $0.record.type.isEmpty }) {
            throw CloudError(
                .invalidArguments, "The record \(untyped.record.id) has an empty record type. Nothing was changed."
            )
        }
    }

    /// In development, why a save gives a field a value of another type than earlier saves gave it (see
    /// ``developmentSchema``); nil when every field it carries is new or of its type.
    private func developmentTypeProblem(_ record: Record) -> String? {
        guard productionSchema == nil, let known = developmentSchema?.recordTypes[record.type] else { return nil }
        for key in record.fields.keys.sorted() {
            if let type = known[key], !type.accepts(record.fields[key]!) {
                return "Invalid value, expected type \(type.wireName)."
            }
        }
        return nil
    }

    /// Fixes the type of each field `record` carries for the first time whose value says its type.
    private mutating func learnTypes(of record: Record) {
        var known = developmentSchema?.recordTypes[record.type] ?? [:]
        var learned = false
        for (key, value) in record.fields where known[key] == nil {
            if let type = Self.developmentType(of: value) {
                known[key] = type
                learned = true
            }
        }
        guard learned else { return }
        var schema = developmentSchema ?? CloudSchema(recordTypes: [:])
        schema.recordTypes[record.type] = known
        developmentSchema = schema
    }

    /// The type a value gives a new field in development; nil when it does not say (an empty list, a kept
    /// value).
    private static func developmentType(of value: FieldValue) -> CloudSchema.FieldType? {
        switch value {
        case .string: return .string
        case .int: return .int64
        case .double: return .double
        case .date: return .timestamp
        case .bytes: return .bytes
        case .reference: return .reference
        case .list(let items): return items.first.flatMap(developmentType(of:)).map { .list($0) }
        case .opaque: return nil
        }
    }

    /// The server's current version of a record, if any. (Reads through the dictionaries without
    /// keeping a copy of the zone, which would make the next mutation copy all its records.)
    func currentRecord(_ id: RecordID) -> Record? {
        zones[id.zone.name]?.slots[id.name]?.record
    }

    /// Why a save would fail now, or `nil` if it would succeed.
    private func saveFailure(_ save: RecordSave) -> CloudError? {
        let id = save.record.id
        guard zones[id.zone.name]?.exists == true else { return Self.missingZoneError(id.zone, zones[id.zone.name]) }
        // CloudKit documents the rule for record names (`CKRecord.ID`); the code its server answers a name
        // that breaks it with over CKWS is not documented: BAD_REQUEST, record by record, is a guess.
        if let problem = RecordID.cloudKitNameProblem(id.name) {
            return CloudError(.invalidArguments, problem, serverErrorCode: "BAD_REQUEST")
        }
        if let problem = productionSchema?.problem(saving: save.record) ?? developmentTypeProblem(save.record) {
            return CloudError(.invalidArguments, problem, serverErrorCode: "BAD_REQUEST")
        }
        if let failure = assetFailure(save.record) { return failure }
        guard save.policy == .ifServerRecordUnchanged || save.policy == .replaceIfServerRecordUnchanged else {
            return nil
        }
        if let existing = currentRecord(id) {
            return save.record.changeTag == existing.changeTag
                ? nil : Self.changedError(existing, sent: save.record.changeTag)
        }
        if let tag = save.record.changeTag {
            return CloudError(
                .unknownItem, "The record \(id) no longer exists on the server (the save carried the tag \(tag))."
            )
        }
        return nil
    }

    /// Why a delete would fail now, or `nil` if it would succeed.
    private func deleteFailure(_ deletion: RecordDeletion) -> CloudError? {
        let id = deletion.id
        guard zones[id.zone.name]?.exists == true else { return Self.missingZoneError(id.zone, zones[id.zone.name]) }
        guard deletion.policy == .ifServerRecordUnchanged, let existing = currentRecord(id) else { return nil }
        return deletion.changeTag == existing.changeTag ? nil : Self.changedError(existing, sent: deletion.changeTag)
    }

    /// Saves a record that ``saveFailure(_:)`` accepted; returns it as the server now holds it.
    private mutating func applySave(_ save: RecordSave) -> Record {
        let id = save.record.id
        let fields: [String: FieldValue]
        var writer = save.record.lastModifiedBy
        // A TIMESTAMP travels as whole milliseconds (documented: ckws.md), so what a client reads back is
        // rounded so; whether the server itself would keep a finer date is not known.
        var sent = Self.withoutReceipts(save.record.fields)
        sent.roundDatesToMilliseconds()
        switch save.policy {
        case .changedKeys, .ifServerRecordUnchanged:
            let current = currentRecord(id)
            fields = current?.fields.merging(sent) { $1 } ?? sent
            // The writer travels as an ordinary field (`fsLastModifiedBy`), and an update "changes only the
            // given fields" (ckws.md §3): a save without it (a native app's) leaves the last one named.
            writer = writer ?? current?.lastModifiedBy
        case .replaceIfServerRecordUnchanged, .allKeys:
            fields = sent
        }
        let saved = Record(
            id: id, type: save.record.type, fields: fields, changeTag: nextChangeTag(), lastModifiedBy: writer)
        modifyZone(id.zone.name) { zone in
            zone.sequence += 1
            let step = zone.sequence
            if zone.slots[id.name] == nil {
                zone.slots[id.name] = RecordSlot(record: saved, createdSequence: step, modifiedSequence: step)
            } else {
                if zone.slots[id.name]!.record == nil {
                    zone.slots[id.name]!.createdSequence = step
                }
                zone.slots[id.name]!.record = saved
                zone.slots[id.name]!.modifiedSequence = step
            }
            zone.noteChange(id.name, at: step)
        }
        return saved
    }

    /// Deletes a record that ``deleteFailure(_:)`` accepted; returns whether one was actually removed.
    mutating func applyDelete(_ deletion: RecordDeletion) -> Bool {
        let id = deletion.id
        guard currentRecord(id) != nil else { return false }
        modifyZone(id.zone.name) { zone in
            zone.sequence += 1
            let step = zone.sequence
            let created = zone.slots[id.name]!.createdSequence
            zone.slots[id.name]!.pastLives.append(Life(start: created, end: step))
            zone.slots[id.name]!.record = nil
            zone.slots[id.name]!.modifiedSequence = step
            zone.noteChange(id.name, at: step)
        }
        return true
    }

    /// Mutates a zone in place, so the zone's dictionary of slots is not copied.
    private mutating func modifyZone(_ name: String, _ body: (inout ZoneState) -> Void) {
        body(&zones[name]!)
    }

    private static func changedError(_ server: Record, sent: ChangeTag?) -> CloudError {
        CloudError(
            .serverRecordChanged,
            "The record \(server.id) is at tag \(server.changeTag?.rawValue ?? "nil") on the server, "
                + "not \(sent?.rawValue ?? "nil") as sent. Merge with the server's record and save again.",
            serverRecord: server
        )
    }
}

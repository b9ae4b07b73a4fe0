import FlatSync
import FlatSyncCloudKit
import Foundation

// records/modify and records/lookup.

extension CloudKitEmulator {
    /// One operation of `records/modify`, as parsed.
    private struct RecordOperation: Sendable {
        enum Kind: String, Sendable, CaseIterable {
            case create, update, forceUpdate, replace, forceReplace, delete, forceDelete
        }

        var kind: Kind
        /// The record sent (for a delete: only its name and tag matter).
        var record: Record
        /// The `type` each list field was sent with.
        var wireTypes: [String: String] = [:]
        /// The fields sent with `"isEncrypted": true`.
        var encrypted: Set<String> = []

        var isDelete: Bool { kind == .delete || kind == .forceDelete }
    }

    /// The outcome of one record in `records/modify` or `records/lookup`.
    private enum RecordOutcome: Sendable {
        case saved(Record)
        case deleted(String)
        case failed(String, CloudError)
    }

    /// `records/modify` → 200 `{"records":[…]}`, one entry per operation in order: the saved record, a
    /// tombstone for a delete, or the record's error.
    ///
    /// Operation types, as Apple's `records/modify` reference describes them, onto `CloudDatabase`:
    /// - `create`: save if the record does not exist (exists → CONFLICT, as observed live).
    /// - `update` + tag: save if the tag is current (stale → CONFLICT, missing → NOT_FOUND); only the sent
    ///   fields change ("Only the fields you specify are changed").
    /// - `replace` + tag: the same check; fields not sent are removed ("set to null").
    /// - `forceUpdate` / `forceReplace`: save without a check, sent fields only / all fields.
    /// - `delete` + tag: delete if the tag is current (missing → success); `forceDelete`: delete.
    /// - `replace`, `update` or `delete` without a tag: BAD_REQUEST for that record (the tag "is required").
    ///
    /// **Emulator behaviour** in that list, where Apple says nothing and no capture is known: NOT_FOUND for
    /// an update or replace of a missing record, success for a delete of one, and BAD_REQUEST as the code
    /// of a missing tag; a missing zone fails each record with ZONE_NOT_FOUND inside the 200 rather than
    /// the request; the other records of a failed atomic request get ATOMIC_ERROR, which ckws.md marks
    /// uncertain (by analogy with the native `batchRequestFailed`). Apple makes `zoneID` optional
    /// (`_defaultZone`) and `recordType` required only for `create` and `forceUpdate`; the emulator
    /// requires both on every request and save, stricter than CloudKit, which FlatSync always sends.
    ///
    /// With a production schema (`CloudDatabase.productionSchema`), a save whose record type or field the
    /// schema lacks, or whose field was sent with another type (an empty list as `STRING_LIST` for an
    /// `INT64_LIST` field, say), fails for that record with BAD_REQUEST in CloudKit's words.
    ///
    /// `atomic` (default true): one failure fails every record (the others with ATOMIC_ERROR) and
    /// nothing is applied. The request fails as a whole, counted but with nothing applied, for more than
    /// 200 operations or a record over 1 MB (LIMIT_EXCEEDED), and for a malformed operation, an empty or
    /// repeated record name, an empty record type or no `zoneID` (BAD_REQUEST).
    func modifyRecords(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result { () throws(CloudKitJSON.Problem) -> (operations: [RecordOperation], atomic: Bool) in
            let zone = try CloudKitJSON.zoneID(from: body["zoneID"], "zoneID")
            let atomic = try CloudKitJSON.bool(body["atomic"], default: true, "atomic")
            var operations: [RecordOperation] = []
            for (index, raw) in try CloudKitJSON.array(body["operations"], "operations").enumerated() {
                // Named only for an error message: built eagerly, such names cost more than the parsing.
                func what() -> String { "operations[\(index)]" }
                let operation = try CloudKitJSON.object(raw, what())
                let typeName = try CloudKitJSON.string(operation["operationType"], "\(what()).operationType")
                guard let kind = RecordOperation.Kind(rawValue: typeName) else {
                    throw CloudKitJSON.Problem("The operation type \(typeName) of \(what()) is unknown.")
                }
                if kind == .delete || kind == .forceDelete {
                    let record = try CloudKitJSON.object(operation["record"], "\(what()).record")
                    let name = try CloudKitJSON.string(record["recordName"], "\(what()).record.recordName")
                    let tag = try CloudKitJSON.optionalString(
                        record["recordChangeTag"], "\(what()).record.recordChangeTag")
                    let deleted = Record(
                        id: RecordID(zone: zone, name: name), type: "", changeTag: tag.map { ChangeTag($0) })
                    operations.append(RecordOperation(kind: kind, record: deleted))
                } else {
                    var wireTypes: [String: String] = [:]
                    var encrypted: Set<String> = []
                    let record = try CloudKitRecordJSON.record(
                        from: operation["record"], in: zone, wireTypes: &wireTypes, encrypted: &encrypted,
                        "\(what()).record")
                    operations.append(
                        RecordOperation(kind: kind, record: record, wireTypes: wireTypes, encrypted: encrypted))
                }
            }
            return (operations, atomic)
        }.mapError(\.cloudError)

        let changed = CloudKitPushHub.ChangedZones()
        let records = (try? parsed.get())?.operations.map(\.record.id) ?? []
        let outcome = await serve(.modifyRecords, records: records) {
            (database) throws(CloudError) -> [RecordOutcome] in
            let (operations, atomic) = try parsed.get()
            let applied = try Self.applyModify(operations, atomic: atomic, to: &database)
            changed.insert(applied.changed)
            return applied.outcomes
        }
        push.notify(changed.names)
        switch outcome {
        case .failure(let error): return reply(for: error)
        case .success(let outcomes): return render(outcomes)
        }
    }

    /// Applies a parsed `records/modify` to the database, inside the counted request.
    private static func applyModify(_ operations: [RecordOperation], atomic: Bool, to database: inout CloudDatabase)
        throws(CloudError) -> (outcomes: [RecordOutcome], changed: Set<String>)
    {
        guard operations.count <= maximumOperations else {
            throw CloudError(
                .limitExceeded,
                "The request has \(operations.count) operations; CloudKit Web Services allows \(maximumOperations). "
                    + "Split it. Nothing was changed.")
        }
        var saves: [RecordSave] = []
        var deletes: [RecordDeletion] = []
        var failed: [RecordID: CloudError] = [:]
        for operation in operations {
            let record = operation.record
            switch operation.kind {
            case .create:
                saves.append(RecordSave(record.withChangeTag(nil), policy: .ifServerRecordUnchanged))
            case .replace, .update:
                saves.append(
                    RecordSave(
                        record,
                        policy: operation.kind == .update ? .ifServerRecordUnchanged : .replaceIfServerRecordUnchanged))
                if record.changeTag == nil {
                    failed[record.id] = CloudError(
                        .invalidArguments, "\(operation.kind.rawValue) needs the record's recordChangeTag.")
                }
            case .forceUpdate:
                saves.append(RecordSave(record, policy: .changedKeys))
            case .forceReplace:
                saves.append(RecordSave(record, policy: .allKeys))
            case .delete:
                deletes.append(RecordDeletion(record.id, changeTag: record.changeTag, policy: .ifServerRecordUnchanged))
                if record.changeTag == nil {
                    failed[record.id] = CloudError(.invalidArguments, "delete needs the record's recordChangeTag.")
                }
            case .forceDelete:
                deletes.append(RecordDeletion(record.id, policy: .force))
            }
        }
        // Whole-request refusals first (sizes, names, types), with CKWS's own limit checked above.
        try CloudDatabase.validateModify(saves, deletes)

        if let schema = database.productionSchema {
            for operation in operations where !operation.isDelete && failed[operation.record.id] == nil {
                if let problem = Self.wireTypeProblem(operation, schema) {
                    failed[operation.record.id] = CloudError(
                        .invalidArguments, problem, serverErrorCode: "BAD_REQUEST")
                }
            }
        }

        if atomic && !failed.isEmpty {
            let outcomes = operations.map { operation -> RecordOutcome in
                let id = operation.record.id
                return .failed(
                    id.name,
                    failed[id]
                        ?? CloudError(
                            .batchRequestFailed,
                            "The atomic request failed because another record in it failed; nothing was applied."))
            }
            return (outcomes, [])
        }

        let before = database.counters
        let result = try database.modifyRecords(
            saving: saves.filter { failed[$0.record.id] == nil },
            deleting: deletes.filter { failed[$0.id] == nil },
            atomically: atomic)
        var changed = Set<String>()
        if database.counters.recordsSaved > before.recordsSaved
            || database.counters.recordsDeleted > before.recordsDeleted
        {
            changed.insert(operations[0].record.id.zone.name)
        }
        let outcomes = operations.map { operation -> RecordOutcome in
            let id = operation.record.id
            if let error = failed[id] ?? result.failed[id] { return .failed(id.name, error) }
            if operation.isDelete { return .deleted(id.name) }
            if let saved = result.saved[id] { return .saved(saved) }
            return .failed(id.name, CloudError(.internalError, "The server lost the result of \(id)."))
        }
        return (outcomes, changed)
    }

    /// Why a production container would refuse a field for the `type` it was sent with: a declared field
    /// sent as another type, or sent without `isEncrypted` when the schema encrypts it, or with it when the
    /// schema does not (the record type, undeclared fields and the values' kinds are `CloudDatabase`'s to
    /// check). The reserved writer field counts as declared where the schema has it.
    ///
    /// The encryption errors' words: "Attempt to save encrypted data in non encrypted field type" was seen
    /// live (timlaing/pyicloud #353); "invalid attempt to set value type … defined to be: ENCRYPTED_STRING"
    /// was seen live for an encrypted value sent without `type` (brightdigit/MistKit #485), and is assumed
    /// for a plain one sent to an encrypted field.
    private static func wireTypeProblem(_ operation: RecordOperation, _ schema: CloudSchema) -> String? {
        let record = operation.record
        guard let declared = schema.recordTypes[record.type] else { return nil }
        for (key, sent) in operation.wireTypes.sorted(by: { $0.key < $1.key }) {
            guard let type = declared[key], type.wireName != sent else { continue }
            return "Invalid value, expected type \(type.wireName)."
        }
        for key in record.fields.keys.sorted() {
            guard let type = declared[key] else { continue }
            let sentEncrypted = operation.encrypted.contains(key)
            if type.isEncrypted, !sentEncrypted {
                return "invalid attempt to set value type \(type.wireName) for field '\(key)' for type "
                    + "'\(record.type)', defined to be: \(type)"
            }
            if !type.isEncrypted, sentEncrypted {
                return "Attempt to save encrypted data in non encrypted field type"
            }
        }
        return nil
    }

    /// `records/lookup` `{"records":[{"recordName"}],"zoneID"}` → `{"records":[…]}`, one entry per name in
    /// order: the record, or NOT_FOUND, or the zone's error (ZONE_NOT_FOUND, or USER_DELETED_ZONE when the
    /// user deleted it). At most 200 names (LIMIT_EXCEEDED).
    func lookupRecords(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result { () throws(CloudKitJSON.Problem) -> (zone: ZoneID, names: [String]) in
            let zone = try CloudKitJSON.zoneID(from: body["zoneID"], "zoneID")
            var names: [String] = []
            for (index, raw) in try CloudKitJSON.array(body["records"], "records").enumerated() {
                let record = try CloudKitJSON.object(raw, "records[\(index)]")
                names.append(try CloudKitJSON.string(record["recordName"], "records[\(index)].recordName"))
            }
            return (zone, names)
        }.mapError(\.cloudError)
        let outcome = await serve(.lookupRecords) { (database) throws(CloudError) -> [RecordOutcome] in
            let (zone, names) = try parsed.get()
            guard names.count <= Self.maximumOperations else {
                throw CloudError(
                    .limitExceeded,
                    "The request looks up \(names.count) records; CloudKit Web Services allows \(Self.maximumOperations)."
                )
            }
            let found = try database.lookupRecords(names.map { RecordID(zone: zone, name: $0) })
            var zoneError: CloudError?
            do throws(CloudError) {
                try database.requireZone(zone)
            } catch {
                zoneError = error
            }
            return names.map { name -> RecordOutcome in
                if let record = found[RecordID(zone: zone, name: name)] { return .saved(record) }
                return .failed(
                    name, zoneError ?? CloudError(.unknownItem, "The record \(zone.name)/\(name) does not exist."))
            }
        }
        switch outcome {
        case .failure(let error): return reply(for: error)
        case .success(let outcomes): return render(outcomes, linkingAssets: true)
        }
    }

    /// A 200 `{"records":[…]}`, one entry per outcome; with `linkingAssets`, as a fetch answers, each asset with
    /// a download link.
    private func render(_ outcomes: [RecordOutcome], linkingAssets: Bool = false) -> HTTPServerReply {
        let assetLink = linkingAssets ? assetLinks.link : nil
        let now = Date()
        return Self.ok { writer in
            writer.object {
                $0.member("records") {
                    $0.array(outcomes) { writer, outcome in
                        switch outcome {
                        case .saved(let record):
                            // The whole record as saved, an update's unsent fields included: Apple documents
                            // that a success entry is a record dictionary, not which fields it holds, so this
                            // is a guess. Were CloudKit to answer with the sent fields only, a built-in store
                            // would forget another client's fields it keeps (`ZoneState.keepUnknownFields`)
                            // until the next fetch, which returns the saved record whole; the server keeps them.
                            CloudKitRecordJSON.write(
                                record, userRecordName: options.userRecordName, now: now, assetLink: assetLink,
                                to: &writer)
                        case .deleted(let name):
                            CloudKitRecordJSON.writeTombstone(name, to: &writer)
                        case .failed(let name, let error):
                            var entry = CloudKitWireError.itemBody(
                                error, guessedCodes: options.guessedErrorCodes, isRecord: true)
                            entry["recordName"] = .string(name)
                            writer.value(CloudKitJSON.value(entry), sortingKeys: true)
                        }
                    }
                }
            }
        }
    }
}

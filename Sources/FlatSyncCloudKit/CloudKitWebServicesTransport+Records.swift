import FlatSync
import Foundation

extension CloudKitWebServicesTransport {
    /// One page of a zone's changes since `token`, from `changes/zone`: at most `resultsLimit` records and
    /// deletions, and never more than the 200 CloudKit answers with.
    public func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws
        -> ZoneChanges
    {
        try Self.requireZoneNames([zone])
        guard resultsLimit >= 1 else {
            throw CloudError(
                .invalidArguments, "resultsLimit must be at least 1; it was \(resultsLimit). Nothing was sent.")
        }
        let limit = min(resultsLimit, Self.maximumResultsLimit)
        let request = CloudKitWire.ZoneChangesRequest(
            zone: zone, syncToken: token.map(Self.syncToken), resultsLimit: limit)
        let reply = try await send(.zoneChanges, body: try encode(request), sentChangeToken: token != nil)
        let response = try decode(CloudKitWire.ZoneChangesResponse.self, reply, .zoneChanges)
        guard let page = response.zones.first(where: { $0.zoneID?.zoneName == zone.name }) ?? response.zones.first
        else {
            throw CloudKitErrorMapping.unexpectedResponse(.zoneChanges, reply.data, problem: "no entry for the zone")
        }
        if let error = page.error {
            throw CloudKitErrorMapping.error(error, status: nil, operation: .zoneChanges, sentChangeToken: token != nil)
        }
        guard let syncToken = page.syncToken else {
            throw CloudKitErrorMapping.unexpectedResponse(.zoneChanges, reply.data, problem: "no syncToken")
        }
        // Each entry in the page's order: a record, or nil for a deletion.
        var listed: [(name: String, record: Record?)] = []
        listed.reserveCapacity(page.records.count)
        // The entries that name a record but are an error or have no type, by their place in `listed`.
        var unread: [Int: String] = [:]
        for entry in page.records {
            if entry.deleted == true {
                guard let name = entry.recordName else {
                    throw CloudKitErrorMapping.unexpectedResponse(
                        .zoneChanges, reply.data, problem: "a deleted record has no name")
                }
                listed.append((name, nil))
            } else if let name = entry.recordName, !name.isEmpty,
                entry.error != nil || (entry.recordType ?? "").isEmpty
            {
                unread[listed.count] = name
                listed.append((name, nil))
            } else {
                let record = try record(from: entry, in: zone, reply.data, .zoneChanges)
                listed.append((record.id.name, record))
            }
        }
        if !unread.isEmpty {
            let found = try await lookUpUnread(Array(Set(unread.values)), in: zone)
            for (index, name) in unread { listed[index].record = found[RecordID(zone: zone, name: name)] }
        }
        // A name listed twice in one page (a version and a deletion of it, in some order) counts as its last
        // listing says: whether CloudKit sends only net changes or intermediate versions too is not
        // documented (ckws-client.md), and the changes are handed on as two lists, which lose the order.
        var changed: [Record] = []
        var deleted: [RecordID] = []
        var seen = Set<String>()
        for (name, record) in listed.reversed() where seen.insert(name).inserted {
            if let record { changed.append(record) } else { deleted.append(RecordID(zone: zone, name: name)) }
        }
        changed.reverse()
        deleted.reverse()
        return ZoneChanges(
            changedRecords: changed, deletedRecordIDs: deleted, token: Self.changeToken(syncToken),
            moreComing: page.moreComing ?? false)
    }

    /// The current versions of records a `changes/zone` page named in entries that do not read as a record
    /// or a deletion: an error for the record, or a record without a type. Apple documents neither in a
    /// changes page (a deletion comes back with `deleted: true`, its exact shape undocumented too), so what
    /// CloudKit means by one is not known. Read as they stand, they would fail the page at every fetch and
    /// the zone would never fetch again; looked up, each is taken as the server holds it now, or as deleted
    /// when it holds none. A lookup that meets an error for one throws it: the fetch fails as before, and
    /// is tried again later.
    func lookUpUnread(_ names: [String], in zone: ZoneID) async throws -> [RecordID: Record] {
        var found: [RecordID: Record] = [:]
        for start in stride(from: 0, to: names.count, by: maximumOperationsPerRequest) {
            let chunk = Array(names[start..<min(start + maximumOperationsPerRequest, names.count)])
            let answer = try await lookup(chunk, in: zone)
            if let zoneError = answer.zoneError { throw zoneError }
            found.merge(answer.found) { $1 }
        }
        return found
    }

    /// The records with these IDs that exist, from `records/lookup`: one request per zone and per 200
    /// records.
    public func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] {
        try Self.requireNames(ids)
        var found: [RecordID: Record] = [:]
        // A name CloudKit does not take (`RecordID.cloudKitNameProblem`) is not asked for: this transport
        // never saves one, and the server's answer to it (an error, it may be) must not fail the others.
        let asked = ids.filter { RecordID.cloudKitNameProblem($0.name) == nil }
        for (zone, names) in Self.groupedByZone(asked.map { ($0, $0.name) }) {
            // CKWS takes at most 200 records a request.
            for start in stride(from: 0, to: names.count, by: maximumOperationsPerRequest) {
                let chunk = Array(names[start..<min(start + maximumOperationsPerRequest, names.count)])
                found.merge(try await lookup(chunk, in: zone).found) { $1 }
            }
        }
        return found
    }

    /// One `records/lookup` in one zone: the records found, or the zone's error when it does not exist.
    func lookup(_ names: [String], in zone: ZoneID) async throws -> (found: [RecordID: Record], zoneError: CloudError?)
    {
        let request = CloudKitWire.RecordsLookupRequest(names: names, zone: zone)
        let reply: ResponseBody
        let response: CloudKitWire.RecordsResponse
        do {
            reply = try await send(.lookupRecords, body: try encode(request))
            // An error body in a 200 is thrown here, so it is caught as an error status is.
            response = try decode(CloudKitWire.RecordsResponse.self, reply, .lookupRecords)
        } catch let error as CloudError where error.code == .zoneNotFound || error.code == .userDeletedZone {
            return ([:], error)
        }
        var found: [RecordID: Record] = [:]
        var zoneError: CloudError?
        for entry in response.records {
            if let fields = entry.error {
                let error = CloudKitErrorMapping.error(
                    fields, status: nil, operation: .lookupRecords, sentChangeToken: false)
                switch error.code {
                case .unknownItem: continue
                case .zoneNotFound, .userDeletedZone: zoneError = error
                default: throw error
                }
                continue
            }
            guard entry.deleted != true else { continue }
            let record = try record(from: entry, in: zone, reply.data, .lookupRecords)
            found[record.id] = record
        }
        return (found, zoneError)
    }

    /// Saves and deletes records with `records/modify`, one request per zone (and a `records/lookup` for
    /// conflicts, whose answers CKWS does not carry), returning a result for each record; more than 200
    /// operations throw `limitExceeded` before anything is sent. <doc:MeetingCloudKit> says how CloudKit's
    /// answers map.
    public func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
        async throws -> ModifyRecordsResult
    {
        try validate(saves, deletes)
        var result = ModifyRecordsResult()
        // A save under a name CloudKit documents it does not take (not printable ASCII, longer than 255, a
        // leading `_`) is refused here, record by record, and not sent: what the server would answer is not
        // documented. A delete goes as any other: an earlier FlatSync sent such saves, and whether CloudKit
        // Web Services took them is not known.
        var resolved = Set<RecordID>()
        for save in saves {
            if let problem = RecordID.cloudKitNameProblem(save.record.id.name) {
                result.failed[save.record.id] = CloudError(.invalidArguments, "\(problem) Nothing was sent.")
            }
        }

        // A tagless delete-if-unchanged has no CKWS form: find out first what it would meet.
        // One under a name CloudKit does not take was never saved by this transport: it is done.
        var untagged: [RecordDeletion] = []
        for deletion in deletes where deletion.policy == .ifServerRecordUnchanged && deletion.changeTag == nil {
            if RecordID.cloudKitNameProblem(deletion.id.name) != nil {
                resolved.insert(deletion.id)
                result.deleted.insert(deletion.id)
            } else {
                untagged.append(deletion)
            }
        }
        for (zone, names) in Self.groupedByZone(untagged.map { ($0.id, $0.id.name) }) {
            let (found, zoneError) = try await lookup(names, in: zone)
            for name in names {
                let id = RecordID(zone: zone, name: name)
                resolved.insert(id)
                if let zoneError {
                    result.failed[id] = zoneError
                } else if let server = found[id] {
                    result.failed[id] = Self.changedError(server, operation: "delete")
                } else {
                    result.deleted.insert(id)
                }
            }
        }
        if atomically && !result.failed.isEmpty {
            return Self.failedAtomically(result, saves: saves, deletes: deletes)
        }

        var saves = try await uploadingLocalAssets(saves, failed: &result.failed)
        saves = try await rereferencingKeptAssets(saves)
        if atomically && !result.failed.isEmpty {
            return Self.failedAtomically(result, saves: saves, deletes: deletes)
        }
        let written = writingSchema
        var operations: [(id: RecordID, isDelete: Bool, operation: CloudKitWire.RecordOperation)] = []
        for save in saves where result.failed[save.record.id] == nil {
            operations.append(
                (
                    save.record.id, false,
                    try Self.operation(for: save, schema: written.limit, declared: written.declared)
                ))
        }
        for deletion in deletes where !resolved.contains(deletion.id) {
            operations.append((deletion.id, true, Self.operation(for: deletion)))
        }
        for (zone, zoneOperations) in Self.groupedByZone(operations.map { ($0.id, $0) }) {
            try await modify(zoneOperations, in: zone, atomically: atomically, into: &result)
        }
        return result
    }

    /// One `records/modify` in one zone, then one `records/lookup` for the records it reported in conflict.
    private func modify(
        _ operations: [(id: RecordID, isDelete: Bool, operation: CloudKitWire.RecordOperation)],
        in zone: ZoneID, atomically: Bool, into result: inout ModifyRecordsResult
    ) async throws {
        let request = CloudKitWire.RecordsModifyRequest(
            operations: operations.map(\.operation), zone: zone, atomic: atomically)
        let reply: ResponseBody
        let response: CloudKitWire.RecordsResponse
        do {
            reply = try await send(.modifyRecords, body: try encode(request))
            // An error body in a 200 is thrown here, so it is caught as an error status is.
            response = try decode(CloudKitWire.RecordsResponse.self, reply, .modifyRecords)
        } catch let error as CloudError where error.code == .zoneNotFound || error.code == .userDeletedZone {
            // The whole zone is missing: each record fails as it would one by one.
            for operation in operations { result.failed[operation.id] = error }
            return
        }
        // Entries come back in the order of the operations; match by name, which every entry carries.
        var entries: [String: CloudKitWire.RecordEntry] = [:]
        for (index, entry) in response.records.enumerated() {
            if let name = entry.recordName {
                entries[name] = entry
            } else if index < operations.count {
                entries[operations[index].id.name] = entry
            }
        }
        var conflicts: [(id: RecordID, isDelete: Bool)] = []
        for operation in operations {
            let id = operation.id
            guard let entry = entries[id.name] else {
                result.failed[id] = CloudKitErrorMapping.unexpectedResponse(
                    .modifyRecords, reply.data, problem: "no result for the record \(id.name)")
                continue
            }
            if let fields = entry.error {
                let error = CloudKitErrorMapping.error(
                    fields, status: nil, operation: .modifyRecords, sentChangeToken: false)
                switch error.code {
                case .serverRecordChanged:
                    conflicts.append((id, operation.isDelete))
                case .unknownItem where operation.isDelete:
                    result.deleted.insert(id)
                default:
                    result.failed[id] = error
                }
            } else if operation.isDelete {
                result.deleted.insert(id)
            } else {
                do throws(CloudKitWire.FieldProblem) {
                    result.saved[id] = try CloudKitWire.record(from: entry, in: zone)
                } catch {
                    result.failed[id] = CloudKitErrorMapping.unexpectedResponse(
                        .modifyRecords, reply.data, problem: error.description)
                }
            }
        }
        guard !conflicts.isEmpty else { return }
        // CKWS names a conflict but does not send the server's record: fetch it, as its documentation says.
        let found: [RecordID: Record]
        do {
            let lookup = try await lookup(conflicts.map(\.id.name), in: zone)
            if let zoneError = lookup.zoneError {
                for conflict in conflicts { result.failed[conflict.id] = zoneError }
                return
            }
            found = lookup.found
        } catch let error as CloudError {
            // The modify itself went through; only the conflicts stay unresolved, with the lookup's error.
            for conflict in conflicts { result.failed[conflict.id] = error }
            return
        }
        for conflict in conflicts {
            if let server = found[conflict.id] {
                result.failed[conflict.id] = Self.changedError(server, operation: conflict.isDelete ? "delete" : "save")
            } else if conflict.isDelete {
                result.deleted.insert(conflict.id)
            } else {
                result.failed[conflict.id] = CloudError(
                    .unknownItem, "The record \(conflict.id) was in conflict and no longer exists on the server.",
                    serverErrorCode: "CONFLICT")
            }
        }
    }

    // MARK: - Building requests

    /// The CKWS operation for a save.
    ///
    /// | policy | tag | operation |
    /// |---|---|---|
    /// | `SavePolicy.ifServerRecordUnchanged` | set | `update` with the tag (only the sent fields change) |
    /// | `SavePolicy.replaceIfServerRecordUnchanged` | set | `replace` with the tag (fields not sent are removed) |
    /// | either of those | none | `create` (fails if the record exists) |
    /// | `SavePolicy.changedKeys` | any | `forceUpdate` (only the sent fields change; creates if missing) |
    /// | `SavePolicy.allKeys` | any | `forceReplace` (creates if missing) |
    ///
    /// (Apple's `records/modify` reference: `update` "Only the fields you specify are changed", `replace`
    /// "The fields whose values you do not specify are set to null"; both need the `recordChangeTag`.)
    static func operation(for save: RecordSave, schema: CloudSchema?, declared: CloudSchema? = nil) throws
        -> CloudKitWire.RecordOperation
    {
        let type: String
        var tag: ChangeTag?
        switch save.policy {
        case .ifServerRecordUnchanged, .replaceIfServerRecordUnchanged:
            tag = save.record.changeTag
            type = tag == nil ? "create" : save.policy == .ifServerRecordUnchanged ? "update" : "replace"
        case .changedKeys: type = "forceUpdate"
        case .allKeys: type = "forceReplace"
        }
        do {
            let (fields, types) = try CloudKitWire.outgoingFields(
                of: save.record, schema: schema, declared: declared,
                keepsUnsentFields: type == "update" || type == "forceUpdate")
            return CloudKitWire.RecordOperation(
                operationType: type, recordName: save.record.id.name, recordType: save.record.type,
                recordChangeTag: tag?.rawValue, fields: fields, types: types)
        } catch {
            throw CloudError(
                .invalidArguments,
                "The record \(save.record.id) cannot be sent: \(error.description). Nothing was sent.")
        }
    }

    /// The CKWS operation for a delete: `delete` with the tag, or `forceDelete`. (A tagless
    /// delete-if-unchanged is resolved by a lookup instead.)
    static func operation(for deletion: RecordDeletion) -> CloudKitWire.RecordOperation {
        let force = deletion.policy == .force
        return CloudKitWire.RecordOperation(
            operationType: force ? "forceDelete" : "delete", recordName: deletion.id.name,
            recordChangeTag: force ? nil : deletion.changeTag?.rawValue)
    }

    /// Refuses what CKWS cannot carry or would misread, before anything is sent.
    private func validate(_ saves: [RecordSave], _ deletes: [RecordDeletion]) throws {
        let operations = saves.count + deletes.count
        if operations > maximumOperationsPerRequest {
            throw CloudError(
                .limitExceeded,
                "The request has \(operations) operations; CloudKit Web Services takes at most "
                    + "\(maximumOperationsPerRequest). Split it. Nothing was sent.")
        }
        let ids = saves.map(\.record.id) + deletes.map(\.id)
        try Self.requireNames(ids)
        var seen = Set<RecordID>()
        for id in ids where !seen.insert(id).inserted {
            throw CloudError(
                .invalidArguments, "The record \(id) appears more than once in the request. Nothing was sent.")
        }
        if let untyped = saves.first(where: { $0.record.type.isEmpty }) {
            throw CloudError(
                .invalidArguments, "The record \(untyped.record.id) has an empty record type. Nothing was sent.")
        }
    }

    /// Refuses empty zone and record names (CKWS would take them for its default zone, or invent a name).
    static func requireNames(_ ids: [RecordID]) throws(CloudError) {
        try requireZoneNames(ids.map(\.zone))
        if ids.contains(where: { $0.name.isEmpty }) {
            throw CloudError(.invalidArguments, "A record name must not be empty. Nothing was sent.")
        }
    }

    /// Items grouped by zone, zones in the order they first appear, items in their order.
    static func groupedByZone<T>(_ items: [(RecordID, T)]) -> [(ZoneID, [T])] {
        var order: [ZoneID] = []
        var groups: [ZoneID: [T]] = [:]
        for (id, item) in items {
            if groups[id.zone] == nil { order.append(id.zone) }
            groups[id.zone, default: []].append(item)
        }
        return order.map { ($0, groups[$0]!) }
    }

    private static func changedError(_ server: Record, operation: String) -> CloudError {
        CloudError(
            .serverRecordChanged,
            "The \(operation) of \(server.id) met a newer version on the server (tag "
                + "\(server.changeTag?.rawValue ?? "nil")). Merge with the server's record and save again.",
            serverRecord: server, serverErrorCode: "CONFLICT")
    }

    /// An atomic request that failed before anything was sent: the other records fail with it.
    private static func failedAtomically(
        _ result: ModifyRecordsResult, saves: [RecordSave], deletes: [RecordDeletion]
    ) -> ModifyRecordsResult {
        var failed = result.failed
        for id in saves.map(\.record.id) + deletes.map(\.id) where failed[id] == nil {
            failed[id] = CloudError(
                .batchRequestFailed,
                "The atomic request failed because another record in it failed; nothing was applied.")
        }
        return ModifyRecordsResult(failed: failed)
    }

    private nonisolated func record(
        from entry: CloudKitWire.RecordEntry, in zone: ZoneID, _ data: Data, _ operation: CloudKitErrorMapping.Operation
    ) throws -> Record {
        do {
            return try CloudKitWire.record(from: entry, in: zone)
        } catch {
            throw CloudKitErrorMapping.unexpectedResponse(operation, data, problem: error.description)
        }
    }
}

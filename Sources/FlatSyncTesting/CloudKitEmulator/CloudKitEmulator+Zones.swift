import FlatSync
import FlatSyncCloudKit
import Foundation

// zones/list, zones/modify, changes/database and changes/zone, in the wire contract's shapes.

extension CloudKitEmulator {
    /// `zones/list` → `{"zones":[{"zoneID":…,"atomic":true}]}`, always with `_defaultZone`, which every
    /// database has (ckws.md §3), as `"atomic":false`: Apple documents `atomic` as applying to custom zones
    /// only. Emulator behaviour: listing it first, and serving nothing in it (its records and changes
    /// answer `ZONE_NOT_FOUND`; FlatSync never uses it).
    func listZones() async -> HTTPServerReply {
        switch await serve(.listZones, { $0.listZones() }) {
        case .failure(let error):
            return reply(for: error)
        case .success(let zones):
            var names = zones.map(\.name)
            if !names.contains(CloudKitJSON.defaultZoneName) { names.insert(CloudKitJSON.defaultZoneName, at: 0) }
            let entries = names.map {
                ["zoneID": CloudKitJSON.zoneID(ZoneID($0)), "atomic": .bool($0 != CloudKitJSON.defaultZoneName)]
                    as JSONValue
            }
            return Self.ok(["zones": .array(entries)])
        }
    }

    /// One operation of `zones/modify`.
    private struct ZoneOperation: Sendable {
        var create: Bool
        var zone: ZoneID
    }

    /// `zones/modify`: creates and deletes zones in order, each on its own: a zone's failure comes back as
    /// that zone's entry inside the 200 (`{zoneID, serverErrorCode, reason}`, Apple's zone error dictionary)
    /// and the other operations still run, as CloudKit answers it (ckws.md §3, MistKit PR #443). A request
    /// that cannot be read fails whole. The one failure a zone operation can meet here is an empty name,
    /// sent as `BAD_REQUEST` (emulator behaviour: which code CloudKit gives it is not known). Creating a zone
    /// that exists and deleting one that does not succeed (CloudDatabase semantics; what CloudKit answers
    /// is not documented). Counted as `createZones` when the first operation is a create, else
    /// `deleteZones`.
    func modifyZones(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result { () throws(CloudKitJSON.Problem) -> [ZoneOperation] in
            let operations = try CloudKitJSON.array(body["operations"], "operations")
            var parsed: [ZoneOperation] = []
            for (index, raw) in operations.enumerated() {
                let operation = try CloudKitJSON.object(raw, "operations[\(index)]")
                let type = try CloudKitJSON.string(operation["operationType"], "operations[\(index)].operationType")
                guard type == "create" || type == "delete" else {
                    throw CloudKitJSON.Problem("The zone operation type \(type) is not create or delete.")
                }
                let zone = try CloudKitJSON.object(operation["zone"], "operations[\(index)].zone")
                parsed.append(
                    ZoneOperation(
                        create: type == "create",
                        zone: try CloudKitJSON.zoneID(from: zone["zoneID"], "operations[\(index)].zone.zoneID")))
            }
            return parsed
        }.mapError(\.cloudError)
        let firstIsCreate = body["operations"]?.arrayValue?.first?["operationType"] == "create"
        let changed = CloudKitPushHub.ChangedZones()
        let outcome = await serve(firstIsCreate ? .createZones : .deleteZones) {
            (database) throws(CloudError) -> [(ZoneOperation, CloudError?)] in
            try parsed.get().map { operation in
                let existed = database.listZones().contains(operation.zone)
                do throws(CloudError) {
                    if operation.create {
                        try database.createZones([operation.zone])
                    } else {
                        try database.deleteZones([operation.zone])
                    }
                } catch {
                    return (operation, error)
                }
                if existed != operation.create { changed.insert([operation.zone.name]) }
                return (operation, nil)
            }
        }
        push.notify(changed.names)
        switch outcome {
        case .failure(let error):
            return reply(for: error)
        case .success(let results):
            let zones = results.map { operation, error -> JSONValue in
                let zoneID = CloudKitJSON.zoneID(operation.zone)
                if let error {
                    var entry = CloudKitWireError.itemBody(error, guessedCodes: options.guessedErrorCodes)
                    entry["zoneID"] = zoneID
                    return CloudKitJSON.value(entry)
                }
                return operation.create
                    ? ["zoneID": zoneID, "atomic": true]
                    // Emulator behaviour: Apple documents a zone dictionary here, not what marks a delete.
                    : ["zoneID": zoneID, "deleted": true]
            }
            return Self.ok(["zones": .array(zones)])
        }
    }

    /// `changes/database` `{"syncToken"?, "resultsLimit"?}` → `{"zones":[…],"syncToken","moreComing"}`: at
    /// most `resultsLimit` zones (and at most the backing cloud's `CloudDatabase.databaseChangesLimit`), in
    /// name order, deleted ones as `"deleted":true` (as observed live on `zones/changes`, MistKit #444; with
    /// guessed codes also the invented `"purged":true` when the user deleted them). An unusable token fails
    /// the request with BAD_REQUEST (CHANGE_TOKEN_EXPIRED with guessed codes).
    func databaseChanges(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let request = Result { () throws(CloudKitJSON.Problem) -> (token: ChangeToken?, limit: Int?) in
            var resultsLimit: Int?
            if let limit = body["resultsLimit"], limit != .null {
                let value = try CloudKitJSON.int64(limit, "resultsLimit")
                guard value >= 1 else { throw CloudKitJSON.Problem("resultsLimit must be at least 1.") }
                resultsLimit = Int(clamping: value)
            }
            return (try CloudKitJSON.changeToken(from: body["syncToken"], "syncToken"), resultsLimit)
        }.mapError(\.cloudError)
        let outcome = await serve(.fetchDatabaseChanges) { (database) throws(CloudError) in
            let (token, limit) = try request.get()
            return try database.fetchDatabaseChanges(since: token, resultsLimit: limit)
        }
        switch outcome {
        case .failure(let error):
            return reply(for: error)
        case .success(let changes):
            var zones: [JSONValue] = []
            for deletion in changes.deletedZones {
                var entry: CloudKitJSON.Object = ["zoneID": CloudKitJSON.zoneID(deletion.zone), "deleted": true]
                if options.guessedErrorCodes, deletion.reason == .deletedByUser { entry["purged"] = true }
                zones.append(CloudKitJSON.value(entry))
            }
            // A zone deleted and created again since the token is listed twice, deleted first (emulator
            // behaviour: how CloudKit lists such a zone is not known).
            for zone in changes.changedZones {
                zones.append(["zoneID": CloudKitJSON.zoneID(zone)])
            }
            return Self.ok([
                "zones": .array(zones), "syncToken": CloudKitJSON.syncToken(changes.token),
                "moreComing": .bool(changes.moreComing),
            ])
        }
    }

    /// One zone asked for in `changes/zone`.
    private struct ZoneFetch: Sendable {
        var zone: ZoneID
        var token: ChangeToken?
        var resultsLimit: Int
    }

    /// What `changes/zone` found for one zone.
    private enum ZoneFetchResult: Sendable {
        case changes(ZoneID, ZoneChanges)
        case failed(ZoneID, CloudError)
    }

    /// `changes/zone` → 200 `{"zones":[…]}`, one entry per zone asked for: its changed records and tombstones,
    /// `syncToken` and `moreComing`; or, for a missing zone or an unusable token, the zone's `serverErrorCode` and
    /// `reason` (per zone: documented for the response's shape; that an unusable token fails its zone rather than the
    /// request is emulator behaviour). `resultsLimit` (per zone, else the request's, else 200) is clamped to 200; below
    /// 1 fails the request.
    func zoneChanges(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let fetches = Result { () throws(CloudKitJSON.Problem) -> [ZoneFetch] in
            let defaultLimit = try body["resultsLimit"].flatMap { (value) throws(CloudKitJSON.Problem) -> Int64? in
                value == .null ? nil : try CloudKitJSON.int64(value, "resultsLimit")
            }
            var fetches: [ZoneFetch] = []
            for (index, raw) in try CloudKitJSON.array(body["zones"], "zones").enumerated() {
                let entry = try CloudKitJSON.object(raw, "zones[\(index)]")
                let limit = try entry["resultsLimit"].flatMap { (value) throws(CloudKitJSON.Problem) -> Int64? in
                    value == .null ? nil : try CloudKitJSON.int64(value, "zones[\(index)].resultsLimit")
                }
                let wanted = limit ?? defaultLimit ?? Int64(Self.maximumResultsLimit)
                fetches.append(
                    ZoneFetch(
                        zone: try CloudKitJSON.zoneID(from: entry["zoneID"], "zones[\(index)].zoneID"),
                        token: try CloudKitJSON.changeToken(from: entry["syncToken"], "zones[\(index)].syncToken"),
                        resultsLimit: Int(max(-1, min(wanted, Int64(Self.maximumResultsLimit))))))
            }
            return fetches
        }.mapError(\.cloudError)
        let outcome = await serve(.fetchZoneChanges) { (database) throws(CloudError) -> [ZoneFetchResult] in
            var results: [ZoneFetchResult] = []
            for fetch in try fetches.get() {
                do throws(CloudError) {
                    let changes = try database.fetchZoneChanges(
                        in: fetch.zone, since: fetch.token, resultsLimit: fetch.resultsLimit)
                    results.append(.changes(fetch.zone, changes))
                } catch  where [.zoneNotFound, .userDeletedZone, .changeTokenExpired].contains(error.code) {
                    results.append(.failed(fetch.zone, error))
                }
            }
            return results
        }
        switch outcome {
        case .failure(let error):
            return reply(for: error)
        case .success(let results):
            let now = Date()
            let assetLink = assetLinks.link
            return Self.ok { writer in
                writer.object {
                    $0.member("zones") {
                        $0.array(results) { writer, result in
                            switch result {
                            case .changes(let zone, let changes):
                                writer.object {
                                    $0.member("moreComing") { $0.bool(changes.moreComing) }
                                    $0.member("records") {
                                        // The changed records, then the deleted ones: emulator behaviour,
                                        // as is a deletion counting toward `resultsLimit` (CloudKit's
                                        // order within a page and its count are not known: ckws-client.md
                                        // §6). A client must not depend on either.
                                        let changed = changes.changedRecords
                                        let deleted = changes.deletedRecordIDs
                                        $0.array(0..<(changed.count + deleted.count)) { writer, index in
                                            if index < changed.count {
                                                CloudKitRecordJSON.write(
                                                    changed[index], userRecordName: options.userRecordName,
                                                    now: now, assetLink: assetLink, to: &writer)
                                            } else {
                                                CloudKitRecordJSON.writeTombstone(
                                                    deleted[index - changed.count].name, to: &writer)
                                            }
                                        }
                                    }
                                    $0.member("syncToken") { $0.value(CloudKitJSON.syncToken(changes.token)) }
                                    $0.member("zoneID") { CloudKitJSON.write(zoneID: zone, to: &$0) }
                                }
                            case .failed(let zone, let error):
                                var entry = CloudKitWireError.itemBody(error, guessedCodes: options.guessedErrorCodes)
                                entry["zoneID"] = CloudKitJSON.zoneID(zone)
                                writer.value(CloudKitJSON.value(entry), sortingKeys: true)
                            }
                        }
                    }
                }
            }
        }
    }
}

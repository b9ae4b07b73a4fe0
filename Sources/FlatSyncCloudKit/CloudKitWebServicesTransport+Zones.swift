import FlatSync
import Foundation

extension CloudKitWebServicesTransport {
    /// The zone CloudKit lists in every database; FlatSync never uses it.
    static let defaultZoneName = "_defaultZone"

    /// The zones that exist, from `zones/list` (`GET`), without CloudKit's `_defaultZone`, which FlatSync never
    /// uses.
    public func listZones() async throws -> [ZoneID] {
        let reply = try await send(.listZones, method: "GET", body: nil)
        let response = try decode(CloudKitWire.ZonesResponse.self, reply, .listZones)
        var zones: [ZoneID] = []
        for entry in response.zones {
            // A zone's own error (documented as an entry of the list) is that zone's, not the list's. Missing,
            // it is left out, so that it is created; any other error counts it as existing, so that using it
            // meets the error (left out, it would be created, which counts as done when it exists, and its
            // local data queued again).
            if let error = entry.error {
                guard entry.zoneID != nil else {
                    throw CloudKitErrorMapping.error(error, status: nil, operation: .listZones, sentChangeToken: false)
                }
                if error.serverErrorCode == "ZONE_NOT_FOUND" { continue }
            }
            guard let name = entry.zoneID?.zoneName else {
                throw CloudKitErrorMapping.unexpectedResponse(.listZones, reply.data, problem: "a zone has no zoneID")
            }
            if name != Self.defaultZoneName, entry.deleted != true { zones.append(ZoneID(name)) }
        }
        return zones.sorted()
    }

    /// Creates zones in one `zones/modify`; a zone that exists already counts as created.
    public func createZones(_ zones: [ZoneID]) async throws {
        try await modifyZones(zones, operationType: "create")
    }

    /// Deletes zones and their records in one `zones/modify`; a zone that does not exist counts as deleted.
    public func deleteZones(_ zones: [ZoneID]) async throws {
        try await modifyZones(zones, operationType: "delete")
    }

    /// Creates or deletes zones in one `zones/modify`. Creating a zone that exists and deleting one that
    /// does not count as done (what CloudKit answers for them is not documented; the codes below are
    /// the likely ones).
    private func modifyZones(_ zones: [ZoneID], operationType: String) async throws {
        try Self.requireZoneNames(zones)
        guard !zones.isEmpty else { return }
        let request = CloudKitWire.ZonesModifyRequest(operationType: operationType, zones: zones)
        let reply = try await send(.modifyZones, body: try encode(request))
        let response = try decode(CloudKitWire.ZonesResponse.self, reply, .modifyZones)
        let harmless: Set<String> =
            operationType == "create" ? ["EXISTS", "CONFLICT"] : ["ZONE_NOT_FOUND", "NOT_FOUND"]
        for entry in response.zones {
            guard let error = entry.error, !harmless.contains(error.serverErrorCode ?? "") else { continue }
            throw CloudKitErrorMapping.error(error, status: nil, operation: .modifyZones, sentChangeToken: false)
        }
    }

    /// The zones that changed or were deleted since `token`, from one page of `changes/database`.
    public func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        let request = CloudKitWire.DatabaseChangesRequest(syncToken: token.map(Self.syncToken))
        let reply = try await send(.databaseChanges, body: try encode(request), sentChangeToken: token != nil)
        let response = try decode(CloudKitWire.DatabaseChangesResponse.self, reply, .databaseChanges)
        guard let syncToken = response.syncToken else {
            throw CloudKitErrorMapping.unexpectedResponse(.databaseChanges, reply.data, problem: "no syncToken")
        }
        // Asked from no token, the answer names every zone there is, and one it leaves out is taken as
        // deleted: read as empty, an answer without the list would say every zone is gone (as `zones/list`).
        guard token != nil || response.listsZones else {
            throw CloudKitErrorMapping.unexpectedResponse(
                .databaseChanges, reply.data, problem: "the key zones is missing from a listing from no token")
        }
        var changed: [ZoneID] = []
        var deleted: [ZoneDeletion] = []
        for entry in response.zones {
            // A zone's own error (documented as an entry of the list) is that zone's: it is named changed, so
            // that its own `changes/zone` fetch meets the error, and the other zones' changes still come.
            if let error = entry.error, entry.zoneID?.zoneName == nil {
                throw CloudKitErrorMapping.error(
                    error, status: nil, operation: .databaseChanges, sentChangeToken: token != nil)
            }
            guard let name = entry.zoneID?.zoneName else {
                throw CloudKitErrorMapping.unexpectedResponse(
                    .databaseChanges, reply.data, problem: "a zone has no zoneID")
            }
            guard name != Self.defaultZoneName else { continue }
            if entry.error == nil, entry.deleted == true {
                // CloudKit documents no flag for a zone the user deleted; `purged` is the emulator's.
                deleted.append(
                    ZoneDeletion(zone: ZoneID(name), reason: entry.purged == true ? .deletedByUser : .unknown))
            } else if !changed.contains(ZoneID(name)) {
                changed.append(ZoneID(name))
            }
        }
        return DatabaseChanges(
            changedZones: changed, deletedZones: deleted, token: Self.changeToken(syncToken),
            moreComing: response.moreComing ?? false)
    }

    // MARK: - Helpers

    /// A change token's bytes as the `syncToken` string they came from.
    static func syncToken(_ token: ChangeToken) -> String {
        String(decoding: token.data, as: UTF8.self)
    }

    /// A `syncToken` string kept as a change token's bytes.
    static func changeToken(_ syncToken: String) -> ChangeToken {
        ChangeToken(data: Data(syncToken.utf8))
    }

    /// Refuses empty zone names: CKWS would take an empty name for its default zone.
    static func requireZoneNames(_ zones: some Sequence<ZoneID>) throws(CloudError) {
        if zones.contains(where: { $0.name.isEmpty }) {
            throw CloudError(.invalidArguments, "A zone name must not be empty. Nothing was sent.")
        }
    }
}

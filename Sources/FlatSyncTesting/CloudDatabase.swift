import FlatSync

/// A CloudKit-style private database as a plain value: the reference semantics of FlatSync's test
/// clouds, with no I/O and no clock.
///
/// ``InMemoryCloud`` keeps one in an actor; ``DirectoryCloud`` decodes one from a file for every
/// request, applies the request and writes it back. Both call the same methods, so they behave the
/// same by construction, and the conformance suite checks it.
///
/// What it models:
/// - Zones, each with its records, a change sequence (every save or delete of a record is one step),
///   and a generation that changes when the zone is deleted and created again.
/// - Server-assigned change tags, unique for every save, and the save and delete policies of
///   `SavePolicy` and `DeletePolicy`.
/// - Change tokens naming a position in a zone's history (or the database's); fetching since a token
///   returns *net* changes (see ``fetchZoneChanges(in:since:resultsLimit:)``).
/// - Compaction: with a ``changeHistoryLimit``, a zone keeps its last `limit` changes and older
///   tokens expire. Tokens also expire when their zone is deleted, when an administrator expires them,
///   and when they were minted by another server (another ``serverID``: another `InMemoryCloud`, another
///   `DirectoryCloud` directory) or are not tokens at all: all of these fail with
///   `CloudError.Code.changeTokenExpired`, because the remedy is the same (fetch
///   again from `nil`) and a real server cannot tell them apart either.
/// - Request limits: at most ``maximumOperationsPerRequest`` operations, records of at most
///   ``maximumRecordSize`` bytes.
/// - References: each stays in its record's zone, a `deleteSelf` reference deletes its record with its
///   target (cascading), a `validate` one needs its target, and one record has at most
///   ``maximumOwningReferencesPerRecord`` owners (see ``modifyRecords(saving:deleting:atomically:)``).
/// - ``CloudCounters`` and a ``FaultPlan``, applied by ``perform(_:_:)``.
///
/// The request methods (``modifyRecords(saving:deleting:atomically:)`` and the others) neither count the
/// request nor inject faults; wrap them in ``perform(_:_:)`` to serve a request as a server would:
///
/// ```swift
/// var database = CloudDatabase()
/// let result = try database.perform(.modifyRecords) {
///     try $0.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
/// }
/// ```
package struct CloudDatabase: Sendable, Codable, Equatable {
    /// The most saves plus deletes one modify request may carry, as in CloudKit.
    package static let maximumOperationsPerRequest = 400
    /// The largest record accepted, in bytes of `Record.approximateSize`: CloudKit's "1 MB" read as 1 MiB
    /// (no page says which). The engine refuses past 10⁶ bytes on the device, so what reaches a test cloud
    /// over its limit is a merge that grew, as it could on CloudKit.
    package static let maximumRecordSize = 1_048_576

    /// Identifies this server. Tokens carry it, so a token from another server is refused.
    package let serverID: UInt64
    /// How many record changes each zone keeps for fetching since a token; `nil` keeps everything.
    package private(set) var changeHistoryLimit: Int?
    /// What the server has served.
    package internal(set) var counters = CloudCounters()
    /// The faults still to inject.
    package internal(set) var faultPlan = FaultPlan.none
    /// The random fault generator's state, persisted with the plan so that runs repeat for a seed.
    var faultGenerator: SeededRandomNumberGenerator?
    /// Every zone ever created, by name; deleted zones stay to remember their generation and history.
    var zones: [String: ZoneState] = [:]
    /// The database's change sequence: one step per zone created, deleted or changed.
    var databaseSequence: UInt64 = 0
    /// Bumped by ``expireAllChangeTokens()``; database tokens carry it.
    var databaseEpoch: UInt64 = 0
    /// The number of change tags handed out.
    var tagCounter: UInt64 = 0
    /// The schema of a production environment, whose saves must keep to it; `nil` (the default) accepts any
    /// record, as a development environment does, which adds record types and fields as records arrive.
    package private(set) var productionSchema: CloudSchema?
    /// In development (no ``productionSchema``), the types saves have given fields so far: CloudKit's
    /// development environment creates a field when a record first carries it and refuses a later value of
    /// another type ("Invalid value, expected type TIMESTAMP.", MistKit #375; the environment of that capture
    /// is not stated, and that development keeps the type is an inference, ckws.md). An empty list, whose
    /// element type the value does not say, and a kept value of a type FlatSync does not read fix nothing.
    /// Optional for state files written before it was kept.
    package internal(set) var developmentSchema: CloudSchema?
    /// The most zones one answer to ``fetchDatabaseChanges(since:resultsLimit:)`` holds: 200 unless set
    /// (``setDatabaseChangesLimit(_:)``). 200 is the documented maximum of a `resultsLimit`; how many zones
    /// CloudKit puts in one `changes/database` answer is not documented (ckws.md). Optional for state files
    /// written before it was kept.
    var storedDatabaseChangesLimit: Int?
    /// The ``FaultEffect/recordError(_:retryAfter:)`` fault of the request being served, which its modify
    /// request uses up; nil between requests, so it is never stored.
    var recordFault: FaultEffect?
    /// The record ``recordFault`` fails, when its scripted fault names one (the first record otherwise);
    /// nil between requests, like it.
    var recordFaultTarget: RecordID?
    /// Whether a zone fetch from no token reports deletions too (see ``reportsDeletionsFromNoToken``).
    /// Optional for state files written before it was kept.
    var storedReportsDeletionsFromNoToken: Bool?
    /// Whether a deleted zone is listed as changed rather than deleted (see
    /// ``reportsDeletedZonesAsChanged``). Optional for state files written before it was kept.
    var storedReportsDeletedZonesAsChanged: Bool?
    /// The bytes uploads stored, by file checksum (see `CloudDatabase+Assets.swift`). Optional for state files
    /// written before assets were kept.
    var assetUploads: [String: StoredAsset]?
    /// The zone subscriptions, by ID (see `CloudDatabase+Subscriptions.swift`). Optional because state
    /// files written before subscriptions were kept have no such key, and they must still open.
    var subscriptionsByID: [String: CloudSubscription]?

    /// Creates an empty database.
    ///
    /// - Parameters:
    ///   - changeHistoryLimit: how many record changes each zone keeps (`nil`: all); must not be negative.
    ///   - faultPlan: faults to inject into requests served through ``perform(_:_:)``.
    ///   - serverID: this server's identity, random unless a test needs a fixed one.
    package init(
        changeHistoryLimit: Int? = nil, faultPlan: FaultPlan = .none, serverID: UInt64 = .random(in: .min ... .max)
    ) {
        precondition((changeHistoryLimit ?? 0) >= 0, "changeHistoryLimit must not be negative")
        self.serverID = serverID
        self.changeHistoryLimit = changeHistoryLimit
        setFaultPlan(faultPlan)
    }

    // MARK: - Zones

    /// The zones that exist, sorted by name.
    package func listZones() -> [ZoneID] {
        zones.values.filter(\.exists).map(\.id).sorted()
    }

    /// Creates the zones that do not exist; existing zones are left as they are. A zone deleted
    /// earlier comes back empty, in a new generation, so tokens minted before its deletion stay expired.
    ///
    /// - Throws: `CloudError.Code.invalidArguments` for an empty zone name (nothing is
    ///   created); the error of a ``FaultEffect/recordError(_:retryAfter:)`` fault for the first zone,
    ///   after the others are created.
    package mutating func createZones(_ ids: [ZoneID]) throws(CloudError) {
        try Self.validateZoneNames(ids)
        let refused = takeZoneFault(ids)
        for id in ids where id != refused?.zone && zones[id.name]?.exists != true {
            databaseSequence += 1
            if zones[id.name] != nil {
                zones[id.name]!.recreate(at: databaseSequence)
            } else {
                zones[id.name] = ZoneState(id: id, createdAt: databaseSequence)
            }
        }
        if let refused { throw refused.error }
    }

    /// Deletes zones and their records, as an app would. Later requests for them fail with
    /// `CloudError.Code.zoneNotFound`. Deleting a zone that does not exist does nothing
    /// (a zone the user deleted stays marked as deleted by the user).
    ///
    /// - Throws: `CloudError.Code.invalidArguments` for an empty zone name (nothing is
    ///   deleted); the error of a ``FaultEffect/recordError(_:retryAfter:)`` fault for the first zone,
    ///   after the others are deleted.
    package mutating func deleteZones(_ ids: [ZoneID]) throws(CloudError) {
        try Self.validateZoneNames(ids)
        let refused = takeZoneFault(ids)
        for id in ids where id != refused?.zone && zones[id.name]?.exists == true {
            deleteZone(id, byUser: false)
        }
        if let refused { throw refused.error }
    }

    /// The failure a ``FaultEffect/recordError(_:retryAfter:)`` fault of this request gives its first zone,
    /// or nil.
    private mutating func takeZoneFault(_ ids: [ZoneID]) -> (zone: ZoneID, error: CloudError)? {
        guard let first = ids.first, let error = takeItemFault(for: "the zone \(first.name)") else { return nil }
        return (first, error)
    }

    // MARK: - Administration

    /// Expires every change token minted so far, zone and database tokens alike.
    package mutating func expireAllChangeTokens() {
        databaseEpoch += 1
        for name in zones.keys {
            zones[name]!.epoch += 1
        }
    }

    /// Expires the change tokens minted so far for `zone`. Does nothing for a zone never created.
    package mutating func expireChangeTokens(in zone: ZoneID) {
        zones[zone.name]?.epoch += 1
    }

    /// Deletes a zone as the user would: requests for it fail with
    /// `CloudError.Code.userDeletedZone` until it is created again.
    ///
    /// - Throws: `CloudError.Code.zoneNotFound` if the zone does not exist.
    package mutating func deleteZoneAsUser(_ zone: ZoneID) throws(CloudError) {
        guard zones[zone.name]?.exists == true else {
            throw CloudError(.zoneNotFound, "There is no zone \(zone) to delete.")
        }
        deleteZone(zone, byUser: true)
    }

    /// Replaces the fault plan and seeds its random generator afresh.
    package mutating func setFaultPlan(_ plan: FaultPlan) {
        faultPlan = plan
        faultGenerator = plan.random.map { SeededRandomNumberGenerator(seed: $0.seed) }
    }

    /// Makes the database a production environment deployed with `schema` (`nil`: a development one).
    ///
    /// In production, CloudKit refuses, record by record, a save whose record type or field the deployed
    /// schema lacks, or whose value is of another type: `BAD_REQUEST` "Cannot create or modify field 'X' in
    /// record 'Y' in production schema" (observed live: caiyue1993/IceCream#164, yattee/yattee#979; "Cannot
    /// create new type …" for a type, TableProApp/TablePro#2226; "Invalid value, expected type …" for a value,
    /// MistKit #375). The wording is what those captures show; CloudKit documents none. Such a save fails with
    /// `CloudError.Code.invalidArguments` and that text, and the rest of the request goes on.
    package mutating func setProductionSchema(_ schema: CloudSchema?) {
        productionSchema = schema
    }

    /// The most zones one answer to ``fetchDatabaseChanges(since:resultsLimit:)`` holds (200 by default):
    /// more, and it says more are coming.
    package var databaseChangesLimit: Int { storedDatabaseChangesLimit ?? 200 }

    /// Sets ``databaseChangesLimit``, so that a test with a few zones sees the database's changes paged.
    package mutating func setDatabaseChangesLimit(_ limit: Int) {
        precondition(limit >= 1, "databaseChangesLimit must be at least 1")
        storedDatabaseChangesLimit = limit
    }

    /// Whether ``fetchZoneChanges(in:since:resultsLimit:)`` from no token reports the deletions the zone's
    /// history still holds (those that fit in its first page), besides its records. False unless set.
    ///
    /// Which CloudKit does is not known for CloudKit Web Services. For the native API, Apple's developer
    /// technical support says a fetch from no token does return deletions (of records "created on the
    /// device that is doing the fetch", or deleted concurrently; developer forums thread 813286, in
    /// ckws-client.md), so a client must take either answer: setting this has the emulator give the other.
    package var reportsDeletionsFromNoToken: Bool { storedReportsDeletionsFromNoToken ?? false }

    /// Sets ``reportsDeletionsFromNoToken``.
    package mutating func setReportsDeletionsFromNoToken(_ reports: Bool) {
        storedReportsDeletionsFromNoToken = reports
    }

    /// Whether ``fetchDatabaseChanges(since:resultsLimit:)`` lists a zone deleted since the token as
    /// *changed*, and not as deleted. False unless set.
    ///
    /// CloudKit was seen to do so, now and then, after a zone was deleted, again on every fetch: the zone
    /// is listed as changed, and fetching it fails as not found (native API; mentrena/SyncKit PR #99 and
    /// #103, in ckws-client.md). Whether CloudKit Web Services does is not known; setting this has the
    /// emulator give that answer, so a client is tested against it.
    package var reportsDeletedZonesAsChanged: Bool { storedReportsDeletedZonesAsChanged ?? false }

    /// Sets ``reportsDeletedZonesAsChanged``.
    package mutating func setReportsDeletedZonesAsChanged(_ reports: Bool) {
        storedReportsDeletedZonesAsChanged = reports
    }

    /// Changes how many record changes each zone keeps, compacting at once if the limit shrank.
    package mutating func setChangeHistoryLimit(_ limit: Int?) {
        precondition((limit ?? 0) >= 0, "changeHistoryLimit must not be negative")
        changeHistoryLimit = limit
        for name in zones.keys where zones[name]!.exists {
            zones[name]!.compact(keeping: limit)
        }
    }

    /// Sets every counter back to zero.
    package mutating func resetCounters() {
        counters = CloudCounters()
    }

    /// The records in `zone`, sorted by name; empty if the zone does not exist.
    package func records(in zone: ZoneID) -> [Record] {
        guard let state = zones[zone.name], state.exists else { return [] }
        return state.slots.keys.sorted().compactMap { state.slots[$0]!.record }
    }

    // MARK: - Helpers

    /// Removes a zone's records and notes the deletion in the database history.
    private mutating func deleteZone(_ id: ZoneID, byUser: Bool) {
        databaseSequence += 1
        zones[id.name]!.delete(at: databaseSequence, byUser: byUser)
        removeSubscriptions(of: id)
    }

    /// The error for a request about a zone that does not exist now.
    static func missingZoneError(_ id: ZoneID, _ state: ZoneState?) -> CloudError {
        if state?.deletedByUser == true {
            return CloudError(
                .userDeletedZone,
                "The user deleted the zone \(id); its data is gone. Create the zone again to use it."
            )
        }
        return CloudError(.zoneNotFound, "The zone \(id) does not exist. Create it first.")
    }

    /// Throws the error for `id` unless the zone exists.
    func requireZone(_ id: ZoneID) throws(CloudError) {
        let state = zones[id.name]
        guard state?.exists == true else { throw Self.missingZoneError(id, state) }
    }

    static func validateZoneNames(_ ids: [ZoneID]) throws(CloudError) {
        if ids.contains(where: { $0.name.isEmpty }) {
            throw CloudError(.invalidArguments, "A zone name must not be empty.")
        }
    }

    /// A change tag never handed out before by this server.
    mutating func nextChangeTag() -> ChangeTag {
        tagCounter += 1
        // The server ID keeps tags from a server that was wiped and started over from matching.
        return ChangeTag("\(tagCounter).\(String(serverID >> 32, radix: 16))")
    }
}

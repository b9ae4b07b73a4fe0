import FlatSync
import Foundation

/// A CloudKit-style server in memory: the reference semantics of `CloudTransport`, for tests, the
/// demo tour and benchmarks.
///
/// It keeps a `CloudDatabase` (which holds every rule: change tags, save and delete policies, net
/// changes since a token, paging, token expiry, request limits, counters and faults) and serves one
/// request at a time. ``CloudAdministration`` lets a test reach behind the client's back: expire
/// tokens, delete a zone as the user, inject faults, read counters and records.
///
/// # Usage
///
/// ```swift
/// let cloud = InMemoryCloud(changeHistoryLimit: 1_000)
/// try await cloud.createZones([.readingList])
/// let record = Record(id: RecordID(zone: .readingList, name: "rl-42"), type: "ReadingListEntry")
/// let result = try await cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
///
/// // The next two modify requests fail as if the zone were busy, then requests succeed again.
/// await cloud.setFaultPlan(.failNext(2, .modifyRecords, with: .zoneBusy, retryAfter: .seconds(2)))
///
/// // What the client sent, as the server counted it.
/// let counters = await cloud.counters()
/// #expect(counters.recordsSaved == 1)
/// ```
///
/// With `latency`, every request first sleeps on the injected clock, so a test clock controls it.
public actor InMemoryCloud: CloudTransport, CloudDatabaseServing {
    private var database: CloudDatabase
    private var latency: Duration?
    private let clock: any Clock<Duration>

    /// At most `CloudDatabase.maximumOperationsPerRequest` (400) operations per modify request.
    public nonisolated var maximumOperationsPerRequest: Int { CloudDatabase.maximumOperationsPerRequest }

    /// Nothing to prepare: the cloud stores any record (a production schema, when set, refuses as CloudKit
    /// does, request by request).
    public nonisolated func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) {}

    /// Creates an empty server.
    ///
    /// - Parameters:
    ///   - changeHistoryLimit: how many record changes each zone keeps (`nil`: all); older tokens expire.
    ///   - faultPlan: faults to inject into requests.
    ///   - latency: how long every request takes, slept on `clock` before the request is served.
    ///   - clock: the clock latency is slept on.
    public init(
        changeHistoryLimit: Int? = nil,
        faultPlan: FaultPlan = .none,
        latency: Duration? = nil,
        clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.database = CloudDatabase(changeHistoryLimit: changeHistoryLimit, faultPlan: faultPlan)
        self.latency = latency
        self.clock = clock
    }

    /// Changes the latency of later requests (`nil`: none).
    public func setLatency(_ latency: Duration?) {
        self.latency = latency
    }

    /// A copy of the server's whole state, for assertions that the administration calls do not cover.
    package var snapshot: CloudDatabase { database }

    /// Serves one request: waits out the latency, then lets the database count it, fault it or apply it.
    package func serve<Response: Sendable>(
        _ kind: RequestKind,
        records: [RecordID],
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> Response
    ) async throws -> Response {
        if let latency {
            // Cancellation during the wait surfaces as CancellationError, before the server saw anything.
            try await clock.sleep(for: latency)
        }
        return try database.perform(kind, records: records, body)
    }

    // MARK: - CloudTransport

    /// The zones that exist. Served by the cloud's `CloudDatabase`: counted in ``counters()`` and failed as the
    /// ``FaultPlan`` says.
    public func listZones() async throws -> [ZoneID] {
        try await serve(.listZones) { $0.listZones() }
    }

    /// Creates zones; creating a zone that exists is not an error. Served by the cloud's `CloudDatabase`:
    /// counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func createZones(_ zones: [ZoneID]) async throws {
        try await serve(.createZones) { (database) throws(CloudError) in try database.createZones(zones) }
    }

    /// Deletes zones and every record in them, as an app would (not as the user). Served by the cloud's
    /// `CloudDatabase`: counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func deleteZones(_ zones: [ZoneID]) async throws {
        try await serve(.deleteZones) { (database) throws(CloudError) in try database.deleteZones(zones) }
    }

    /// The zones that changed or were deleted since `token` (`nil`: since the beginning). Served by the cloud's
    /// `CloudDatabase`: counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        try await serve(.fetchDatabaseChanges) { (database) throws(CloudError) in
            try database.fetchDatabaseChanges(since: token)
        }
    }

    /// The net changes to one zone since `token` (`nil`: everything), at most `resultsLimit` records and deletions
    /// per call. Served by the cloud's `CloudDatabase`: counted in ``counters()`` and failed as the
    /// ``FaultPlan`` says.
    public func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws
        -> ZoneChanges
    {
        try await serve(.fetchZoneChanges) { (database) throws(CloudError) in
            try database.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
        }
    }

    /// Saves and deletes records, returning a result for each one (all or none when `atomically`). Served by the
    /// cloud's `CloudDatabase`: counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
        async throws -> ModifyRecordsResult
    {
        try await CloudDatabase.modifyUploading(saving: saves, deleting: deletes, atomically: atomically) { body in
            try await serve(.modifyRecords, records: saves.map(\.record.id) + deletes.map(\.id), body)
        }
    }

    /// The records with these IDs that exist; IDs that do not exist are left out of the result. Served by the
    /// cloud's `CloudDatabase`: counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] {
        try await serve(.lookupRecords) { (database) throws(CloudError) in try database.lookupRecords(ids) }
    }

    /// The bytes of an asset an upload stored (see ``uploadAsset(_:)``). Served by the cloud's `CloudDatabase`:
    /// counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func downloadAsset(_ asset: CloudAsset) async throws -> Data {
        try await serve(.downloadAsset) { (database) throws(CloudError) in try database.assetData(asset) }
    }

    /// Makes sure each zone has a zone subscription, created where none exists. Served by the cloud's
    /// `CloudDatabase`: counted in ``counters()`` and failed as the ``FaultPlan`` says.
    public func subscribeToChanges(in zones: [ZoneID]) async throws {
        try await serve(.modifySubscriptions) { (database) throws(CloudError) in
            try database.subscribeToChanges(in: zones)
        }
    }

    // MARK: - CloudAdministration

    /// Makes every change token minted so far fail with `CloudError.Code.changeTokenExpired`. Not counted and
    /// never faulted.
    public func expireAllChangeTokens() {
        database.expireAllChangeTokens()
    }

    /// Makes the change tokens minted so far for one zone fail with `CloudError.Code.changeTokenExpired`. Not
    /// counted and never faulted.
    public func expireChangeTokens(in zone: ZoneID) {
        database.expireChangeTokens(in: zone)
    }

    /// Deletes a zone and its records as the user would from Settings. Not counted and never faulted.
    public func deleteZoneAsUser(_ zone: ZoneID) throws(CloudError) {
        try database.deleteZoneAsUser(zone)
    }

    /// Replaces the fault plan (and restarts its random generator from the plan's seed). Not counted and never
    /// faulted.
    public func setFaultPlan(_ plan: FaultPlan) {
        database.setFaultPlan(plan)
    }

    /// The fault plan as it stands: scripted faults already used up are gone. Not counted and never faulted.
    public func faultPlan() -> FaultPlan {
        database.faultPlan
    }

    /// Sets how many record changes each zone keeps (`nil`: all). Not counted and never faulted.
    public func setChangeHistoryLimit(_ limit: Int?) {
        database.setChangeHistoryLimit(limit)
    }

    /// Sets the most zones one answer to a database fetch holds (the rest come in the next pages, as
    /// `moreComing` says); over HTTP, the emulator backed by this cloud too.
    public func setDatabaseChangesLimit(_ limit: Int) {
        database.setDatabaseChangesLimit(limit)
    }

    /// Sets whether a zone fetch from no token reports deletions too (CloudKit does not document whether
    /// it does); over HTTP, the emulator backed by this cloud too.
    public func setReportsDeletionsFromNoToken(_ reports: Bool) {
        database.setReportsDeletionsFromNoToken(reports)
    }

    /// Lists a zone deleted since a token as changed rather than deleted, as CloudKit was seen to; over
    /// HTTP, the emulator backed by this cloud too.
    public func setReportsDeletedZonesAsChanged(_ reports: Bool) {
        database.setReportsDeletedZonesAsChanged(reports)
    }

    /// Makes the server a production environment deployed with `schema` (`nil`: a development one). Not counted
    /// and never faulted.
    public func setProductionSchema(_ schema: CloudSchema?) {
        database.setProductionSchema(schema)
    }

    /// The production schema the server enforces, or `nil` in development. Not counted and never faulted.
    public func productionSchema() -> CloudSchema? {
        database.productionSchema
    }

    /// What the server has served since it was created or the counters were reset. Not counted and never faulted.
    public func counters() -> CloudCounters {
        database.counters
    }

    /// Sets every counter back to zero. Not counted and never faulted.
    public func resetCounters() {
        database.resetCounters()
    }

    /// Stores bytes as another client's upload would and returns the field value its save carries to attach
    /// them. Not counted and never faulted.
    public func uploadAsset(_ data: Data) -> FieldValue {
        database.uploadAsset(data)
    }

    /// The records the server holds in `zone`, sorted by name, with their change tags. Not counted and never
    /// faulted.
    public func records(in zone: ZoneID) -> [Record] {
        database.records(in: zone)
    }

    /// The zone subscriptions the server holds, sorted by ID. Not counted and never faulted.
    public func subscriptions() -> [CloudSubscription] {
        database.subscriptions()
    }
}

import FlatSync
import Foundation

/// One device's network, switched on and off by the test: a `CloudTransport` that forwards to another
/// while online and, while offline, refuses every request unsent.
///
/// A ``FaultPlan`` is the cloud's, so it fails the requests of every device on it. Give each device its own
/// switch over one shared cloud to take one device offline while the others sync:
///
/// ```swift
/// let cloud = InMemoryCloud()
/// let a = SwitchableTransport(cloud)
/// await a.setOnline(false)  // A's requests fail; B, on `cloud` directly, syncs
/// ```
///
/// Offline, a request fails with `CloudError.Code.networkUnavailable`, as a device without a connection
/// does: nothing reaches the server, so the engine waits for the network and keeps its changes. Requests
/// already on their way when the switch goes off complete. Calls that send nothing
/// (`maximumOperationsPerRequest`, `prepareToWrite(_:)`) are forwarded either way.
public actor SwitchableTransport: CloudTransport {
    private let base: any CloudTransport

    /// Whether requests reach the wrapped transport.
    public private(set) var isOnline: Bool

    /// How many requests were refused while offline, so a test can tell that the device tried.
    public private(set) var refusedRequestCount = 0

    /// The wrapped transport's limit: offline or not, the engine splits its requests the same way.
    public nonisolated var maximumOperationsPerRequest: Int { base.maximumOperationsPerRequest }

    /// Wraps `base`, online unless `online` says otherwise.
    public init(_ base: any CloudTransport, online: Bool = true) {
        self.base = base
        self.isOnline = online
    }

    /// Switches the network on or off for later requests. Switching it back on does not tell a started
    /// context: call `SyncContext.networkDidBecomeAvailable()` then, as an app does.
    public func setOnline(_ online: Bool) {
        isOnline = online
    }

    /// Throws, counting the refusal, unless online.
    private func send(_ kind: RequestKind) throws(CloudError) {
        guard !isOnline else { return }
        refusedRequestCount += 1
        throw CloudError(.networkUnavailable, "The network is switched off; the \(kind.rawValue) request was not sent.")
    }

    // MARK: - CloudTransport

    /// The zones that exist, from the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func listZones() async throws -> [ZoneID] {
        try send(.listZones)
        return try await base.listZones()
    }

    /// Creates zones through the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func createZones(_ zones: [ZoneID]) async throws {
        try send(.createZones)
        try await base.createZones(zones)
    }

    /// Deletes zones through the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func deleteZones(_ zones: [ZoneID]) async throws {
        try send(.deleteZones)
        try await base.deleteZones(zones)
    }

    /// The zones changed since `token`, from the wrapped transport; offline,
    /// `CloudError.Code.networkUnavailable`.
    public func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        try send(.fetchDatabaseChanges)
        return try await base.fetchDatabaseChanges(since: token)
    }

    /// A zone's changes since `token`, from the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws
        -> ZoneChanges
    {
        try send(.fetchZoneChanges)
        return try await base.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
    }

    /// Saves and deletes records through the wrapped transport; offline, `CloudError.Code.networkUnavailable`
    /// with nothing applied.
    public func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
        async throws -> ModifyRecordsResult
    {
        try send(.modifyRecords)
        return try await base.modifyRecords(saving: saves, deleting: deletes, atomically: atomically)
    }

    /// Looks records up through the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] {
        try send(.lookupRecords)
        return try await base.lookupRecords(ids)
    }

    /// Downloads an asset through the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func downloadAsset(_ asset: CloudAsset) async throws -> Data {
        try send(.downloadAsset)
        return try await base.downloadAsset(asset)
    }

    /// Subscribes to zones through the wrapped transport; offline, `CloudError.Code.networkUnavailable`.
    public func subscribeToChanges(in zones: [ZoneID]) async throws {
        try send(.modifySubscriptions)
        try await base.subscribeToChanges(in: zones)
    }

    /// Prepares the wrapped transport, online or not: it sends nothing, and a context calls it when it
    /// opens, which a device does offline too.
    public nonisolated func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) {
        try base.prepareToWrite(schema)
    }
}

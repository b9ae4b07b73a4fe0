import FlatSync
import FlatSyncTesting
import Foundation
import Synchronization

/// One device of the tour: a ``SyncContext`` in its own directory, reaching the shared cloud through its
/// own network switch, with the engine's events collected for the end of the tour.
struct TourDevice {
    let name: String
    let context: SyncContext
    let network: TourNetwork
    /// Collects the device's events until its context closes.
    private let eventLog: Task<[SyncEvent], Never>

    /// Opens and starts the device, and waits until its first sync is done.
    init(name: String, directory: URL, cloud: InMemoryCloud, configuration: SyncContext.Configuration) async throws {
        self.name = name
        network = TourNetwork(cloud: cloud, device: name)
        var configuration = configuration
        configuration.deviceID = name
        configuration.recordTypes = ArticleNote.registered
        context = try await SyncContext.open(
            directory: directory.appendingPathComponent(name),
            account: CloudAccount(id: "tour-user", transport: network),
            configuration: configuration
        )
        let events = context.events()
        eventLog = Task {
            var all: [SyncEvent] = []
            for await event in events { all.append(event) }
            return all
        }
        try await context.start()
        await context.waitUntilIdle()
    }

    /// Closes the context and returns every event it emitted.
    func close() async throws -> [SyncEvent] {
        try await context.close()
        return await eventLog.value
    }
}

/// A device's network: passes requests to the shared cloud, or fails them all with
/// `networkUnavailable` while switched off — an offline device, as the engine sees one.
final class TourNetwork: CloudTransport, Sendable {
    private let cloud: InMemoryCloud
    private let device: String
    private let online = Mutex(true)

    init(cloud: InMemoryCloud, device: String) {
        self.cloud = cloud
        self.device = device
    }

    var isOnline: Bool {
        get { online.withLock { $0 } }
        set { online.withLock { $0 = newValue } }
    }

    private func checkOnline() throws {
        if !isOnline { throw CloudError(.networkUnavailable, "Device \(device) is offline.") }
    }

    var maximumOperationsPerRequest: Int { cloud.maximumOperationsPerRequest }
    func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) { try cloud.prepareToWrite(schema) }

    func listZones() async throws -> [ZoneID] {
        try checkOnline()
        return try await cloud.listZones()
    }

    func createZones(_ zones: [ZoneID]) async throws {
        try checkOnline()
        try await cloud.createZones(zones)
    }

    func deleteZones(_ zones: [ZoneID]) async throws {
        try checkOnline()
        try await cloud.deleteZones(zones)
    }

    func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        try checkOnline()
        return try await cloud.fetchDatabaseChanges(since: token)
    }

    func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws -> ZoneChanges {
        try checkOnline()
        return try await cloud.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
    }

    func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool) async throws
        -> ModifyRecordsResult
    {
        try checkOnline()
        return try await cloud.modifyRecords(saving: saves, deleting: deletes, atomically: atomically)
    }

    func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] {
        try checkOnline()
        return try await cloud.lookupRecords(ids)
    }

    func subscribeToChanges(in zones: [ZoneID]) async throws {
        try checkOnline()
        try await cloud.subscribeToChanges(in: zones)
    }
}

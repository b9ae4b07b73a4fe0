import FlatSync
import FlatSyncTesting
import Foundation

/// One device of the tour: a ``SyncContext`` in its own directory, reaching the shared cloud through its
/// own network switch, with the engine's events collected for the end of the tour.
struct TourDevice {
    let name: String
    let context: SyncContext
    /// The device's network switch: off, every request fails unsent, as on a device without a connection.
    let network: SwitchableTransport
    /// Collects the device's events until its context closes.
    private let eventLog: Task<[SyncEvent], Never>

    /// Opens and starts the device, and waits until its first sync is done.
    init(name: String, directory: URL, cloud: InMemoryCloud, configuration: SyncContext.Configuration) async throws {
        self.name = name
        network = SwitchableTransport(cloud)
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

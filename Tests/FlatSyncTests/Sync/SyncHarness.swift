import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// Devices sharing one in-memory cloud, one test clock and one date counter, in a temporary directory.
///
/// ```swift
/// try await SyncHarness.run { harness in
///     let a = try await harness.device("A")
///     try await a.readingList.add("x")
///     await a.waitUntilIdle()
/// }
/// ```
final class SyncHarness: Sendable {
    /// How devices reach the harness's cloud.
    enum Route: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Devices call the `InMemoryCloud` directly.
        case direct
        /// Devices use `CloudKitWebServicesTransport` over HTTP on 127.0.0.1 to a `CloudKitWebServicesServer`
        /// serving the same `InMemoryCloud`, which sends only the error codes Apple documents.
        case http
        /// As ``http``, with the emulator also sending the four error codes CloudKit does not document.
        case httpGuessedCodes

        var testDescription: String { rawValue }
    }

    let directory: URL
    let cloud: InMemoryCloud
    let route: Route
    let clock = TestClock()
    let dates = DateCounter()
    private let server: CloudKitWebServicesServer?
    private let transports = Mutex<[String: CloudKitWebServicesTransport]>([:])

    private init(directory: URL, cloud: InMemoryCloud, route: Route) throws {
        self.directory = directory
        self.cloud = cloud
        self.route = route
        switch route {
        case .direct:
            server = nil
        case .http, .httpGuessedCodes:
            // A short courier hold, so a test that follows pushes gets its keepalives soon. A web auth token
            // is required, as the private database requires one (ckws.md §2): each device signs in first.
            server = try CloudKitWebServicesServer(
                backing: cloud,
                options: .init(
                    requireWebAuthToken: true, guessedErrorCodes: route == .httpGuessedCodes,
                    courierHoldTime: .seconds(2)))
        }
    }

    static func run<R>(
        cloud: InMemoryCloud = InMemoryCloud(), via route: Route = .direct, _ body: (SyncHarness) async throws -> R
    ) async throws -> R {
        try await withTemporaryDirectory { directory in
            let harness = try SyncHarness(directory: directory, cloud: cloud, route: route)
            do {
                let result = try await body(harness)
                await harness.server?.stop()
                return result
            } catch {
                await harness.server?.stop()
                throw error
            }
        }
    }

    /// Makes the asset download links the emulator gave so far stop working (over HTTP routes; direct
    /// downloads have no links).
    func expireAssetLinks() { server?.expireAssetLinks() }

    /// The emulator's address over HTTP routes; nil for ``Route/direct``.
    var serverURL: URL? { server?.baseURL }

    /// A web auth token of a new session, as the emulator's sign-in page hands out (the server requires
    /// one): for a device that signs in again. Nil for ``Route/direct``.
    func signInToken() -> String? { server?.signInToken() }

    /// The transport device `name` reaches the cloud with: the cloud itself, or (over HTTP) a
    /// CloudKitWebServicesTransport of its own, the same one every time the device opens.
    func transport(_ name: String) -> any CloudTransport {
        guard let server else { return cloud }
        return transports.withLock { transports in
            if let existing = transports[name] { return existing }
            let transport = CloudKitWebServicesTransport(
                configuration: .init(
                    containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "engine-tests",
                    tokenStore: InMemoryWebAuthTokenStore(token: server.signInToken()), baseURL: server.baseURL,
                    // The host types the host-store tests register: declaring them changes nothing for the rest.
                    schema: .flatSync))  // the contexts add the host types
            transports[name] = transport
            return transport
        }
    }

    func configuration(durability: Durability = .buffered) -> SyncContext.Configuration {
        var configuration = SyncContext.Configuration(clock: clock)
        configuration.durability = durability
        let dates = self.dates
        configuration.currentDate = { dates.next() }
        configuration.randomSeed = 42
        configuration.retryPolicy.jitter = 0
        configuration.snapshotDelay = .seconds(3_600)
        return configuration
    }

    /// Opens (or reopens) the device named `name`, signed in to `account` on this harness's cloud, and
    /// starts it.
    func device(
        _ name: String, account: String = "user", transport: (any CloudTransport)? = nil, start: Bool = true,
        configure: (inout SyncContext.Configuration) -> Void = { _ in }
    ) async throws -> SyncContext {
        var configuration = configuration()
        configuration.deviceID = name
        configure(&configuration)
        let context = try await SyncContext.open(
            directory: directory.appendingPathComponent(name),
            account: CloudAccount(id: account, transport: transport ?? self.transport(name)),
            configuration: configuration
        )
        if start {
            try await context.start()
            await context.waitUntilIdle()
        }
        return context
    }
}

/// Everything a device shows, without dates that differ only by when each device wrote them.
struct DeviceView: Equatable, CustomStringConvertible {
    var readingList: [String: ReadingListEntry]
    var history: [String: ReadingHistoryItem]
    /// Host records of the tests' note type (empty where no device registers it).
    var notes: [String: TestNote] = [:]

    init(_ context: SyncContext) async {
        readingList = Dictionary(uniqueKeysWithValues: await context.readingList.entries().map { ($0.articleID, $0) })
        history = Dictionary(uniqueKeysWithValues: await context.history.items().map { ($0.articleID, $0) })
        if context.localStore.registry.entry(zone: TestNote.zone, recordType: TestNote.recordType) != nil {
            notes = Dictionary(uniqueKeysWithValues: await context.records(TestNote.self).values().map { ($0.id, $0) })
        }
    }

    init(server cloud: some CloudAdministration) async throws {
        readingList = [:]
        history = [:]
        for record in try await cloud.records(in: .readingList) {
            if record.type == TestNote.recordType {
                let note = try TestNote(
                    id: record.id.name, fields: RecordFields(record.fields, recordName: record.id.name))
                notes[note.id] = note
                continue
            }
            let entry = try ReadingListEntry(record: record)
            readingList[entry.articleID] = entry
        }
        for record in try await cloud.records(in: .readingHistory) {
            let item = try ReadingHistoryItem(record: record)
            history[item.articleID] = item
        }
    }

    var description: String {
        "list \(readingList.keys.sorted()) history \(history.keys.sorted().map { "\($0):\(history[$0]!.readCount)/\(history[$0]!.liking)" })"
    }

    /// What differs from `other`, item by item, for failure messages.
    func differences(from other: DeviceView) -> [String] {
        var lines: [String] = []
        for key in Set(readingList.keys).union(other.readingList.keys).sorted()
        where readingList[key] != other.readingList[key] {
            lines.append(
                "list \(key): \(readingList[key].map { "\($0)" } ?? "absent") vs \(other.readingList[key].map { "\($0)" } ?? "absent")"
            )
        }
        for key in Set(notes.keys).union(other.notes.keys).sorted() where notes[key] != other.notes[key] {
            lines.append(
                "note \(key): \(notes[key].map { "\($0)" } ?? "absent") vs \(other.notes[key].map { "\($0)" } ?? "absent")"
            )
        }
        for key in Set(history.keys).union(other.history.keys).sorted() where history[key] != other.history[key] {
            lines.append(
                "history \(key): \(history[key].map { "\($0.record)" } ?? "absent") vs \(other.history[key].map { "\($0.record)" } ?? "absent")"
            )
        }
        return lines
    }
}

/// Every event a stream delivered, once its context has closed (closing ends the stream, so a missing
/// event fails the test instead of hanging it).
func collect(_ events: AsyncStream<SyncEvent>) async -> [SyncEvent] {
    var all: [SyncEvent] = []
    for await event in events { all.append(event) }
    return all
}

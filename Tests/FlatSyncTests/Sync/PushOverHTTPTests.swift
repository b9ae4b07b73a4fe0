import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// The whole push path through CloudKit Web Services on 127.0.0.1: the engine's zone subscriptions, a push
/// token and its courier, the notification, the fetch it causes, and the catch-up after a gap.
@Suite struct PushOverHTTPTests {
    @Test(.timeLimit(.minutes(1)))
    func theEngineFetchesTheZoneAPushNames() async throws {
        try await SyncHarness.run(via: .http) { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            let transport = try #require(harness.transport("B") as? CloudKitWebServicesTransport)
            var notifications = LongPollNotificationSource(transport: transport, pollTimeout: .seconds(30))
                .notifications().makeAsyncIterator()
            #expect(try await notifications.next() == .wholeDatabase(.gap), "registered: pushes come from now on")

            try await a.readingList.add("pushed")
            await a.waitUntilIdle()
            await harness.cloud.resetCounters()
            let events = b.events()
            var pushed: CloudNotification?
            while let next = try await notifications.next() {
                // Keepalives may come first; only the push itself is handed to the engine here.
                if next.fetch == .database { continue }
                pushed = next
                break
            }
            #expect(pushed?.fetch == .zones([.readingList]))
            #expect(pushed?.subscriptionID == "flatsync-ReadingList", "the subscription the engine made")
            await b.handleRemoteNotification(try #require(pushed))
            await b.waitUntilIdle()
            #expect(await b.readingList.entry("pushed") != nil)
            let counters = await harness.cloud.counters()
            #expect(counters.requests(.fetchZoneChanges) == 1 && counters.requests(.fetchDatabaseChanges) == 0)
            try await a.close()
            try await b.close()
            #expect(await collect(events).contains(.willFetch(zone: .readingList)))
        }
    }

    @Test func subscriptionsAreMadeOnceAcrossRestartsAndDevices() async throws {
        try await SyncHarness.run(via: .http) { harness in
            let a = try await harness.device("A")
            var counters = await harness.cloud.counters()
            #expect(counters.requests(.listSubscriptions) == 1 && counters.requests(.modifySubscriptions) == 1)
            try await a.close()
            let again = try await harness.device("A")
            let b = try await harness.device("B", start: false)
            let events = b.events()
            try await b.start()
            await b.waitUntilIdle()
            counters = await harness.cloud.counters()
            #expect(counters.requests(.modifySubscriptions) == 1, "A restarted sent nothing; B found them listed")
            #expect(counters.requests(.listSubscriptions) == 2)
            #expect(
                await harness.cloud.subscriptions().map(\.id) == ["flatsync-ReadingHistory", "flatsync-ReadingList"])
            try await again.close()
            try await b.close()
            #expect(!(await collect(events)).contains { if case .error = $0 { true } else { false } })
        }
    }

    @Test func aSecondDeviceDoesNotFailWhenAnotherClientsSubscriptionHoldsTheZone() async throws {
        try await SyncHarness.run(via: .http) { harness in
            try await harness.cloud.createZones(ZoneID.builtIn)
            _ = try await harness.cloud.serve(.modifySubscriptions) { (database) throws(CloudError) in
                try database.createSubscription(CloudSubscription(id: "other-app-build", zone: .readingList))
            }
            let a = try await harness.device("A", start: false)
            let events = a.events()
            try await a.start()
            await a.waitUntilIdle()
            #expect(
                await harness.cloud.subscriptions().map(\.id) == ["flatsync-ReadingHistory", "other-app-build"])
            try await a.close()
            #expect(!(await collect(events)).contains { if case .error = $0 { true } else { false } })
        }
    }

    /// A gap: the server stops while device B watches, device A saves meanwhile (no push can announce it),
    /// the server starts again on the same port and cloud. B must end up with the save, by the fetch its
    /// source asks for after it reconnects (this was a real bug: the save was "still missing 90 s later").
    @Test(.timeLimit(.minutes(1)))
    func aWatcherCatchesUpOnAChangeMadeWhileTheServerWasDown() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            var server = try Self.server(cloud)
            let port = server.port
            do {
                let transport = CloudKitWebServicesTransport(
                    configuration: .init(
                        containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "gap",
                        tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL, requestTimeout: .seconds(5)))
                let b = try await SyncContext.open(
                    directory: directory.appendingPathComponent("B"),
                    account: CloudAccount(id: "user", transport: transport),
                    configuration: SyncContext.Configuration(clock: TestClock()))
                try await b.start()
                await b.waitUntilIdle()
                // A reaches the same cloud without the server: its saves make no push at all.
                let a = try await SyncContext.open(
                    directory: directory.appendingPathComponent("A"),
                    account: CloudAccount(id: "user", transport: cloud),
                    configuration: SyncContext.Configuration(clock: TestClock()))
                try await a.start()
                await a.waitUntilIdle()

                let source = LongPollNotificationSource(
                    transport: transport, pollTimeout: .seconds(30),
                    retryPolicy: RetryPolicy(initialDelay: .milliseconds(50), maximumDelay: .milliseconds(200)))
                let (watching, started) = AsyncStream<Void>.makeStream()
                let watcher = Task {
                    // Every notification goes to the engine, as `watch` does.
                    for try await notification in source.notifications() {
                        started.yield()  // the first comes once a token is registered
                        await b.handleRemoteNotification(notification)
                        await b.waitUntilIdle()
                        if await b.readingList.entry("while-down") != nil { return true }
                    }
                    return false
                }
                for await _ in watching { break }

                await server.stop()
                try await a.readingList.add("while-down")
                await a.waitUntilIdle()
                #expect(await cloud.records(in: .readingList).map(\.id.name) == ["rl-while-down"])
                server = try CloudKitWebServicesServer(
                    backing: cloud, options: .init(port: port, courierHoldTime: .seconds(1)))

                #expect(try await watcher.value, "the watcher caught up")
                watcher.cancel()
                try await a.close()
                try await b.close()
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    /// An emulator over `cloud` on a port no other test is handed while this one's server is down: below
    /// the range the kernel picks ports from (see `freePort()` in the demo tests).
    static func server(_ cloud: InMemoryCloud) throws -> CloudKitWebServicesServer {
        var generator = SystemRandomNumberGenerator()
        var lastError: (any Error)?
        for _ in 0..<100 {
            let port = UInt16.random(in: 20_000..<32_768, using: &generator)
            do {
                return try CloudKitWebServicesServer(
                    backing: cloud, options: .init(port: port, courierHoldTime: .seconds(1)))
            } catch {
                lastError = error
            }
        }
        throw lastError!
    }
}

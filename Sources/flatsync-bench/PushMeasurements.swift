import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Synchronization

// The push rows: how soon a change one device synced is on another device that follows the server's pushes
// through CloudKit's web courier (LongPollNotificationSource), and what following them costs while nothing
// changes. Both through CloudKitWebServicesTransport, HTTP on 127.0.0.1 and the CKWS emulator.

enum PushMeasurements {
    /// Device A saves one reading-list entry at a time and syncs; device B follows the pushes (as `watch`
    /// does: every notification goes to `handleRemoteNotification(_:)`). A push's latency runs from the
    /// end of A's sync — the moment A's `records/modify` came back confirmed, before A's own bookkeeping
    /// (an fsync'd acknowledgement, which can take longer than the whole push) — to the end of the fetch on
    /// B that brought the entry.
    static func latencyOverHTTP(_ context: BenchContext) async throws -> Results {
        let pushes = context.pick(full: 50, quick: 20)
        progress("push latency over HTTP: \(pushes) pushes from one device to another through the web courier")
        let cloud = InMemoryCloud()
        let server = try CloudKitWebServicesServer(backing: cloud)
        do {
            let (samples, endToEnd) = try await latencies(pushes: pushes, server: server, context: context)
            await server.stop()
            var results = Results()
            results["push_latency_p50_ms_http"] = percentile(samples, 50)
            results["push_latency_p95_ms_http"] = percentile(samples, 95)
            results["push_latency_max_ms_http"] = samples.max()!
            results["push_latency_b_first_count_http"] = Double(samples.filter { $0 == 0 }.count)
            results["push_save_to_fetch_p50_ms_http"] = percentile(endToEnd, 50)
            results["push_save_to_fetch_p95_ms_http"] = percentile(endToEnd, 95)
            results.note(
                "push latency over HTTP: device A adds a reading-list entry; from the moment its records/modify "
                    + "comes back confirmed (the end of its sync), to the end of the fetch on device B, which "
                    + "follows the emulator's web courier with LongPollNotificationSource and hands each "
                    + "notification to its engine (0 when B had the entry first: "
                    + "\(samples.filter { $0 == 0 }.count) of \(pushes)); save_to_fetch times from A's add "
                    + "instead. \(pushes) pushes after 2 unmeasured ones, `.fsync` devices, InMemoryCloud behind "
                    + "the emulator.")
            return results
        } catch {
            await server.stop()
            throw error
        }
    }

    /// What a device that follows pushes asks of the server while nothing changes: its polls, and the
    /// whole-database fetch that follows each empty one, per minute, with the courier holding a poll for
    /// `hold` (the emulator's default, 25 s, in a full run; 5 s in a quick one, to keep it short). Counted
    /// over whole keepalive cycles, from one handled keepalive to the one `cycles` later.
    static func idlePollRate(_ context: BenchContext) async throws -> Results {
        let hold = context.pick(full: Duration.seconds(25), quick: .seconds(5))
        let cycles = 2
        progress("idle poll rate: a device follows pushes for \(cycles) keepalives of \(hold) each, nothing changing")
        let requests = Mutex(0)
        let counting = Mutex(false)
        var options = CloudKitWebServicesServer.Options(courierHoldTime: hold)
        options.requestLog = { _ in
            if counting.withLock({ $0 }) { requests.withLock { $0 += 1 } }
        }
        let server = try CloudKitWebServicesServer(backing: InMemoryCloud(), options: options)
        do {
            let transport = transport(server)
            let device = try await SyncMeasurements.startedDevice(
                in: try context.makeDirectory("idle"), transport: transport)
            let follower = follow(transport, with: device, arrived: { _ in }, ended: {})
            // The first notification is the one after registering; the second, the first keepalive.
            try await follower.handled(2)
            counting.withLock { $0 = true }
            let start = benchClock.now
            try await follower.handled(2 + cycles)
            let window = benchClock.now - start
            counting.withLock { $0 = false }
            follower.stop()
            try await device.close()
            await server.stop()
            let perMinute = Double(requests.withLock { $0 }) * 60 / window.seconds
            var results = Results()
            results["idle_poll_requests_per_min"] = perMinute
            results["idle_poll_hold_s"] = hold.seconds
            results.note(
                "idle poll rate: every request a device following pushes sent over \(cycles) keepalive cycles "
                    + "(\(window)) without a change (its courier polls, each answered empty after the \(hold) "
                    + "hold, and the whole-database fetch after each), per minute.")
            return results
        } catch {
            await server.stop()
            throw error
        }
    }

    // MARK: - Pieces

    /// The latencies from the end of A's sync, and from A's add, to the end of B's fetch, in milliseconds.
    private static func latencies(pushes: Int, server: CloudKitWebServicesServer, context: BenchContext)
        async throws -> (fromSync: [Double], fromSave: [Double])
    {
        let sent = SendClock(transport(server))
        let a = try await SyncMeasurements.startedDevice(in: try context.makeDirectory("push-a"), transport: sent)
        let bTransport = transport(server)
        let b = try await SyncMeasurements.startedDevice(in: try context.makeDirectory("push-b"), transport: bTransport)
        let (arrivals, arrived) = AsyncStream<(String, ContinuousClock.Instant)>.makeStream()
        let follower = follow(
            bTransport, with: b, arrived: { id in arrived.yield((id, benchClock.now)) }, ended: { arrived.finish() })
        try await follower.firstHandled()
        var arrivalsIterator = arrivals.makeAsyncIterator()
        var samples: [Double] = []
        var fromSave: [Double] = []
        for index in 0..<(pushes + 2) {
            let id = "push-\(index)"
            follower.expect(id)
            let saved = benchClock.now
            try await a.readingList.add(id)
            await a.waitUntilIdle()
            guard let synced = sent.lastConfirmed else { throw BenchError("device A sent nothing for \(id)") }
            guard let (arrivedID, at) = await arrivalsIterator.next(), arrivedID == id else {
                throw BenchError("device B stopped following before \(id) arrived")
            }
            // B may have it before A heard back from its send (the emulator notifies once the change is
            // committed, before it answers): that counts as no delay at all.
            if index >= 2 {
                samples.append(max(0, (at - synced).milliseconds))
                fromSave.append((at - saved).milliseconds)
            }
        }
        follower.stop()
        try await a.close()
        try await b.close()
        return (samples, fromSave)
    }

    /// A device following the server's pushes: a task handing every notification of a long-poll source to
    /// the device, and saying when an expected entry arrived.
    private final class Follower: Sendable {
        private struct State {
            var expected: String?
            var handled = 0
            var waiters: [(count: Int, continuation: CheckedContinuation<Void, any Error>)] = []
            var failure: (any Error)?
        }

        private let state = Mutex(State())
        private let task = Mutex<Task<Void, Never>?>(nil)

        func start(_ body: @escaping @Sendable (Follower) async -> Void) {
            task.withLock { $0 = Task { await body(self) } }
        }

        func stop() { task.withLock { $0?.cancel() } }

        /// The entry whose arrival to report next.
        func expect(_ id: String) { state.withLock { $0.expected = id } }

        /// Takes the expected entry if `present` says it arrived.
        func takeExpected(if present: (String) async -> Bool) async -> String? {
            guard let id = state.withLock({ $0.expected }), await present(id) else { return nil }
            return state.withLock { state in
                guard state.expected == id else { return nil }
                state.expected = nil
                return id
            }
        }

        func didHandle() {
            let ready = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
                state.handled += 1
                let handled = state.handled
                defer { state.waiters.removeAll { $0.count <= handled } }
                return state.waiters.filter { $0.count <= handled }.map(\.continuation)
            }
            for waiter in ready { waiter.resume() }
        }

        func fail(_ error: any Error) {
            let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
                state.failure = error
                defer { state.waiters = [] }
                return state.waiters.map(\.continuation)
            }
            for waiter in waiters { waiter.resume(throwing: error) }
        }

        /// Returns once the first notification was handled (the push token is registered by then).
        func firstHandled() async throws {
            try await handled(1)
        }

        /// Returns once `count` notifications were handled.
        func handled(_ count: Int) async throws {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let ready = state.withLock { state -> Result<Bool, any Error> in
                    if let failure = state.failure { return .failure(failure) }
                    if state.handled >= count { return .success(true) }
                    state.waiters.append((count, continuation))
                    return .success(false)
                }
                switch ready {
                case .failure(let error): continuation.resume(throwing: error)
                case .success(true): continuation.resume()
                case .success(false): break
                }
            }
        }
    }

    /// Starts following `transport`'s pushes on `device`; `arrived` is called with each expected entry that
    /// a handled notification brought, `ended` when the notifications end (stopped, or failed).
    private static func follow(
        _ transport: CloudKitWebServicesTransport, with device: SyncContext,
        arrived: @escaping @Sendable (String) -> Void, ended: @escaping @Sendable () -> Void
    ) -> Follower {
        let follower = Follower()
        let source = LongPollNotificationSource(transport: transport, pollTimeout: .seconds(60))
        follower.start { follower in
            do {
                for try await notification in source.notifications() {
                    await device.handleRemoteNotification(notification)
                    await device.waitUntilIdle()
                    follower.didHandle()
                    if let id = await follower.takeExpected(if: { await device.readingList.entry($0) != nil }) {
                        arrived(id)
                    }
                }
            } catch {
                follower.fail(error)
            }
            ended()
        }
        return follower
    }

    /// A transport that notes when the last `records/modify` came back confirmed: the end of a sync as far
    /// as the server is concerned.
    private final class SendClock: CloudTransport {
        let base: CloudKitWebServicesTransport
        private let confirmed = Mutex<ContinuousClock.Instant?>(nil)

        init(_ base: CloudKitWebServicesTransport) { self.base = base }

        var lastConfirmed: ContinuousClock.Instant? { confirmed.withLock { $0 } }
        var maximumOperationsPerRequest: Int { base.maximumOperationsPerRequest }
        func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) { try base.prepareToWrite(schema) }

        func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
            async throws -> ModifyRecordsResult
        {
            let result = try await base.modifyRecords(saving: saves, deleting: deletes, atomically: atomically)
            let now = benchClock.now
            confirmed.withLock { $0 = now }
            return result
        }

        func listZones() async throws -> [ZoneID] { try await base.listZones() }
        func createZones(_ zones: [ZoneID]) async throws { try await base.createZones(zones) }
        func deleteZones(_ zones: [ZoneID]) async throws { try await base.deleteZones(zones) }
        func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
            try await base.fetchDatabaseChanges(since: token)
        }
        func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws
            -> ZoneChanges
        {
            try await base.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
        }
        func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] { try await base.lookupRecords(ids) }
        func downloadAsset(_ asset: CloudAsset) async throws -> Data { try await base.downloadAsset(asset) }
        func subscribeToChanges(in zones: [ZoneID]) async throws { try await base.subscribeToChanges(in: zones) }
    }

    private static func transport(_ server: CloudKitWebServicesServer) -> CloudKitWebServicesTransport {
        CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.dev.flatsync.bench", environment: .development, apiToken: "bench",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL))
    }
}

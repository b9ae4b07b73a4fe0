import FlatSync
import FlatSyncTesting
import Synchronization
import Testing

@Suite("InMemoryCloud")
struct InMemoryCloudTests {
    @Test func latencyIsSleptOnTheInjectedClock() async throws {
        let clock = RecordingClock()
        let cloud = InMemoryCloud(latency: .milliseconds(250), clock: clock)
        try await cloud.createZones([.notes])
        _ = try await cloud.listZones()
        #expect(clock.sleeps == [.milliseconds(250), .milliseconds(250)])

        await cloud.setLatency(nil)
        _ = try await cloud.listZones()
        #expect(clock.sleeps.count == 2)
        _ = await cloud.counters()  // administration never waits
        #expect(clock.sleeps.count == 2)
    }

    @Test func theSnapshotIsTheServersState() async throws {
        let cloud = InMemoryCloud(changeHistoryLimit: 10)
        try await cloud.createZones([.notes])
        _ = try await cloud.saveOne(makeRecord("a"))
        let snapshot = await cloud.snapshot
        #expect(snapshot.records(in: .notes).map(\.id.name) == ["a"])
        #expect(snapshot.changeHistoryLimit == 10)
        #expect(snapshot.counters.recordsSaved == 1)
    }
}

/// A clock whose sleeps return at once and are written down, so latency is tested without waiting.
final class RecordingClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration
        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let state = Mutex<(now: Instant, sleeps: [Duration])>((Instant(offset: .zero), []))

    var now: Instant { state.withLock { $0.now } }
    var minimumResolution: Duration { .nanoseconds(1) }
    var sleeps: [Duration] { state.withLock { $0.sleeps } }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        state.withLock { state in
            state.sleeps.append(state.now.duration(to: deadline))
            state.now = max(state.now, deadline)
        }
    }
}

import Synchronization

/// A clock whose time moves only when a test says so, for testing debounces, retries and backoff
/// without real sleeps.
///
/// ```swift
/// let clock = TestClock()
/// let context = try await SyncContext.open(
///     directory: dir, account: CloudAccount(id: "user", transport: InMemoryCloud()),
///     configuration: .init(clock: clock))
/// try await context.start()
/// try await context.history.visit("a")      // a history change waits 5 s before it is sent
/// clock.advance(by: .seconds(5))
/// await context.waitUntilIdle()             // the send has happened
/// ```
///
/// ``advance(by:)`` wakes every sleeper whose deadline has come, earliest first. The woken tasks run
/// afterwards; pair it with a way to wait for the code under test (`SyncContext.waitUntilIdle()`).
public final class TestClock: Clock, Sendable {
    /// A point on the test clock's timeline: a duration since its start.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// How long after the clock's start this instant is.
        public var offset: Duration

        /// The instant `offset` after the clock's start.
        public init(offset: Duration) {
            self.offset = offset
        }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// How long from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// True when `lhs` comes first.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        /// `t+` and the offset, as `t+5.0 seconds`.
        public var description: String { "t+\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Instant
        var sleepers: [UInt64: Sleeper] = [:]
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state: Mutex<State>

    /// A clock starting at `now` (zero by default).
    public init(now: Instant = Instant(offset: .zero)) {
        state = Mutex(State(now: now))
    }

    /// The clock's time: where the last ``advance(by:)`` left it.
    public var now: Instant { state.withLock { $0.now } }
    /// Zero: a test clock tells every instant apart.
    public var minimumResolution: Duration { .zero }

    /// The number of tasks sleeping on the clock.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline any task sleeps until.
    public var nextDeadline: Instant? { state.withLock { $0.sleepers.values.map(\.deadline).min() } }

    /// Sleeps until a test advances the clock to `deadline` (returns at once if it is there already), or
    /// throws `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case wait, wake, cancel }
                let outcome = state.withLock { state -> Outcome in
                    if state.cancelled.remove(id) != nil { return .cancel }
                    if deadline <= state.now { return .wake }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return .wait
                }
                switch outcome {
                case .wait: break
                case .wake: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                if let sleeper = state.sleepers.removeValue(forKey: id) { return sleeper }
                state.cancelled.insert(id)
                return nil
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves time to `instant` (never backwards) and wakes the sleepers whose deadline has come.
    public func advance(to instant: Instant) {
        let due = state.withLock { state -> [Sleeper] in
            if instant > state.now { state.now = instant }
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves time to the earliest deadline anyone sleeps until, if there is one, and wakes them.
    /// Returns false when nobody sleeps.
    @discardableResult
    public func advanceToNextDeadline() -> Bool {
        guard let deadline = nextDeadline else { return false }
        advance(to: deadline)
        return true
    }
}

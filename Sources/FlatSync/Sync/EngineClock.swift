/// The engine's view of its injected clock: time as a duration since the engine started, and sleeping
/// until such a time. Wrapping any `Clock<Duration>` this way lets the engine compare deadlines with
/// "now" without knowing the clock's instant type.
package struct EngineClock: Sendable {
    /// Time since the engine started.
    package let now: @Sendable () -> Duration
    /// Sleeps until the given time since the engine started.
    package let sleep: @Sendable (_ until: Duration) async throws -> Void

    package init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let origin = clock.now
        now = { origin.duration(to: clock.now) }
        sleep = { deadline in try await clock.sleep(until: origin.advanced(by: deadline), tolerance: nil) }
    }
}

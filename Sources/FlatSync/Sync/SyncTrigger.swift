/// Coalesces requests for one kind of work (a fetch, or a send of one zone) so that at most one run is
/// queued and at most one follow-up runs after the current one: a storm of push notifications during a
/// fetch causes exactly one more fetch.
package struct SyncTrigger: Hashable, Sendable {
    private enum State: Hashable, Sendable { case idle, queued, running, runningWithFollowUp }
    private var state = State.idle

    package init() {}

    /// Someone wants the work done. Returns true when the caller must queue a run.
    package mutating func request() -> Bool {
        switch state {
        case .idle:
            state = .queued
            return true
        case .queued, .runningWithFollowUp:
            return false
        case .running:
            state = .runningWithFollowUp
            return false
        }
    }

    /// A queued run started.
    package mutating func started() {
        state = .running
    }

    /// The run finished. Returns true when the caller must queue the follow-up run.
    package mutating func finished() -> Bool {
        if state == .runningWithFollowUp {
            state = .queued
            return true
        }
        state = .idle
        return false
    }

    /// Forgets everything (the queue was cancelled).
    package mutating func reset() {
        state = .idle
    }

    /// True while a run is queued or running.
    package var isBusy: Bool { state != .idle }
}

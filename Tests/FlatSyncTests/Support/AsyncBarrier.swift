import Synchronization

/// Suspends tasks until `count` of them have arrived, then lets them all go: makes "everyone has done X
/// before anyone does Y" explicit instead of hoping the scheduler interleaves tasks a certain way.
final class AsyncBarrier: Sendable {
    private let state: Mutex<(remaining: Int, waiting: [CheckedContinuation<Void, Never>])>

    init(count: Int) {
        state = Mutex((count, []))
    }

    /// Returns once `count` tasks (this one included) have called it.
    func arriveAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let released = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.remaining -= 1
                state.waiting.append(continuation)
                guard state.remaining <= 0 else { return [] }
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiter in released { waiter.resume() }
        }
    }
}

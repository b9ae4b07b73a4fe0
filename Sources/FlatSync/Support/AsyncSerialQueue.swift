import Synchronization

/// Runs async jobs strictly one at a time, first in, first out (News: `FCAsyncSerialQueue`).
///
/// A job starts only after the previous one has finished, including everything it awaited. Enqueueing
/// is synchronous, so jobs enqueued one after another from any context run in that order.
///
/// ```swift
/// let queue = AsyncSerialQueue()
/// queue.enqueue { await push() }
/// let summary = try await queue.perform { try await fetch() }   // runs after the push
/// await queue.waitUntilEmpty()
/// ```
package final class AsyncSerialQueue: Sendable {
    private struct Job: Sendable {
        let run: @Sendable () async -> Void
        /// Called instead of `run` when the job is cancelled before it starts.
        let cancel: @Sendable () -> Void
    }

    private struct State {
        var jobs: [Job] = []
        var head = 0
        var isRunning = false
        var current: Task<Void, Never>?
        var emptyWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// An empty queue.
    package init() {}

    /// The number of jobs waiting, plus the one running.
    package var count: Int {
        state.withLock { $0.jobs.count - $0.head + ($0.current == nil ? 0 : 1) }
    }

    /// True when no job is waiting or running.
    package var isEmpty: Bool {
        state.withLock { !$0.isRunning }
    }

    /// Adds a job to the end of the queue.
    package func enqueue(_ job: @escaping @Sendable () async -> Void) {
        append(Job(run: job, cancel: {}))
    }

    /// Adds a job and waits for its result. Throws `CancellationError` if ``cancelAll()`` drops the job
    /// before it starts; a job already running sees cancellation through `Task.isCancelled`.
    package func perform<T: Sendable>(_ job: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            append(
                Job(
                    run: {
                        do {
                            continuation.resume(returning: try await job())
                        } catch {
                            continuation.resume(throwing: error)
                        }
                    },
                    cancel: { continuation.resume(throwing: CancellationError()) }
                )
            )
        }
    }

    /// Drops every job that has not started and cancels the running one.
    package func cancelAll() {
        let dropped = state.withLock { state -> ArraySlice<Job> in
            let dropped = state.jobs[state.head...]
            state.jobs = []
            state.head = 0
            state.current?.cancel()
            return dropped
        }
        for job in dropped { job.cancel() }
    }

    /// Returns once no job is waiting or running.
    package func waitUntilEmpty() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { state -> Bool in
                if !state.isRunning { return true }
                state.emptyWaiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }

    private func append(_ job: Job) {
        let start = state.withLock { state -> Bool in
            state.jobs.append(job)
            guard !state.isRunning else { return false }
            state.isRunning = true
            return true
        }
        if start {
            Task { await self.runJobs() }
        }
    }

    private func runJobs() async {
        while true {
            let (task, waiters) = state.withLock { state -> (Task<Void, Never>?, [CheckedContinuation<Void, Never>]) in
                guard state.head < state.jobs.count else {
                    state.jobs = []
                    state.head = 0
                    state.isRunning = false
                    defer { state.emptyWaiters = [] }
                    return (nil, state.emptyWaiters)
                }
                let job = state.jobs[state.head]
                state.head += 1
                if state.head > 64 && state.head * 2 > state.jobs.count {
                    state.jobs.removeFirst(state.head)
                    state.head = 0
                }
                // Created under the lock, so cancelAll() always sees the running job.
                let task = Task { await job.run() }
                state.current = task
                return (task, [])
            }
            guard let task else {
                for waiter in waiters { waiter.resume() }
                return
            }
            await task.value
            state.withLock { $0.current = nil }
        }
    }
}

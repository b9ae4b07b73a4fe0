/// Runs async jobs strictly one at a time, first in, first out (News: `FCAsyncSerialQueue`).
///
/// A job starts only after the previous one has finished, including everything it awaited.
///
/// ```swift
/// let queue = AsyncSerialQueue()
/// await queue.enqueue { await push() }
/// let summary = try await queue.perform { try await fetch() }   // waits for the push first
/// await queue.waitUntilEmpty()
/// ```
public actor AsyncSerialQueue {
    private struct Job {
        let run: @Sendable () async -> Void
        /// Called instead of `run` when the job is cancelled before it starts.
        let cancel: @Sendable () -> Void
    }

    private var jobs: [Job] = []
    private var nextJob = 0
    private var runner: Task<Void, Never>?
    private var current: Task<Void, Never>?
    private var emptyWaiters: [CheckedContinuation<Void, Never>] = []

    public init() {}

    /// The number of jobs waiting, plus the one running.
    public var count: Int { jobs.count - nextJob + (current == nil ? 0 : 1) }

    /// True when no job is waiting or running.
    public var isEmpty: Bool { count == 0 && runner == nil }

    /// Adds a job to the end of the queue.
    public func enqueue(_ job: @escaping @Sendable () async -> Void) {
        append(Job(run: job, cancel: {}))
    }

    /// Adds a job and waits for its result. Throws `CancellationError` if ``cancelAll()`` drops the job
    /// before it starts; a running job sees cancellation through `Task.isCancelled`.
    public func perform<T: Sendable>(_ job: @escaping @Sendable () async throws -> T) async throws -> T {
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
    public func cancelAll() {
        let dropped = jobs[nextJob...]
        jobs = []
        nextJob = 0
        current?.cancel()
        for job in dropped { job.cancel() }
    }

    /// Returns once no job is waiting or running.
    public func waitUntilEmpty() async {
        if isEmpty { return }
        await withCheckedContinuation { emptyWaiters.append($0) }
    }

    private func append(_ job: Job) {
        jobs.append(job)
        if runner == nil {
            runner = Task { await self.runJobs() }
        }
    }

    private func runJobs() async {
        while nextJob < jobs.count {
            let job = jobs[nextJob]
            nextJob += 1
            if nextJob > 64 && nextJob * 2 > jobs.count {
                jobs.removeFirst(nextJob)
                nextJob = 0
            }
            let task = Task { await job.run() }
            current = task
            await task.value
            current = nil
        }
        jobs = []
        nextJob = 0
        runner = nil
        let waiters = emptyWaiters
        emptyWaiters = []
        for waiter in waiters { waiter.resume() }
    }
}

import Testing

/// The result of `task`, or a recorded failure when it has not finished within `limit`.
///
/// A writer left waiting on a continuation that nobody resumes never finishes, and `.timeLimit` does not
/// end a test waiting for it: it cancels the test's task, and a continuation's wait ignores cancellation.
/// A lost writer then hung the whole suite (for 15 minutes, once); with this it fails its test. The
/// abandoned task stays suspended. The timer is a guard only: a passing test never waits for it.
func result<Success: Sendable>(
    of task: Task<Success, any Error>, within limit: Duration = .seconds(60),
    sourceLocation: SourceLocation = #_sourceLocation
) async -> Result<Success, any Error> {
    let (finished, finish) = AsyncStream<Result<Success, any Error>?>.makeStream()
    Task { finish.yield(await task.result) }
    let timer = Task {
        // Cancelled once the task has finished: nothing more to say.
        guard (try? await Task.sleep(for: limit)) != nil else { return }
        finish.yield(nil)
    }
    defer { timer.cancel() }
    for await first in finished {
        if let first { return first }
        break
    }
    Issue.record("the task did not finish within \(limit)", sourceLocation: sourceLocation)
    return .failure(TaskDidNotFinish())
}

/// What ``result(of:within:sourceLocation:)`` returns for a task that did not finish in time.
struct TaskDidNotFinish: Error {}

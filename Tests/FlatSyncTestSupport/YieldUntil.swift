/// Yields until `condition` holds: for a test that waits for another task's or thread's work, not for
/// time. The test's time limit cancels it.
public func yieldUntil(_ condition: () -> Bool) async throws {
    while !condition() {
        try Task.checkCancellation()
        await Task.yield()
    }
}

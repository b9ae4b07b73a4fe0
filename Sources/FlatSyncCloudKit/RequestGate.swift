import FlatSync
import Synchronization

/// Lets one request through at a time, in the order they arrived, in the caller's own task (so
/// cancelling the caller cancels its request, and a caller cancelled while it waits leaves the line).
///
/// ``CloudKitWebServicesTransport`` sends one request at a time because every response may carry the
/// next web auth token, which must be saved before the next request is sent.
final class RequestGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Waits for the gate, then holds it until ``leave()``.
    ///
    /// - Throws: `CancellationError` if the calling task is cancelled while it waits (it then does not hold
    ///   the gate).
    func enter() async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Checked under the lock, so a cancellation either happened before (seen here) or runs its
                // handler after the waiter is in the line (and takes it out).
                let outcome = state.withLock { state -> Result<Void, any Error>? in
                    if !state.busy {
                        state.busy = true
                        return .success(())
                    }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    state.waiters.append((id, continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Lets the next waiter through.
    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard !state.waiters.isEmpty else {
                state.busy = false
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}

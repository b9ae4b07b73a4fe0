#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

/// Delivers events to every subscriber, in order. Events raised while a store opened (a quarantined
/// file, say) happen before anyone can subscribe, so they are kept and replayed to each new subscriber.
package final class EventHub: Sendable {
    private struct State {
        var subscribers: [UInt64: AsyncStream<SyncEvent>.Continuation] = [:]
        var nextID: UInt64 = 0
        var replayed: [SyncEvent] = []
        var finished = false
    }

    private let state = Mutex(State())

    package init() {}

    /// A new stream of events, starting with the replayed ones.
    package func subscribe() -> AsyncStream<SyncEvent> {
        let (stream, continuation) = AsyncStream<SyncEvent>.makeStream(bufferingPolicy: .unbounded)
        let id: UInt64? = state.withLock { state in
            for event in state.replayed { continuation.yield(event) }
            guard !state.finished else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// The kept events (those replayed to new subscribers).
    package var keptEvents: [SyncEvent] {
        state.withLock { $0.replayed }
    }

    /// Sends an event to every subscriber.
    package func emit(_ event: SyncEvent) {
        state.withLock { state in
            for continuation in state.subscribers.values { continuation.yield(event) }
        }
    }

    /// Sends an event to every subscriber and keeps it for subscribers yet to come.
    package func emitAndKeep(_ event: SyncEvent) {
        state.withLock { state in
            state.replayed.append(event)
            for continuation in state.subscribers.values { continuation.yield(event) }
        }
    }

    /// Ends every stream.
    package func finish() {
        let continuations = state.withLock { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

/// The store's engine events (see ``Broadcast``).
package typealias EventHub = Broadcast<SyncEvent>

/// Delivers elements to every subscriber, in order. Events raised while a store opened (a quarantined
/// file, say) happen before anyone can subscribe, so they can be kept and replayed to each new subscriber.
package final class Broadcast<Element: Sendable>: Sendable {
    private struct State {
        var subscribers: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var sinks: [@Sendable (Element) -> Void] = []
        var nextID: UInt64 = 0
        var replayed: [Element] = []
        var finished = false
    }

    private let state = Mutex(State())

    package init() {}

    /// A new stream of events, starting with the replayed ones.
    package func subscribe() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .unbounded)
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

    /// Calls `sink` with the replayed events now, then with every event as it is sent, before `emit` returns,
    /// until the broadcast finishes: a recorder that reads no stream holds each event once its cause is done.
    /// `sink` runs under the broadcast's lock, so it must be quick and must not emit.
    package func record(into sink: @escaping @Sendable (Element) -> Void) {
        state.withLock { state in
            for event in state.replayed { sink(event) }
            if !state.finished { state.sinks.append(sink) }
        }
    }

    /// The kept events (those replayed to new subscribers).
    package var keptEvents: [Element] {
        state.withLock { $0.replayed }
    }

    /// Sends an event to every subscriber.
    package func emit(_ event: Element) {
        state.withLock { state in
            for sink in state.sinks { sink(event) }
            for continuation in state.subscribers.values { continuation.yield(event) }
        }
    }

    /// Sends an event to every subscriber and keeps it for subscribers yet to come.
    package func emitAndKeep(_ event: Element) {
        state.withLock { state in
            state.replayed.append(event)
            for sink in state.sinks { sink(event) }
            for continuation in state.subscribers.values { continuation.yield(event) }
        }
    }

    /// Ends every stream.
    package func finish() {
        let continuations = state.withLock { state in
            state.finished = true
            state.sinks = []
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}

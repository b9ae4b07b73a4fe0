import Synchronization

/// Tells the subscribers of a host record type (``RecordStore/changes()``) which of its records changed.
package final class RecordChangeHub: Sendable {
    private struct Key: Hashable {
        var zone: ZoneID
        var recordType: String
    }

    private struct State {
        var subscribers: [Key: [UInt64: AsyncStream<[String]>.Continuation]] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Mutex(State())
    /// True while anyone listens: the store skips gathering names when no one does.
    private let hasSubscribers = Atomic<Bool>(false)

    package init() {}

    /// A stream of the names of `recordType`'s records in `zone` that changed, one element per change.
    package func subscribe(zone: ZoneID, recordType: String) -> AsyncStream<[String]> {
        let (stream, continuation) = AsyncStream<[String]>.makeStream(bufferingPolicy: .unbounded)
        let key = Key(zone: zone, recordType: recordType)
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.subscribers[key, default: [:]][id] = continuation
            hasSubscribers.store(true, ordering: .relaxed)
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers[key]?.removeValue(forKey: id) }
        }
        return stream
    }

    /// True when someone may be listening.
    package var isObserved: Bool { hasSubscribers.load(ordering: .relaxed) }

    /// Tells the subscribers of each record's type in `zone` the names of theirs that changed.
    package func emit(zone: ZoneID, changed: [(recordType: String, name: String)]) {
        guard isObserved, !changed.isEmpty else { return }
        var byType: [String: [String]] = [:]
        for (type, name) in changed { byType[type, default: []].append(name) }
        state.withLock { state in
            for (type, names) in byType {
                for continuation in state.subscribers[Key(zone: zone, recordType: type)]?.values ?? [:].values {
                    continuation.yield(names.sorted())
                }
            }
        }
    }

    /// Ends every stream: the store closed.
    package func finish() {
        // Finished outside the lock: a stream's termination handler takes the lock to unsubscribe.
        let subscribers = state.withLock { state in
            state.finished = true
            defer { state.subscribers = [:] }
            return state.subscribers.values.flatMap(\.values)
        }
        for continuation in subscribers { continuation.finish() }
    }
}

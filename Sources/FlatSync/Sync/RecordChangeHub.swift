import Synchronization

/// Tells the subscribers of a host record type (``RecordStore/changes()``) which of its records changed:
/// a ``Broadcast`` per zone and record type, made when someone first subscribes.
package final class RecordChangeHub: Sendable {
    private struct Key: Hashable {
        var zone: ZoneID
        var recordType: String
    }

    private let hubs = Mutex<(byKey: [Key: Broadcast<[String]>], finished: Bool)>(([:], false))
    /// True once anyone subscribed: the store skips gathering names until someone does.
    private let hasSubscribers = Atomic<Bool>(false)

    package init() {}

    /// A stream of the names of `recordType`'s records in `zone` that changed, one element per change.
    package func subscribe(zone: ZoneID, recordType: String) -> AsyncStream<[String]> {
        let hub = hubs.withLock { hubs -> Broadcast<[String]> in
            let key = Key(zone: zone, recordType: recordType)
            if let hub = hubs.byKey[key] { return hub }
            let hub = Broadcast<[String]>()
            // A store that has closed hands out streams that have already ended.
            if hubs.finished { hub.finish() } else { hubs.byKey[key] = hub }
            return hub
        }
        hasSubscribers.store(true, ordering: .relaxed)
        return hub.subscribe()
    }

    /// True when someone may be listening.
    package var isObserved: Bool { hasSubscribers.load(ordering: .relaxed) }

    /// Tells the subscribers of each record's type in `zone` the names of theirs that changed.
    package func emit(zone: ZoneID, changed: [(recordType: String, name: String)]) {
        guard isObserved, !changed.isEmpty else { return }
        var byType: [String: [String]] = [:]
        for (type, name) in changed { byType[type, default: []].append(name) }
        for (type, names) in byType {
            hubs.withLock { $0.byKey[Key(zone: zone, recordType: type)] }?.emit(names.sorted())
        }
    }

    /// Ends every stream: the store closed.
    package func finish() {
        let all = hubs.withLock { hubs in
            hubs.finished = true
            defer { hubs.byKey = [:] }
            return Array(hubs.byKey.values)
        }
        for hub in all { hub.finish() }
    }
}

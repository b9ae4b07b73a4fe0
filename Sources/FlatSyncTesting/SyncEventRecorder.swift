import FlatSync
import Synchronization

/// Keeps every event a context (or a store) sends, to read at any moment, as swift-log's in-memory handler
/// keeps log entries.
///
/// A `SyncContext.events()` stream is read by a task of its own, so when
/// `SyncContext.waitUntilIdle()` returns its events were sent but perhaps not yet read. A recorder
/// reads no stream: the engine hands it each event before going on, so once `SyncContext.waitUntilIdle()`
/// or `SyncContext.syncNow()` returns, ``events`` holds every event of that work, with the context still
/// open.
///
/// ```swift
/// let recorder = SyncEventRecorder(context)
/// try await context.readingList.add("x")
/// await context.waitUntilIdle()
/// #expect(recorder.events.contains(.didSend(zone: .readingList, saved: 1, deleted: 0, failed: 0)))
/// recorder.removeAll()  // the next step's events only
/// ```
///
/// A recorder starts with the events the store kept from opening (a quarantined file, say), then records
/// until the context closes: make one for each context a test opens. Work the clock has not reached yet (a
/// snapshot written after the context's snapshot delay, say) adds its events when the test advances the clock.
public final class SyncEventRecorder: Sendable {
    private let recorded = Mutex<[SyncEvent]>([])

    /// Records the events of `context` from now on, after those it kept from opening.
    public convenience init(_ context: SyncContext) {
        self.init(context.localStore)
    }

    /// Records the events of `store` from now on, after those it kept from opening.
    public init(_ store: LocalStore) {
        store.eventHub.record { [self] event in
            recorded.withLock { $0.append(event) }
        }
    }

    /// The events recorded so far, oldest first.
    public var events: [SyncEvent] {
        recorded.withLock { $0 }
    }

    /// Forgets the events recorded so far, so that ``events`` holds only what comes next.
    public func removeAll() {
        recorded.withLock { $0.removeAll() }
    }
}

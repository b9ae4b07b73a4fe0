#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What ``SyncContext/syncNow()`` did.
public struct SyncSummary: Sendable, Hashable {
    /// Records the server acknowledged (saved or deleted).
    public var sent = 0
    /// Fetched records that changed this device (taken, or merged with a pending change): a record that
    /// comes back as this device already holds it, its own save say, does not count.
    public var fetched = 0
    /// Local records deleted because the server deleted them.
    public var deleted = 0
    /// Changes the server refused during the sync, now parked on the device (see ``RefusedChange``); they
    /// count in ``pendingRecords`` too.
    public var refused: [RefusedChange] = []
    /// Zones reset, with why.
    public var resets: [ZoneReset] = []
    /// Why sending or fetching stopped early, if it did, and changes waiting for a store of their zone: the
    /// engine tries again by itself unless the problem is ``SyncProblem/Kind-swift.enum/paused(_:)`` or
    /// ``SyncProblem/Kind-swift.enum/noStoreForZone``.
    public var problems: [SyncProblem] = []
    /// Record changes still waiting to be sent afterwards.
    public var pendingRecords = 0

    /// An empty summary.
    public init() {}

    /// True when everything was sent and fetched.
    public var isComplete: Bool { problems.isEmpty && pendingRecords == 0 }

    /// One zone reset.
    public struct ZoneReset: Sendable, Hashable, CustomStringConvertible {
        /// The zone that was reset.
        public var zone: ZoneID
        /// Why.
        public var reason: ZoneResetReason
        public var description: String { "\(zone): \(reason)" }
    }

    mutating func add(_ outcome: SyncContext.PushOutcome, of zone: ZoneID) {
        sent += outcome.saved + outcome.deleted
        refused += outcome.refused
        resets += outcome.resets
        if let problem = outcome.stop?.problem(in: zone) { note(problem) }
    }

    mutating func add(_ outcome: SyncContext.FetchOutcome) {
        fetched += outcome.changed
        deleted += outcome.deleted
        resets += outcome.resets
        if let problem = outcome.stop?.problem(in: nil) { note(problem) }
    }

    /// Adds `problem`, except a pause already listed: a pause is the context's, not a zone's, so each zone's
    /// send and the fetch that met it say the same thing once.
    private mutating func note(_ problem: SyncProblem) {
        if case .paused = problem.kind, problems.contains(where: { $0.kind == problem.kind }) { return }
        problems.append(problem)
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Something the engine did that a host may want to show or log, delivered in order by
/// ``SyncContext/events()`` (and ``LocalStore/events()``).
///
/// Later versions of FlatSync may add cases: switch over an event with a `default`.
public enum SyncEvent: Sendable, Hashable, CustomStringConvertible {
    /// A fetch of a zone's changes is starting.
    case willFetch(zone: ZoneID)
    /// Fetched changes of a zone were applied: a whole fetch, or a part of a long one (1,000 records or
    /// more) taken before its last page.
    case didFetch(zone: ZoneID, changed: Int, deleted: Int)
    /// A request saving and deleting records is going out.
    case willSend(zone: ZoneID, saves: Int, deletes: Int)
    /// A request's results came back: how many records the server saved and deleted, and how many it
    /// answered with an error of their own (`failed`: a newer version on the server, a refusal, a wait),
    /// which the engine then merges and resends, parks or retries, as the events after this one say. A
    /// record whose lost answer the server turns out to hold is among the failed here (the server answered
    /// that its version is newer), and counts as saved in the summary.
    case didSend(zone: ZoneID, saved: Int, deleted: Int, failed: Int)
    /// A local change met a newer server version, written by another device or by this one with edits
    /// made since; the two were merged by the merge rules. Not sent when the newer version is this
    /// device's own earlier send of the same change, whose answer was lost.
    case conflictResolved(RecordID)
    /// The server refused a local change in a way the engine cannot repair; the change is parked on the
    /// device, still applied and pending (see ``RefusedChange``).
    case changeRefused(RefusedChange)
    /// The zone's local data was rebuilt or wiped.
    case zoneReset(zone: ZoneID, reason: ZoneResetReason)
    /// The account changed; the old account's local data is gone.
    case accountChanged(from: String?, to: String?)
    /// A damaged file was moved aside and the store continued without it.
    case fileQuarantined(original: String, movedTo: String, reason: String)
    /// The directory opened as a copy of another device's (a backup restored on a new phone, a folder
    /// copied by hand: its inode number is not the one noted at its first open), so it took a device ID of
    /// its own: with the other's, each would take the other's writes for its own. Its data, pending changes
    /// included, is kept; history items it writes name the new ID. Not sent when the host names the ID
    /// (``LocalStore/Options-swift.struct/deviceID``).
    case deviceIDChanged(from: String, to: String)
    /// Sending or fetching stopped, to try again by itself after `after`: the server asked to wait
    /// (throttled, busy), the network is unavailable, the engine chose to (a record that kept meeting newer
    /// versions), or something failed that waiting is unlikely to cure (also an ``error(_:)``); the problem
    /// says which, and for a push its zone. ``SyncContext/syncNow()``,
    /// ``SyncContext/networkDidBecomeAvailable()`` or a push may wake it sooner.
    case willRetry(SyncProblem, after: Duration)
    /// Sending stopped until something changes: the iCloud storage is full, or nobody is signed in.
    case paused(reason: PauseReason)
    /// Something failed (a file could not be written, a fetch could not finish, a fetched record does not
    /// read): a ``SyncProblem/Kind-swift.enum/serverError(_:)`` or a
    /// ``SyncProblem/Kind-swift.enum/deviceError(_:)`` whose code says which. For logs: when it stopped a
    /// send or fetch, a ``willRetry(_:after:)`` with the same kind and zone follows, which is the one to
    /// show a user.
    case error(SyncProblem)

    public var description: String {
        switch self {
        case .willFetch(let zone): return "will fetch \(zone)"
        case .didFetch(let zone, let changed, let deleted):
            return "fetched \(zone): \(changed) changed, \(deleted) deleted"
        case .willSend(let zone, let saves, let deletes): return "will send \(zone): \(saves) saves, \(deletes) deletes"
        case .didSend(let zone, let saved, let deleted, let failed):
            return "sent \(zone): \(saved) saved, \(deleted) deleted, \(failed) failed"
        case .conflictResolved(let id): return "conflict resolved for \(id)"
        case .changeRefused(let refusal): return "\(refusal)"
        case .zoneReset(let zone, let reason): return "zone \(zone) reset (\(reason))"
        case .accountChanged(let from, let to): return "account changed from \(from ?? "none") to \(to ?? "none")"
        case .fileQuarantined(let original, let movedTo, let reason):
            return "quarantined \(original) as \(movedTo): \(reason)"
        case .deviceIDChanged(let from, let to): return "opened as a copy: device ID \(from) became \(to)"
        case .willRetry(let problem, let after): return "will retry in \(after): \(problem)"
        case .paused(let reason): return "sending paused (\(reason))"
        case .error(let problem): return "error (\(problem.kind)): \(problem)"
        }
    }
}

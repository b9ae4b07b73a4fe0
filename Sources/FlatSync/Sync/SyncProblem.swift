/// Why ``SyncContext/syncNow()`` left something unsent or unfetched (see ``SyncSummary/problems``), and what
/// the engine does about it; also what a ``SyncEvent/willRetry(_:after:)`` waits for and what a
/// ``SyncEvent/error(_:)`` reports.
///
/// The engine tries again by itself in every case but two, which wait for the host:
/// ``Kind-swift.enum/paused(_:)`` and ``Kind-swift.enum/noStoreForZone``. So a host need not retry; it can
/// show what the kind says (offline, waiting for the server, sign in) and log the message. Kinds may be
/// added in later versions: give a `switch` a `default`.
///
/// A change the server refuses is not a problem of the sync: it is parked, and reported as
/// ``SyncEvent/changeRefused(_:)`` and in ``SyncSummary/refused``. A pause (storage full, nobody signed
/// in) is announced by ``SyncEvent/paused(reason:)``, not by ``SyncEvent/willRetry(_:after:)``, since
/// nothing is retried until the host acts; a summary lists it as ``Kind-swift.enum/paused(_:)``.
///
/// ```swift
/// let summary = try await context.syncNow()
/// for problem in summary.problems {
///     switch problem.kind {
///     case .networkUnavailable: print("Offline: your changes go out when the network returns.")
///     case .paused(.notAuthenticated): print("Sign in to iCloud to sync.")
///     default: print("Not synced yet:", problem)
///     }
/// }
/// ```
public struct SyncProblem: Sendable, Hashable, CustomStringConvertible {
    /// What stopped the sync.
    ///
    /// Later versions of FlatSync may add cases: switch over a kind with a `default`, as the example above
    /// does.
    public enum Kind: Sendable, Hashable {
        /// The server asked to wait (throttled, busy, or an error that said when to try again), or the engine
        /// chose to (a record that kept meeting newer versions). It tries again after `after`, the server's
        /// wait, or after its backoff (``SyncContext/Configuration/retryPolicy``) when that is nil; a
        /// ``SyncContext/syncNow()`` does not wait, since the user asked.
        case retryLater(after: Duration?)
        /// The network is unavailable: the engine tries again when it returns, or after its backoff.
        case networkUnavailable
        /// Sending is paused until the host acts (see ``PauseReason``). A summary lists a pause once, with
        /// no zone: it holds every zone, and a fetch that met it.
        case paused(PauseReason)
        /// The server failed a request in a way that is neither a wait nor a refusal of one change (those are
        /// parked: see above), and that trying again soon is unlikely to fix; the code says which. A send or
        /// fetch it stopped is tried again after the backoff; a subscription it refused, at the next
        /// ``SyncContext/start()`` or when the network returns. Also reported as a ``SyncEvent/error(_:)``.
        case serverError(CloudError.Code)
        /// Something failed on this device, and the code says what: its storage could not be read or written
        /// (``FlatSyncError/Code-swift.struct/ioFailed``), say, or a record fetched from the server does not
        /// read as its type (``FlatSyncError/Code-swift.struct/malformedRecord``, an event only: a host
        /// store keeps the record as the server holds it, a built-in store skips it). A send or fetch it
        /// stopped is tried again after the backoff. Also reported as a ``SyncEvent/error(_:)``.
        case deviceError(FlatSyncError.Code)
        /// Changes saved in an earlier run wait in ``SyncProblem/zone``, for which no store of this run
        /// registers a record type: they are kept, and sent once a store of that zone is registered again
        /// (``SyncContext/Configuration/recordTypes``).
        case noStoreForZone
    }

    /// What stopped the sync.
    public var kind: Kind
    /// The zone it concerns, when it concerns one: a push's problem and a zone without a store name it, a
    /// fetch's and a pause do not (they cover every zone).
    public var zone: ZoneID?
    /// What happened, in a phrase, with the server's own message when it sent one. For people and logs: its
    /// wording may change, so a program (or a test) looks at ``kind`` and ``zone``.
    public var message: String

    /// Creates a problem.
    public init(_ kind: Kind, zone: ZoneID? = nil, message: String) {
        self.kind = kind
        self.zone = zone
        self.message = message
    }

    /// A failure of the device's own (its storage, say): the code of a ``FlatSyncError``, ``FlatSyncError/Code-swift.struct/ioFailed``
    /// for any other error.
    static func onDevice(_ error: any Error, zone: ZoneID? = nil, message: String) -> SyncProblem {
        SyncProblem(.deviceError((error as? FlatSyncError)?.code ?? .ioFailed), zone: zone, message: message)
    }

    /// The problem with `context` before its message ("sending failed: …"), for an event that has no other
    /// way to say what was being done.
    func saying(_ context: String) -> SyncProblem {
        SyncProblem(kind, zone: zone, message: "\(context): \(message)")
    }

    /// The message, after the zone when there is one.
    public var description: String { zone.map { "\($0): \(message)" } ?? message }
}

extension SyncProblem.Kind: CustomStringConvertible {
    /// The kind in a word or two, for logs: `retryLater(30 seconds)`, `networkUnavailable`,
    /// `paused(quotaExceeded)`, or the error's code (`internalError`, `ioFailed`).
    public var description: String {
        switch self {
        case .retryLater(let after?): return "retryLater(\(after))"
        case .retryLater(nil): return "retryLater"
        case .networkUnavailable: return "networkUnavailable"
        case .paused(let reason): return "paused(\(reason))"
        case .serverError(let code): return code.description
        case .deviceError(let code): return code.description
        case .noStoreForZone: return "noStoreForZone"
        }
    }
}

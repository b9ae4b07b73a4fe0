#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A local change the server refused and the engine cannot repair by itself, parked on the device.
///
/// A production CloudKit container refuses, record by record, a field its deployed schema lacks (`BAD_REQUEST`), a
/// reference to a missing record (`VALIDATING_REFERENCE_ERROR`), a duplicate of a unique field, and answers some
/// records with `INTERNAL_ERROR` or codes nobody documented. Sending such a change again at once would be refused
/// again, and dropping it would lose what the user did. So the engine keeps it (unless the server gave `retryAfter`,
/// which says the change can go through later: then the push waits that long and sends it again, five times for a
/// record at most): the change stays applied locally and pending in the command log (it survives restarts, `kill -9`
/// and power loss like any pending change), is announced by ``SyncEvent/changeRefused(_:)``, and is sent again
/// only when asked — by the next ``SyncContext/start()`` and by every ``SyncContext/syncNow()`` — once whatever the
/// server objected to may have been fixed (a schema deployed, say), or when the user changes the record again (the
/// newer change goes out at once, as any change does, together with the refused one, which it joins: a refusal
/// of the record then parks both). It leaves only when the server takes it, when the host discards it with
/// ``SyncContext/discardRefusedChanges(_:)``, or with its zone (the user deleted the zone) or account. Discarding
/// works by record: it drops every pending change of the record, a later edit of another field included, and
/// puts the server's version back.
public struct RefusedChange: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The record whose change was refused.
    public var recordID: RecordID
    /// True when the refused change was a delete.
    public var isDelete: Bool
    /// The error's code as FlatSync maps it (``CloudError/Code-swift.struct/invalidArguments`` for
    /// `BAD_REQUEST`, say).
    public var code: CloudError.Code
    /// The server's own name for the error, such as `BAD_REQUEST`, when it gave one; nil also when the
    /// engine refused the change itself: a save that met a record of another type under its name
    /// (``CloudError/Code-swift.struct/invalidArguments``), which the server holds and nothing can merge.
    public var serverErrorCode: String?
    /// The server's reason, as it gave it, or the engine's when it refused the change itself.
    public var reason: String
    /// When the server refused it (the device's clock).
    public var refusedAt: Date
    /// The sequence number of the refused change (its place in the log): a newer local change of
    /// the record is not held back by this refusal.
    public var changeSequence: UInt64

    /// A refusal of the change to `recordID`.
    public init(
        recordID: RecordID, isDelete: Bool, code: CloudError.Code, serverErrorCode: String? = nil, reason: String,
        refusedAt: Date, changeSequence: UInt64 = 0
    ) {
        self.recordID = recordID
        self.isDelete = isDelete
        self.code = code
        self.serverErrorCode = serverErrorCode
        self.reason = reason
        self.refusedAt = refusedAt
        self.changeSequence = changeSequence
    }

    /// The refusal of `change` by `error`.
    init(_ change: RecordChange, error: CloudError, at date: Date) {
        self.init(
            recordID: change.recordID, isDelete: change.isDelete, code: error.code,
            serverErrorCode: error.serverErrorCode, reason: error.message, refusedAt: date,
            changeSequence: change.sequence)
    }

    public var description: String {
        "the \(isDelete ? "delete" : "save") of \(recordID) was refused (\(serverErrorCode ?? code.name)): \(reason)"
    }
}

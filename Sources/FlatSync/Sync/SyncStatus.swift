#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A snapshot of what a context is doing (``SyncContext/status()``).
public struct SyncStatus: Sendable, Hashable {
    /// The signed-in account.
    public var account: String?
    /// Commands waiting to be sent.
    public var pendingCommands: Int
    /// Record changes waiting to be sent, refused ones included.
    public var pendingRecords: Int
    /// Pending record changes the server refused, parked until retried or discarded (see
    /// ``RefusedChange``).
    public var refusedRecords: Int
    /// Why sending is paused, if it is.
    public var paused: PauseReason?
    /// Zones waiting to retry a failed send.
    public var retrying: [ZoneID]
    /// Zones known to exist on the server.
    public var preparedZones: [ZoneID]
    /// Entries on the reading list.
    public var readingListCount: Int
    /// Items in the history.
    public var historyCount: Int
}

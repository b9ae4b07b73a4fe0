#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The net changes to a zone since a change token.
public struct ZoneChanges: Hashable, Sendable {
    /// Records created or changed, each once, as the server holds them now.
    public var changedRecords: [Record]
    /// Records that existed at the token and have been deleted since.
    public var deletedRecordIDs: [RecordID]
    /// The token to fetch from next time.
    public var token: ChangeToken
    /// True when more changes wait: call again with ``token``.
    public var moreComing: Bool

    /// A page of zone changes; transports build it.
    public init(changedRecords: [Record], deletedRecordIDs: [RecordID], token: ChangeToken, moreComing: Bool) {
        self.changedRecords = changedRecords
        self.deletedRecordIDs = deletedRecordIDs
        self.token = token
        self.moreComing = moreComing
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The server FlatSync syncs with, modelled on a CloudKit private database.
///
/// Implementations in this package: `InMemoryCloud` and `DirectoryCloud` (in `FlatSyncTesting`).
/// All of them pass the same conformance suite, so the engine sees the same semantics from each.
///
/// Every method throws ``CloudError``. Request-level failures (the network, throttling, an expired
/// token) are thrown; per-record failures of ``modifyRecords(saving:deleting:atomically:)`` come back
/// in its result.
public protocol CloudTransport: Sendable {
    /// The most saves plus deletes one ``modifyRecords(saving:deleting:atomically:)`` call accepts;
    /// more fails with ``CloudError/Code-swift.struct/limitExceeded``.
    var maximumOperationsPerRequest: Int { get }

    /// The zones that exist.
    func listZones() async throws -> [ZoneID]

    /// Creates zones; creating a zone that exists is not an error.
    func createZones(_ zones: [ZoneID]) async throws

    /// Deletes zones and every record in them, as an app would (not as the user).
    func deleteZones(_ zones: [ZoneID]) async throws

    /// The zones that changed or were deleted since `token` (`nil`: since the beginning).
    func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges

    /// The net changes to one zone since `token` (`nil`: everything), at most `resultsLimit` records
    /// and deletions per call; ``ZoneChanges/moreComing`` says to call again with the returned token.
    func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws
        -> ZoneChanges

    /// Saves and deletes records, returning a result for each one.
    ///
    /// - Parameters:
    ///   - saves: records to save, each with its ``SavePolicy``.
    ///   - deletes: records to delete, each with its ``DeletePolicy``.
    ///   - atomically: when true, either every change applies or none does; the records that did not
    ///     fail themselves fail with ``CloudError/Code-swift.struct/batchRequestFailed``.
    func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
        async throws -> ModifyRecordsResult

    /// The records with these IDs that exist; IDs that do not exist are left out of the result.
    func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record]

    /// Makes sure the server notifies this account's devices of changes in these zones: one zone
    /// subscription per zone (CloudKit's `CKRecordZoneSubscription`), created where none exists.
    ///
    /// Succeeds when the subscriptions already exist, whoever made them (another device of the account,
    /// say); never deletes one. Subscriptions belong to the account, not to the device, so once made they
    /// serve every device. A transport whose server cannot push implements it as a no-op: the engine then
    /// learns of changes only when it fetches.
    ///
    /// - Throws: ``CloudError``; ``CloudError/Code-swift.struct/zoneNotFound`` when a zone does not exist.
    func subscribeToChanges(in zones: [ZoneID]) async throws
}

/// How the server treats a save when it already has a version of the record.
public enum SavePolicy: String, Hashable, Sendable, Codable, CaseIterable {
    /// Save only if the server's change tag equals the one sent (`nil`: only if the record does not
    /// exist); otherwise fail with ``CloudError/Code-swift.struct/serverRecordChanged`` carrying the
    /// server's record. A save with a tag for a record that no longer exists fails with
    /// ``CloudError/Code-swift.struct/unknownItem``. Only the sent fields change; the record's other
    /// fields — those another client wrote among them — keep their values (CloudKit Web Services'
    /// `update`, and what a native save of a record's changed keys does).
    case ifServerRecordUnchanged
    /// As ``ifServerRecordUnchanged``, but the sent fields replace the record's: a field not sent is
    /// removed (CloudKit Web Services' `replace`). For a save that stands for a delete followed by a new
    /// record, which takes whatever the deleted record held with it.
    case replaceIfServerRecordUnchanged
    /// Save without checking the change tag, writing only the fields sent; other fields keep their
    /// server values. Creates the record if it is missing.
    case changedKeys
    /// Save without checking the change tag, replacing every field. Creates the record if it is missing.
    case allKeys
}

/// How the server treats a delete when the record changed since the client saw it.
public enum DeletePolicy: String, Hashable, Sendable, Codable, CaseIterable {
    /// Delete only if the server's change tag equals the one sent (`nil`: the client never saw the
    /// record); otherwise fail with ``CloudError/Code-swift.struct/serverRecordChanged`` carrying the
    /// server's record. Deleting a record that does not exist succeeds.
    case ifServerRecordUnchanged
    /// Delete whatever the server holds. Deleting a record that does not exist succeeds.
    case force
}

/// One record to save and how.
public struct RecordSave: Hashable, Sendable, Codable {
    /// The record; its ``Record/changeTag`` is the version the client last saw.
    public var record: Record
    /// What to do if the server's version differs.
    public var policy: SavePolicy

    /// A save of `record` under `policy`.
    public init(_ record: Record, policy: SavePolicy = .ifServerRecordUnchanged) {
        self.record = record
        self.policy = policy
    }
}

/// One record to delete and how.
public struct RecordDeletion: Hashable, Sendable, Codable {
    /// The record to delete.
    public var id: RecordID
    /// The change tag the client last saw for the record, or `nil` if it never saw one.
    public var changeTag: ChangeTag?
    /// What to do if the server's version differs.
    public var policy: DeletePolicy

    /// A delete of the record `id`, last seen with `changeTag`, under `policy`.
    public init(_ id: RecordID, changeTag: ChangeTag? = nil, policy: DeletePolicy = .ifServerRecordUnchanged) {
        self.id = id
        self.changeTag = changeTag
        self.policy = policy
    }
}

/// What a ``CloudTransport/modifyRecords(saving:deleting:atomically:)`` call did, record by record.
public struct ModifyRecordsResult: Hashable, Sendable {
    /// The saved records as the server now holds them, with their new change tags.
    public var saved: [RecordID: Record]
    /// The records deleted (or already absent).
    public var deleted: Set<RecordID>
    /// The records that failed, with why.
    public var failed: [RecordID: CloudError]

    /// A result; transports build it.
    public init(saved: [RecordID: Record] = [:], deleted: Set<RecordID> = [], failed: [RecordID: CloudError] = [:]) {
        self.saved = saved
        self.deleted = deleted
        self.failed = failed
    }

    /// The failures as one ``CloudError/Code-swift.struct/partialFailure`` error, or `nil` if every
    /// record succeeded.
    public var partialFailure: CloudError? {
        guard !failed.isEmpty else { return nil }
        return CloudError(.partialFailure, "\(failed.count) of the records failed", partialErrors: failed)
    }
}

/// The zones that changed since a database change token.
public struct DatabaseChanges: Hashable, Sendable {
    /// Zones with changed or deleted records (or newly created).
    public var changedZones: [ZoneID]
    /// Zones deleted since the token, with who deleted them. A zone deleted and created again since
    /// the token is listed here and in ``changedZones``.
    public var deletedZones: [ZoneDeletion]
    /// The token to fetch from next time.
    public var token: ChangeToken
    /// True when more changes wait: call again with ``token``.
    public var moreComing: Bool

    /// A page of database changes; transports build it.
    public init(changedZones: [ZoneID], deletedZones: [ZoneDeletion], token: ChangeToken, moreComing: Bool) {
        self.changedZones = changedZones
        self.deletedZones = deletedZones
        self.token = token
        self.moreComing = moreComing
    }
}

/// A zone that was deleted, and by whom.
public struct ZoneDeletion: Hashable, Sendable, Codable {
    /// Who deleted a zone.
    public enum Reason: String, Hashable, Sendable, Codable {
        /// An app deleted it through the API.
        case deleted
        /// The user deleted it (from Settings, say), or it was purged; its data must not be re-uploaded.
        case deletedByUser
        /// The server did not say who deleted it: CloudKit Web Services reports a deleted zone without a
        /// reason (`"deleted": true`), where the native API says whether it was purged.
        case unknown
    }

    /// The deleted zone.
    public var zone: ZoneID
    /// Who deleted it.
    public var reason: Reason

    /// A zone deletion.
    public init(zone: ZoneID, reason: Reason) {
        self.zone = zone
        self.reason = reason
    }
}

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

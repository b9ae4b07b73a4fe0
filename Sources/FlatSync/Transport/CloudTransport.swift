#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The server FlatSync syncs with, modelled on a CloudKit private database.
///
/// Implementations in this package: `CloudKitWebServicesTransport` (in `FlatSyncCloudKit`), Apple's
/// server, and `InMemoryCloud` and `DirectoryCloud` (in `FlatSyncTesting`), for tests and demos. All of
/// them pass the same conformance suite, so the engine sees the same semantics from each.
///
/// Every request throws ``CloudError`` (or `CancellationError`, when its task is cancelled);
/// ``prepareToWrite(_:)``, which sends nothing, throws ``FlatSyncError``. Request-level failures (the
/// network, throttling, an expired token) are thrown; per-record failures of
/// ``modifyRecords(saving:deleting:atomically:)`` come back in its result.
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

    /// The bytes of an asset a record holds (see ``CloudAsset``): what a host reads through
    /// ``SyncContext/data(of:in:)``, which calls this.
    ///
    /// - Throws: ``CloudError``; ``CloudError/Code-swift.struct/unknownItem`` when the server has no such bytes
    ///   or no longer honours the way `asset` says to fetch them (CloudKit's download links expire): a fresh
    ///   copy of the record has a fresh asset to try.
    func downloadAsset(_ asset: CloudAsset) async throws -> Data

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

    /// Prepares the transport to write records of `schema`'s types, or throws when it cannot: one that
    /// writes within a schema of its own (as the CloudKit Web Services transport does) adds these types to
    /// it, and throws when it already declares one of their fields as another type.
    ///
    /// A ``SyncContext`` calls it with the schema of its stores when it is given the transport, so that a
    /// host declares its types once, and a disagreement fails there, not as every record of a type refused.
    /// A transport that writes any record does nothing; one that wraps another passes the call on (it has
    /// no default, so that a wrapper cannot leave its transport unprepared by forgetting it).
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/invalidArgument``, naming the problem.
    func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError)
}

import Dispatch
import FlatSync
import Foundation

/// A CloudKit-style server kept in a directory, which several processes can use at once: two demo
/// processes sharing one act as two devices on one account.
///
/// The semantics are ``InMemoryCloud``'s (both serve requests through `CloudDatabase`). Each request
/// takes an exclusive `flock` on the directory's lock file, reads and checks the state file, applies
/// the request, writes the state back durably (temporary file, `fsync`, rename, directory `fsync`) if
/// anything changed, and lets go. Requests from any number of processes are therefore serialized and
/// never lost or torn. The waiting and the file work run on a Dispatch queue, never on the Swift
/// concurrency pool's threads.
///
/// The state file holds the zone subscriptions (a file from before they were kept opens without any), and
/// the fault plan and its random generator too, so a seeded ``FaultPlan`` gives
/// the same sequence of faults whichever process sends the requests, and the counters count the
/// requests of every process.
///
/// A damaged state file (a bad checksum, a wrong length, bytes that do not decode) makes every request
/// fail with `CloudError.Code.internalError` and a message naming the file; the file is
/// never overwritten, so nothing is lost silently. Move it aside to start over with an empty cloud.
///
/// # Usage
///
/// ```swift
/// let cloud = try DirectoryCloud(directory: URL(fileURLWithPath: ".flatsync/cloud"))
/// try await cloud.createZones(ZoneID.builtIn)
/// try await cloud.setFaultPlan(.random(rate: 0.2, seed: 42))   // seen by every process
/// print(try await cloud.counters())
/// ```
public struct DirectoryCloud: CloudTransport, CloudDatabaseServing {
    /// The directory holding the state file and the lock file.
    public let directory: URL
    /// When not `nil`, the history limit every request through this value sets on the directory
    /// before it is served (see ``CloudAdministration/setChangeHistoryLimit(_:)``).
    public let changeHistoryLimit: Int?
    /// Where the file-system calls go.
    package let fileSystem: FileSystem

    /// The name of the file holding the server's state.
    public static let stateFileName = "cloud-state"
    /// The name of the lock file, which is never renamed or removed.
    public static let lockFileName = "lock"

    /// At most `CloudDatabase.maximumOperationsPerRequest` (400) operations per modify request.
    public var maximumOperationsPerRequest: Int { CloudDatabase.maximumOperationsPerRequest }

    /// Nothing to prepare: the cloud stores any record (a production schema, when set, refuses as CloudKit
    /// does, request by request).
    public func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) {}

    /// The file holding the server's state.
    public var stateFile: URL { directory.appendingPathComponent(Self.stateFileName) }

    /// Uses `directory` as a server, creating it (mode `0700`) if needed. An empty directory is an
    /// empty server; the state file is written by the first request.
    ///
    /// - Parameters:
    ///   - directory: the directory shared by every process using this server.
    ///   - changeHistoryLimit: how many record changes each zone keeps. `nil` leaves the directory's
    ///     setting as it is (no limit for a new directory); a number is applied by every request sent
    ///     through this value, so give every process the same one.
    /// - Throws: `CloudError.Code.internalError` when the directory cannot be created.
    public init(directory: URL, changeHistoryLimit: Int? = nil) throws(CloudError) {
        try self.init(directory: directory, changeHistoryLimit: changeHistoryLimit, fileSystem: .posix)
    }

    /// ``init(directory:changeHistoryLimit:)`` with every file-system call going to `fileSystem`.
    package init(directory: URL, changeHistoryLimit: Int? = nil, fileSystem: FileSystem) throws(CloudError) {
        precondition((changeHistoryLimit ?? 0) >= 0, "changeHistoryLimit must not be negative")
        self.directory = directory.standardizedFileURL
        self.changeHistoryLimit = changeHistoryLimit
        self.fileSystem = fileSystem
        do {
            // Its entry (and each new parent's) is made durable before any request writes state into it;
            // before the first request, the entries of the parents that already existed too.
            let firstUse = !fileSystem.exists(self.directory.appendingPathComponent(Self.stateFileName).path)
            try fileSystem.createDirectory(self.directory.path, permissions: 0o700, flushingExistingParents: firstUse)
        } catch {
            throw CloudError(
                .internalError,
                "Could not create the DirectoryCloud directory \(self.directory.path): \(error.message)"
            )
        }
    }

    // MARK: - CloudTransport

    /// The zones that exist. Served under the directory's lock from its state file, counted and faulted as
    /// ``InMemoryCloud`` serves it.
    public func listZones() async throws -> [ZoneID] {
        try await request(.listZones) { $0.listZones() }
    }

    /// Creates zones; creating a zone that exists is not an error. Served under the directory's lock from its
    /// state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func createZones(_ zones: [ZoneID]) async throws {
        try await request(.createZones) { (database) throws(CloudError) in try database.createZones(zones) }
    }

    /// Deletes zones and every record in them, as an app would (not as the user). Served under the directory's
    /// lock from its state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func deleteZones(_ zones: [ZoneID]) async throws {
        try await request(.deleteZones) { (database) throws(CloudError) in try database.deleteZones(zones) }
    }

    /// The zones that changed or were deleted since `token` (`nil`: since the beginning). Served under the
    /// directory's lock from its state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        try await request(.fetchDatabaseChanges) { (database) throws(CloudError) in
            try database.fetchDatabaseChanges(since: token)
        }
    }

    /// The net changes to one zone since `token` (`nil`: everything), at most `resultsLimit` records and deletions
    /// per call. Served under the directory's lock from its state file, counted and faulted as ``InMemoryCloud``
    /// serves it.
    public func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws
        -> ZoneChanges
    {
        try await request(.fetchZoneChanges) { (database) throws(CloudError) in
            try database.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
        }
    }

    /// Saves and deletes records, returning a result for each one (all or none when `atomically`). Served under
    /// the directory's lock from its state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
        async throws -> ModifyRecordsResult
    {
        try await CloudDatabase.modifyUploading(saving: saves, deleting: deletes, atomically: atomically) { body in
            try await request(.modifyRecords, records: saves.map(\.record.id) + deletes.map(\.id), body)
        }
    }

    /// The records with these IDs that exist; IDs that do not exist are left out of the result. Served under the
    /// directory's lock from its state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] {
        try await request(.lookupRecords) { (database) throws(CloudError) in try database.lookupRecords(ids) }
    }

    /// The bytes of an asset an upload stored (see ``uploadAsset(_:)``). Served under the directory's lock from its
    /// state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func downloadAsset(_ asset: CloudAsset) async throws -> Data {
        try await request(.downloadAsset) { (database) throws(CloudError) in
            try database.assetData(asset)
        }
    }

    /// Makes sure each zone has a zone subscription, created where none exists. Served under the directory's lock
    /// from its state file, counted and faulted as ``InMemoryCloud`` serves it.
    public func subscribeToChanges(in zones: [ZoneID]) async throws {
        try await request(.modifySubscriptions) { (database) throws(CloudError) in
            try database.subscribeToChanges(in: zones)
        }
    }

    // MARK: - CloudAdministration

    /// Makes every change token minted so far fail with `CloudError.Code.changeTokenExpired`. Under the
    /// directory's lock, for every process sharing it; not counted and never faulted.
    public func expireAllChangeTokens() async throws {
        try await administer { $0.expireAllChangeTokens() }
    }

    /// Makes the change tokens minted so far for one zone fail with `CloudError.Code.changeTokenExpired`. Under
    /// the directory's lock, for every process sharing it; not counted and never faulted.
    public func expireChangeTokens(in zone: ZoneID) async throws {
        try await administer { $0.expireChangeTokens(in: zone) }
    }

    /// Deletes a zone and its records as the user would from Settings. Under the directory's lock, for every
    /// process sharing it; not counted and never faulted.
    public func deleteZoneAsUser(_ zone: ZoneID) async throws {
        try await administer { (database) throws(CloudError) in try database.deleteZoneAsUser(zone) }
    }

    /// Replaces the fault plan (and restarts its random generator from the plan's seed). Under the directory's
    /// lock, for every process sharing it; not counted and never faulted.
    public func setFaultPlan(_ plan: FaultPlan) async throws {
        try await administer { $0.setFaultPlan(plan) }
    }

    /// The fault plan as it stands: scripted faults already used up are gone. Under the directory's lock, for
    /// every process sharing it; not counted and never faulted.
    public func faultPlan() async throws -> FaultPlan {
        try await administer { $0.faultPlan }
    }

    /// Sets how many record changes each zone keeps (`nil`: all). Under the directory's lock, for every process
    /// sharing it; not counted and never faulted.
    public func setChangeHistoryLimit(_ limit: Int?) async throws {
        try await administer { $0.setChangeHistoryLimit(limit) }
    }

    /// Makes the server a production environment deployed with `schema` (`nil`: a development one). Under the
    /// directory's lock, for every process sharing it; not counted and never faulted.
    public func setProductionSchema(_ schema: CloudSchema?) async throws {
        try await administer { $0.setProductionSchema(schema) }
    }

    /// The production schema the server enforces, or `nil` in development. Under the directory's lock, for every
    /// process sharing it; not counted and never faulted.
    public func productionSchema() async throws -> CloudSchema? {
        try await administer { $0.productionSchema }
    }

    /// What the server has served since it was created or the counters were reset. Under the directory's lock, for
    /// every process sharing it; not counted and never faulted.
    public func counters() async throws -> CloudCounters {
        try await administer { $0.counters }
    }

    /// Sets every counter back to zero. Under the directory's lock, for every process sharing it; not counted and
    /// never faulted.
    public func resetCounters() async throws {
        try await administer { $0.resetCounters() }
    }

    /// Stores bytes as another client's upload would and returns the field value its save carries to attach
    /// them. Under the directory's lock, for every process sharing it; not counted and never faulted.
    public func uploadAsset(_ data: Data) async throws -> FieldValue {
        try await administer { $0.uploadAsset(data) }
    }

    /// The records the server holds in `zone`, sorted by name, with their change tags. Under the directory's lock,
    /// for every process sharing it; not counted and never faulted.
    public func records(in zone: ZoneID) async throws -> [Record] {
        try await administer { $0.records(in: zone) }
    }

    /// The zone subscriptions the server holds, sorted by ID. Under the directory's lock, for every process
    /// sharing it; not counted and never faulted.
    public func subscriptions() async throws -> [CloudSubscription] {
        try await administer { $0.subscriptions() }
    }

    // MARK: - Transactions

    /// Blocking waits for the lock and file I/O run here, off the Swift concurrency pool. Concurrent, so
    /// requests of one process queue on the `flock` like those of other processes.
    private static let queue = DispatchQueue(label: "FlatSync.DirectoryCloud", attributes: .concurrent)

    /// Serves a client request: counted and subject to the fault plan.
    private func request<T: Sendable>(
        _ kind: RequestKind,
        records: [RecordID] = [],
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> T
    ) async throws(CloudError) -> T {
        try await transaction { (database) throws(CloudError) in try database.perform(kind, records: records, body) }
    }

    // MARK: - CloudDatabaseServing

    /// Serves one request under the directory's lock, like the `CloudTransport` calls.
    package func serve<Response: Sendable>(
        _ kind: RequestKind,
        records: [RecordID],
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> Response
    ) async throws -> Response {
        try await request(kind, records: records, body)
    }

    /// Runs an administration call: neither counted nor faulted.
    private func administer<T: Sendable>(
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> T
    ) async throws(CloudError) -> T {
        try await transaction(body)
    }

    /// Runs `body` on the directory's state under its lock, on the Dispatch queue.
    private func transaction<T: Sendable>(
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> T
    ) async throws(CloudError) -> T {
        let result: Result<T, CloudError> = await withCheckedContinuation { continuation in
            Self.queue.async {
                continuation.resume(returning: Result { () throws(CloudError) in try self.lockedTransaction(body) })
            }
        }
        return try result.get()
    }

    /// Takes the lock, loads the state, applies `body`, saves the state if it changed, lets go. Blocks.
    private func lockedTransaction<T>(_ body: (inout CloudDatabase) throws(CloudError) -> T) throws(CloudError) -> T {
        let lock: DirectoryLock
        do {
            lock = try DirectoryLock.acquire(
                in: directory, name: Self.lockFileName, blocking: true, fileSystem: fileSystem)
        } catch {
            throw CloudError(
                .internalError, "Could not lock the DirectoryCloud directory \(directory.path): \(error.message)"
            )
        }
        defer { lock.release() }

        let file = stateFile
        var database =
            try CloudStateFile.read(file, fileSystem: fileSystem)
            ?? CloudDatabase(changeHistoryLimit: changeHistoryLimit)
        let before = database
        if let changeHistoryLimit, database.changeHistoryLimit != changeHistoryLimit {
            database.setChangeHistoryLimit(changeHistoryLimit)
        }
        // Whatever `body` does, a change it made (if only to the counters or the fault plan) is saved,
        // as a server would keep it, before its result or error goes back.
        let outcome = Result { () throws(CloudError) in try body(&database) }
        if database != before {
            fileSystem.removeFiles(
                in: directory.path, withPrefix: DurableFileWriter.temporaryPrefix + Self.stateFileName)
            try CloudStateFile.write(database, to: file, fileSystem: fileSystem)
        }
        return try outcome.get()
    }
}

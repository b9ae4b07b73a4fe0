import FlatSyncTestSupport
import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Testing

/// A server the conformance suite can drive: the transport plus the administration calls its tests
/// use to set the scene (faults, expired tokens, zones deleted by the user) and to look behind it.
typealias TestCloud = CloudTransport & CloudAdministration

/// The implementations the conformance suite runs against. A new transport joins the suite by adding
/// a case and building it in ``withCloud(changeHistoryLimit:_:)``.
enum CloudUnderTest: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case inMemory
    case directory
    /// `CloudKitWebServicesTransport` → HTTP on 127.0.0.1 → `CloudKitWebServicesServer` → `InMemoryCloud`.
    case http
    /// The same, with a `DirectoryCloud` behind the server.
    case httpDirectory

    var testDescription: String { rawValue }

    /// True when requests go through CloudKit Web Services (the transport and the emulator).
    var isHTTP: Bool { self == .http || self == .httpDirectory }

    /// The most operations one modify request may carry: CloudKit.framework's 400, CKWS's 200.
    var operationLimit: Int { isHTTP ? 200 : CloudDatabase.maximumOperationsPerRequest }

    /// The code a client of this cloud sees for `code`. CloudKit documents no code for a busy zone, a request
    /// over a limit or a zone the user deleted: through CloudKit Web Services the emulator sends the
    /// documented one a real server most plausibly sends (see `CloudKitWireError`), which the transport
    /// maps to a code of its own.
    func seen(_ code: CloudError.Code) -> CloudError.Code {
        guard isHTTP else { return code }
        switch code {
        case .zoneBusy: return .serviceUnavailable
        case .limitExceeded: return .invalidArguments
        case .userDeletedZone: return .zoneNotFound
        default: return code
        }
    }

    /// Who deleted a zone, as this cloud reports it: CloudKit Web Services reports a deletion without saying
    /// who (no `purged` flag is documented or observed).
    func seen(_ reason: ZoneDeletion.Reason) -> ZoneDeletion.Reason {
        isHTTP ? .unknown : reason
    }

    /// True when the client refuses a malformed request itself rather than sending it.
    var refusesMalformedRequests: Bool { isHTTP }

    /// Runs `body` with a new, empty server of this kind, and removes whatever it left on disk.
    func withCloud(changeHistoryLimit: Int? = nil, _ body: (any TestCloud) async throws -> Void) async throws {
        switch self {
        case .inMemory:
            try await body(InMemoryCloud(changeHistoryLimit: changeHistoryLimit))
        case .directory:
            try await withTemporaryDirectory { directory in
                try await body(DirectoryCloud(directory: directory, changeHistoryLimit: changeHistoryLimit))
            }
        case .http:
            try await HTTPTestCloud.with(backing: InMemoryCloud(changeHistoryLimit: changeHistoryLimit), body)
        case .httpDirectory:
            try await withTemporaryDirectory { directory in
                try await HTTPTestCloud.with(
                    backing: DirectoryCloud(directory: directory, changeHistoryLimit: changeHistoryLimit), body)
            }
        }
    }

    /// Runs `body` with two unrelated servers of this kind (for tokens from "another server").
    func withTwoClouds(_ body: (any TestCloud, any TestCloud) async throws -> Void) async throws {
        try await withCloud { first in
            try await withCloud { second in
                try await body(first, second)
            }
        }
    }
}

/// Runs `body` with a new empty directory, removed afterwards.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("flatsync-cloud-tests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

// MARK: - Records

extension ZoneID {
    /// The zone most conformance tests use.
    static let notes = ZoneID("Notes")
    /// A second zone, for tests about several zones.
    static let photos = ZoneID("Photos")
}

/// A record in `zone` named `name`, with a `value` field unless `fields` says otherwise.
func makeRecord(
    _ name: String,
    in zone: ZoneID = .notes,
    _ fields: [String: FieldValue]? = nil,
    tag: ChangeTag? = nil
) -> Record {
    Record(
        id: RecordID(zone: zone, name: name), type: "Note", fields: fields ?? ["value": .string(name)], changeTag: tag)
}

func recordID(_ name: String, in zone: ZoneID = .notes) -> RecordID {
    RecordID(zone: zone, name: name)
}

extension CloudTransport {
    /// Saves records with one policy in one request and returns the result.
    @discardableResult
    func save(_ records: [Record], policy: SavePolicy = .ifServerRecordUnchanged, atomically: Bool = false)
        async throws -> ModifyRecordsResult
    {
        try await modifyRecords(
            saving: records.map { RecordSave($0, policy: policy) }, deleting: [], atomically: atomically)
    }

    /// Saves one record that must succeed, returning it as the server holds it.
    func saveOne(_ record: Record, policy: SavePolicy = .ifServerRecordUnchanged) async throws -> Record {
        let result = try await save([record], policy: policy)
        #expect(result.failed.isEmpty, "saving \(record.id) failed: \(result.failed)")
        return try #require(result.saved[record.id])
    }

    /// Deletes records with one policy in one request and returns the result.
    @discardableResult
    func delete(_ deletions: [RecordDeletion], atomically: Bool = false) async throws -> ModifyRecordsResult {
        try await modifyRecords(saving: [], deleting: deletions, atomically: atomically)
    }

    /// Force-deletes records by name.
    @discardableResult
    func forceDelete(_ names: [String], in zone: ZoneID = .notes) async throws -> ModifyRecordsResult {
        try await delete(names.map { RecordDeletion(recordID($0, in: zone), policy: .force) })
    }

    /// A token at the zone's current position (fetching everything since `nil`).
    func currentToken(_ zone: ZoneID = .notes) async throws -> ChangeToken {
        try await fetchAll(zone).token
    }

    /// Every page of changes since `token`, merged: the last token, the records by ID (later pages
    /// win), the deleted IDs, and the number of pages.
    func fetchAll(_ zone: ZoneID = .notes, since token: ChangeToken? = nil, resultsLimit: Int = 1_000)
        async throws -> (token: ChangeToken, changed: [RecordID: Record], deleted: Set<RecordID>, pages: Int)
    {
        var token = token
        var changed: [RecordID: Record] = [:]
        var deleted: Set<RecordID> = []
        var pages = 0
        while true {
            let page = try await fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
            pages += 1
            for record in page.changedRecords {
                changed[record.id] = record
                deleted.remove(record.id)
            }
            for id in page.deletedRecordIDs {
                changed[id] = nil
                deleted.insert(id)
            }
            token = page.token
            if !page.moreComing { return (page.token, changed, deleted, pages) }
        }
    }
}

/// Runs `operation` and returns the CloudError it throws, recording an issue if it throws nothing or
/// something else.
func cloudError(
    sourceLocation: SourceLocation = #_sourceLocation,
    _ operation: () async throws -> Void
) async -> CloudError? {
    do {
        try await operation()
        Issue.record("expected a CloudError, got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as CloudError {
        return error
    } catch {
        Issue.record("expected a CloudError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Expects `operation` to throw a CloudError with `code`, and returns it.
@discardableResult
func expectCloudError(
    _ code: CloudError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ operation: () async throws -> Void
) async -> CloudError? {
    let error = await cloudError(sourceLocation: sourceLocation, operation)
    #expect(error?.code == code, "\(error.map(String.init(describing:)) ?? "no error")", sourceLocation: sourceLocation)
    return error
}

/// A cloud reached through CloudKit Web Services: the transport's calls go over HTTP to an emulator on
/// 127.0.0.1; administration goes straight to the cloud behind it (it is not part of CKWS).
struct HTTPTestCloud: CloudTransport, CloudAdministration {
    let transport: CloudKitWebServicesTransport
    let backing: any CloudDatabaseServing

    /// Runs `body` with an emulator over `backing`, stopped afterwards whatever `body` did.
    static func with(backing: some CloudDatabaseServing, _ body: (any TestCloud) async throws -> Void) async throws {
        let server = try CloudKitWebServicesServer(serving: backing, options: .init())
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "conformance",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL, schema: nil))
        do {
            try await body(HTTPTestCloud(transport: transport, backing: backing))
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    var maximumOperationsPerRequest: Int { transport.maximumOperationsPerRequest }
    func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) { try transport.prepareToWrite(schema) }
    func listZones() async throws -> [ZoneID] { try await transport.listZones() }
    func createZones(_ zones: [ZoneID]) async throws { try await transport.createZones(zones) }
    func deleteZones(_ zones: [ZoneID]) async throws { try await transport.deleteZones(zones) }
    func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        try await transport.fetchDatabaseChanges(since: token)
    }
    func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws -> ZoneChanges {
        try await transport.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit)
    }
    func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool)
        async throws -> ModifyRecordsResult
    {
        try await transport.modifyRecords(saving: saves, deleting: deletes, atomically: atomically)
    }
    func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] { try await transport.lookupRecords(ids) }
    func downloadAsset(_ asset: CloudAsset) async throws -> Data { try await transport.downloadAsset(asset) }
    func subscribeToChanges(in zones: [ZoneID]) async throws { try await transport.subscribeToChanges(in: zones) }

    func expireAllChangeTokens() async throws { try await backing.expireAllChangeTokens() }
    func expireChangeTokens(in zone: ZoneID) async throws { try await backing.expireChangeTokens(in: zone) }
    func deleteZoneAsUser(_ zone: ZoneID) async throws { try await backing.deleteZoneAsUser(zone) }
    func setFaultPlan(_ plan: FaultPlan) async throws { try await backing.setFaultPlan(plan) }
    func faultPlan() async throws -> FaultPlan { try await backing.faultPlan() }
    func setChangeHistoryLimit(_ limit: Int?) async throws { try await backing.setChangeHistoryLimit(limit) }
    func setProductionSchema(_ schema: CloudSchema?) async throws { try await backing.setProductionSchema(schema) }
    func productionSchema() async throws -> CloudSchema? { try await backing.productionSchema() }
    func counters() async throws -> CloudCounters { try await backing.counters() }
    func resetCounters() async throws { try await backing.resetCounters() }
    func records(in zone: ZoneID) async throws -> [Record] { try await backing.records(in: zone) }
    func subscriptions() async throws -> [CloudSubscription] { try await backing.subscriptions() }
    func uploadAsset(_ data: Data) async throws -> FieldValue { try await backing.uploadAsset(data) }
}

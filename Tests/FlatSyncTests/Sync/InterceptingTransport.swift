import FlatSyncTesting
import Foundation
import Synchronization

@testable import FlatSync

/// Wraps a transport and runs a hook before each request, numbered per kind from 1, so a test can act
/// at an exact point: expire tokens before the second page, hold a fetch in flight, count calls.
final class InterceptingTransport: CloudTransport, Sendable {
    typealias Hook = @Sendable (_ kind: RequestKind, _ number: Int) async -> Void

    let base: any CloudTransport
    private let hook: Hook
    private let databaseChanges: @Sendable (_ token: ChangeToken?, DatabaseChanges) -> DatabaseChanges
    private let zoneChanges: @Sendable (_ token: ChangeToken?, ZoneChanges) -> ZoneChanges
    private let modifyResult: @Sendable (_ number: Int, ModifyRecordsResult) -> ModifyRecordsResult
    private let counts = Mutex<[RequestKind: Int]>([:])

    /// - Parameters:
    ///   - databaseChanges: what the transport answers to `fetchDatabaseChanges(since:)`, given the token
    ///     asked with and the base transport's answer: for answers the emulators never give.
    ///   - zoneChanges: the same for `fetchZoneChanges(in:since:resultsLimit:)`.
    ///   - modifyResult: what it answers to the `number`th `modifyRecords`, given the base transport's
    ///     answer (the base applied the request either way).
    init(
        _ base: any CloudTransport, before hook: @escaping Hook = { _, _ in },
        databaseChanges: @escaping @Sendable (_ token: ChangeToken?, DatabaseChanges) -> DatabaseChanges = { $1 },
        zoneChanges: @escaping @Sendable (_ token: ChangeToken?, ZoneChanges) -> ZoneChanges = { $1 },
        modifyResult: @escaping @Sendable (_ number: Int, ModifyRecordsResult) -> ModifyRecordsResult = { $1 }
    ) {
        self.base = base
        self.hook = hook
        self.databaseChanges = databaseChanges
        self.zoneChanges = zoneChanges
        self.modifyResult = modifyResult
    }

    /// How many requests of `kind` went through.
    func count(_ kind: RequestKind) -> Int { counts.withLock { $0[kind, default: 0] } }

    private func before(_ kind: RequestKind) async {
        let number = counts.withLock { counts -> Int in
            counts[kind, default: 0] += 1
            return counts[kind]!
        }
        await hook(kind, number)
    }

    var maximumOperationsPerRequest: Int { base.maximumOperationsPerRequest }
    func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) { try base.prepareToWrite(schema) }

    func listZones() async throws -> [ZoneID] {
        await before(.listZones)
        return try await base.listZones()
    }

    func createZones(_ zones: [ZoneID]) async throws {
        await before(.createZones)
        try await base.createZones(zones)
    }

    func deleteZones(_ zones: [ZoneID]) async throws {
        await before(.deleteZones)
        try await base.deleteZones(zones)
    }

    func fetchDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        await before(.fetchDatabaseChanges)
        return databaseChanges(token, try await base.fetchDatabaseChanges(since: token))
    }

    func fetchZoneChanges(in zone: ZoneID, since token: ChangeToken?, resultsLimit: Int) async throws -> ZoneChanges {
        await before(.fetchZoneChanges)
        return zoneChanges(token, try await base.fetchZoneChanges(in: zone, since: token, resultsLimit: resultsLimit))
    }

    func modifyRecords(saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool) async throws
        -> ModifyRecordsResult
    {
        await before(.modifyRecords)
        let result = try await base.modifyRecords(saving: saves, deleting: deletes, atomically: atomically)
        return modifyResult(count(.modifyRecords), result)
    }

    func lookupRecords(_ ids: [RecordID]) async throws -> [RecordID: Record] {
        await before(.lookupRecords)
        return try await base.lookupRecords(ids)
    }

    func downloadAsset(_ asset: CloudAsset) async throws -> Data {
        await before(.downloadAsset)
        return try await base.downloadAsset(asset)
    }

    func subscribeToChanges(in zones: [ZoneID]) async throws {
        await before(.modifySubscriptions)
        try await base.subscribeToChanges(in: zones)
    }
}

/// Holds the first `records/modify` request on the wire until released: a test changes things while a
/// send is in flight. Call ``pass(_:_:)`` from an ``InterceptingTransport`` hook.
final class FirstSendHold: Sendable {
    /// Opens when the first modify request reaches the hold.
    let reached = Gate()
    private let released = Gate()

    /// Holds the request when it is the first modify request, until ``release()``.
    func pass(_ kind: RequestKind, _ number: Int) async {
        guard kind == .modifyRecords, number == 1 else { return }
        reached.open()
        await released.wait()
    }

    func release() { released.open() }
}

/// A one-shot signal: `wait()` returns once `open()` has been called (before or after).
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let isOpen = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
    }
}

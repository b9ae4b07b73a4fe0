import FlatSync
import FlatSyncCloudKit
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

/// One device's network switch over a shared cloud: every call forwarded while online, every request
/// refused unsent while offline, and a device that was offline catching up without losing a change.
@Suite("SwitchableTransport")
struct SwitchableTransportTests {
    /// Each `CloudTransport` request, once, through `transport`: the server counts one of each kind.
    private static func sendEveryRequest(through transport: any CloudTransport) async throws {
        try await transport.createZones([.notes, .photos])
        #expect(try await transport.listZones() == [.notes, .photos])
        try await transport.subscribeToChanges(in: [.notes])
        _ = try await transport.save([makeRecord("a")])
        #expect(try await transport.lookupRecords([recordID("a")]).keys.map(\.name) == ["a"])
        let stranger = try #require(
            CloudAsset(.opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"none","size":1}"#))))
        await expectCloudError(.unknownItem) { _ = try await transport.downloadAsset(stranger) }
        #expect(
            try await transport.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10).changedRecords.count == 1)
        #expect(try await transport.fetchDatabaseChanges(since: nil).changedZones.count == 2)
        try await transport.deleteZones([.photos])
    }

    /// Every request kind a `CloudTransport` method sends (`listSubscriptions`, `uploadAssets` and
    /// `rereferenceAssets` are CKWS's own).
    private static let everyKind = Dictionary(
        uniqueKeysWithValues: RequestKind.allCases.filter {
            ![.listSubscriptions, .uploadAssets, .rereferenceAssets].contains($0)
        }.map {
            ($0, 1)
        })

    @Test func everyRequestReachesTheCloudWhileOnline() async throws {
        let cloud = InMemoryCloud()
        let network = SwitchableTransport(cloud)
        try await Self.sendEveryRequest(through: network)
        #expect(await cloud.counters().requestsByKind == Self.everyKind)
        #expect(await cloud.records(in: .notes).map(\.id.name) == ["a"])
        #expect(try await cloud.listZones() == [.notes])
        #expect(await cloud.subscriptions().count == 1)
        #expect(await network.isOnline)
        #expect(await network.refusedRequestCount == 0)
    }

    @Test func everyRequestIsRefusedUnsentWhileOffline() async throws {
        let cloud = InMemoryCloud()
        let network = SwitchableTransport(cloud, online: false)
        let id = recordID("a")
        let requests: [@Sendable () async throws -> Void] = [
            { _ = try await network.listZones() },
            { try await network.createZones([.notes]) },
            { try await network.deleteZones([.notes]) },
            { _ = try await network.fetchDatabaseChanges(since: nil) },
            { _ = try await network.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10) },
            { _ = try await network.save([makeRecord("a")]) },
            { _ = try await network.lookupRecords([id]) },
            {
                _ = try await network.downloadAsset(
                    CloudAsset(.opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"c","size":1}"#)))!)
            },
            { try await network.subscribeToChanges(in: [.notes]) },
        ]
        for request in requests {
            let error = await expectCloudError(.networkUnavailable) { try await request() }
            #expect(error?.isTransient == true)
        }
        #expect(await network.refusedRequestCount == requests.count)
        #expect(await cloud.counters() == CloudCounters(), "nothing reached the server")

        await network.setOnline(true)
        try await Self.sendEveryRequest(through: network)
        #expect(await cloud.counters().requestsByKind == Self.everyKind)
        #expect(await network.refusedRequestCount == requests.count, "the count stays for the test to read")
    }

    /// The calls that send nothing answer as the wrapped transport does, offline too: a context checks its
    /// schema when it opens, and splits its requests by the limit.
    @Test func theLimitAndTheSchemaCheckAreTheWrappedTransports() async throws {
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.com.example.app", environment: .development, apiToken: "any",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: URL(string: "http://127.0.0.1:9")!,
                schema: .flatSync))
        let network = SwitchableTransport(transport, online: false)
        #expect(network.maximumOperationsPerRequest == transport.maximumOperationsPerRequest)
        #expect(network.maximumOperationsPerRequest != InMemoryCloud().maximumOperationsPerRequest)
        try network.prepareToWrite(.flatSync)
        let notes = CloudSchema(recordTypes: ["Note": ["value": .string]])
        try network.prepareToWrite(notes)
        #expect(transport.schema == CloudSchema.flatSync.adding(notes), "the context's types, added")
        let clash = CloudSchema(recordTypes: ["Note": ["value": .int64]])
        #expect(throws: FlatSyncError.self) { try network.prepareToWrite(clash) }
        #expect(await network.refusedRequestCount == 0, "neither is a request")
    }

    /// The case of the article: A offline edits, B edits and syncs, A's sync reports the network and
    /// keeps its change, and back online both converge.
    @Test func aDeviceOfflineKeepsItsChangesAndCatchesUpWhenBackOnline() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let network = SwitchableTransport(cloud)
            let a = try await SyncContext.open(
                directory: directory.appendingPathComponent("A"), account: CloudAccount(id: "user", transport: network))
            let b = try await SyncContext.open(
                directory: directory.appendingPathComponent("B"), account: CloudAccount(id: "user", transport: cloud))
            try await a.readingList.add("both")
            try await a.readingList.add("dropped-by-b")
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            await network.setOnline(false)
            try await a.readingList.add("from-a")
            try await a.readingList.remove("both")
            try await b.readingList.add("from-b")
            try await b.readingList.remove("dropped-by-b")
            #expect(try await b.syncNow().isComplete, "B's network is its own")

            let offline = try await a.syncNow()
            #expect(!offline.isComplete)
            #expect(offline.problems.map(\.kind).contains(.networkUnavailable), "\(offline.problems)")
            #expect(offline.pendingRecords == 2, "both of A's changes wait")
            #expect(await network.refusedRequestCount > 0)
            #expect(await a.readingList.contains("from-a"))
            #expect(await !a.readingList.contains("both"))
            #expect(await cloud.records(in: .readingList).map(\.id.name).sorted() == ["rl-both", "rl-from-b"])

            await network.setOnline(true)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            for device in [a, b] {
                #expect(await device.readingList.entries().map(\.articleID).sorted() == ["from-a", "from-b"])
            }
            try await a.close()
            try await b.close()
        }
    }
}

import FlatSync
import FlatSyncCloudKit
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

/// The sample that FlatSyncTesting's overview and FlatSync's "Testing a host with FlatSyncTesting" show: a
/// send that fails once and is retried when the test moves the clock.
private func testingSample(directory: URL) async throws {
    // Testing sample begins
    let clock = TestClock()
    let cloud = InMemoryCloud(faultPlan: .failNext(1, .modifyRecords, with: .zoneBusy))
    let context = try await SyncContext.open(
        directory: directory,
        account: CloudAccount(id: "user", transport: cloud),
        configuration: SyncContext.Configuration(clock: clock)
    )
    try await context.start()
    try await context.readingList.add("x")
    await context.waitUntilIdle()  // the first send failed; its retry waits on the clock
    clock.advance(by: .seconds(1))
    await context.waitUntilIdle()  // sent
    #expect(await cloud.counters().recordsSaved == 1)
    // Testing sample ends
    try await context.close()
}

/// The refusal sample of "Testing a host with FlatSyncTesting": a change the server refuses is parked, kept
/// on the device and reported, then dropped by the host.
private func refusalSample(directory: URL) async throws {
    let cloud = InMemoryCloud()
    let context = try await SyncContext.open(
        directory: directory, account: CloudAccount(id: "user", transport: cloud))
    // Refusal sample begins
    await cloud.setFaultPlan(.failRecords(1, with: .invalidArguments))  // the next request's first record
    try await context.readingList.add("x")
    let summary = try await context.syncNow()
    #expect(summary.refused.map(\.recordID.name) == ["rl-x"])  // parked: kept here, sent again by each sync
    #expect(await context.readingList.contains("x"))
    #expect(try await context.discardRefusedChanges().count == 1)  // the host gives up on it
    #expect(await !context.readingList.contains("x"))  // the server has no version to put back

    // A production container takes only the schema deployed to it.
    await cloud.setProductionSchema(.flatSync)
    // Refusal sample ends
    try await context.close()
}

/// The over-HTTP sample of "Testing a host with FlatSyncTesting": a device that reaches the cloud through
/// CloudKit Web Services, on the emulator, and one that uses it directly, sharing it.
private func httpSample(directory: URL) async throws {
    // HTTP sample begins
    let cloud = InMemoryCloud()
    try await CloudKitWebServicesServer.withServer(backing: cloud) { server in  // on 127.0.0.1, a free port
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.com.example.app", environment: .development, apiToken: "any",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL))  // no sign-in needed by default
        let overHTTP = try await SyncContext.open(
            directory: directory.appendingPathComponent("A"), account: CloudAccount(id: "user", transport: transport))
        let direct = try await SyncContext.open(
            directory: directory.appendingPathComponent("B"), account: CloudAccount(id: "user", transport: cloud))
        try await overHTTP.readingList.add("x")
        #expect(try await overHTTP.syncNow().isComplete)
        #expect(try await direct.syncNow().isComplete)
        #expect(await direct.readingList.contains("x"))
        await cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .serviceUnavailable))  // a 503 on the wire
        try await overHTTP.close()
        try await direct.close()
    }  // stopped, whether the body returned or threw: every test that starts a server stops it
    // HTTP sample ends
}

/// The offline sample of "Testing a host with FlatSyncTesting": a started device loses its network while
/// another, on the same cloud, syncs; its change waits and goes out when the network returns.
private func offlineSample(directory: URL) async throws {
    let cloud = InMemoryCloud()
    let network = SwitchableTransport(cloud)  // device A's network; B uses the cloud directly
    let a = try await SyncContext.open(
        directory: directory.appendingPathComponent("A"), account: CloudAccount(id: "user", transport: network),
        configuration: SyncContext.Configuration(clock: TestClock()))
    let b = try await SyncContext.open(
        directory: directory.appendingPathComponent("B"), account: CloudAccount(id: "user", transport: cloud))
    try await a.start()
    await a.waitUntilIdle()
    // Offline sample begins
    await network.setOnline(false)
    try await a.readingList.add("from-a")
    await a.waitUntilIdle()  // the send failed: A waits for the network, its change kept
    try await b.readingList.add("from-b")
    #expect(try await b.syncNow().isComplete)  // B's network is its own
    #expect(await network.refusedRequestCount > 0)

    await network.setOnline(true)
    await a.networkDidBecomeAvailable()  // as the app does when the network returns
    await a.waitUntilIdle()  // sent
    #expect(try await b.syncNow().isComplete)
    #expect(await b.readingList.contains("from-a"))
    // Offline sample ends
    #expect(try await a.syncNow().isComplete)
    #expect(await a.readingList.contains("from-b"))
    try await a.close()
    try await b.close()
}

/// The named-record sample of "Testing a host with FlatSyncTesting": the server refuses one record picked
/// by name, and the rest of its request is saved.
private func namedRecordSample(directory: URL) async throws {
    let cloud = InMemoryCloud()
    let context = try await SyncContext.open(
        directory: directory, account: CloudAccount(id: "user", transport: cloud))
    // Named record sample begins
    await cloud.setFaultPlan(.failRecord(named: "rl-b", with: .invalidArguments))  // wherever it is in a request
    for article in ["a", "b", "c"] { try await context.readingList.add(article) }
    let summary = try await context.syncNow()
    #expect(summary.refused.map(\.recordID.name) == ["rl-b"])
    #expect(await cloud.records(in: .readingList).map(\.id.name) == ["rl-a", "rl-c"])
    // Named record sample ends
    try await context.close()
}

/// The event sample of "Testing a host with FlatSyncTesting": a recorder holds a send's events once the
/// context is idle, with no task reading a stream.
private func eventSample(directory: URL) async throws {
    let context = try await SyncContext.open(
        directory: directory, account: CloudAccount(id: "user", transport: InMemoryCloud()))
    try await context.start()
    await context.waitUntilIdle()
    // Event sample begins
    let recorder = SyncEventRecorder(context)
    try await context.readingList.add("x")
    await context.waitUntilIdle()
    #expect(recorder.events.contains(.didSend(zone: .readingList, saved: 1, deleted: 0, failed: 0)))
    // Event sample ends
    try await context.close()
}

@Suite struct TestingSampleTests {
    @Test func theEventSampleSeesTheSendOnceIdle() async throws {
        try await withTemporaryDirectory { try await eventSample(directory: $0) }
    }

    @Test func theEventSampleIsShownVerbatim() throws {
        let sample = try DocumentationSample("Event sample", in: #filePath, indent: 4)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/TestingAHost.md"))
    }

    @Test func theOfflineSampleKeepsTheChangeUntilTheNetworkReturns() async throws {
        try await withTemporaryDirectory { try await offlineSample(directory: $0) }
    }

    @Test func theOfflineSampleIsShownVerbatim() throws {
        let sample = try DocumentationSample("Offline sample", in: #filePath, indent: 4)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/TestingAHost.md"))
    }

    @Test func theNamedRecordSampleRefusesThatRecordOnly() async throws {
        try await withTemporaryDirectory { try await namedRecordSample(directory: $0) }
    }

    @Test func theNamedRecordSampleIsShownVerbatim() throws {
        let sample = try DocumentationSample("Named record sample", in: #filePath, indent: 4)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/TestingAHost.md"))
    }

    @Test func theHTTPSampleSyncsThroughTheEmulator() async throws {
        try await withTemporaryDirectory { try await httpSample(directory: $0) }
    }

    @Test func theHTTPSampleIsShownVerbatim() throws {
        let sample = try DocumentationSample("HTTP sample", in: #filePath, indent: 4)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/TestingAHost.md"))
    }

    @Test func theRefusalSampleParksAndDiscards() async throws {
        try await withTemporaryDirectory { try await refusalSample(directory: $0) }
    }

    @Test func theRefusalSampleIsShownVerbatim() throws {
        let sample = try DocumentationSample("Refusal sample", in: #filePath, indent: 4)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/TestingAHost.md"))
    }

    @Test func theSampleRetriesOnTheTestsClock() async throws {
        try await withTemporaryDirectory { try await testingSample(directory: $0) }
    }

    @Test func bothArticlesShowExactlyTheSampleThatRuns() throws {
        let sample = try DocumentationSample("Testing sample", in: #filePath, indent: 4)
        for article in [
            "Sources/FlatSyncTesting/FlatSyncTesting.docc/FlatSyncTesting.md",
            "Sources/FlatSync/FlatSync.docc/TestingAHost.md",
        ] {
            #expect(try sample.isShown(in: article), "\(article) must show this file's sample verbatim")
        }
    }
}

import FlatSync
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

@Suite struct TestingSampleTests {
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

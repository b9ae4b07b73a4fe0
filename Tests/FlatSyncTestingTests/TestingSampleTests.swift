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

@Suite struct TestingSampleTests {
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

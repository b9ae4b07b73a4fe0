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
        let here = URL(fileURLWithPath: #filePath)
        let source = try String(contentsOf: here, encoding: .utf8)
        let begin = try #require(source.range(of: "    // Testing sample begins\n"))
        let end = try #require(source.range(of: "    // Testing sample ends\n"))
        // Unindented, as the articles show it.
        let sample = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("    ") ? $0.dropFirst(4) : $0 }.joined(separator: "\n")
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for article in [
            "Sources/FlatSyncTesting/FlatSyncTesting.docc/FlatSyncTesting.md",
            "Sources/FlatSync/FlatSync.docc/TestingAHost.md",
        ] {
            let text = try String(contentsOf: root.appendingPathComponent(article), encoding: .utf8)
            #expect(text.contains("```swift\n" + sample + "```\n"), "\(article) must show this file's sample verbatim")
        }
    }
}

import FlatSyncTestSupport

// README sample begins
import FlatSync
import Foundation

/// Saves an article, records a visit, syncs, and returns this device's reading list.
func saveReadAndSync(deviceDirectory: URL, cloud: any CloudTransport) async throws -> [ReadingListEntry] {
    // One context per device directory; it owns the directory until it is closed.
    let context = try await SyncContext.open(
        directory: deviceDirectory,
        account: CloudAccount(id: "user-1", transport: cloud)
    )
    // What the engine does (sends, fetches, conflicts, resets), as it happens.
    let events = context.events()
    let log = Task { for await event in events { print("sync:", event) } }

    try await context.start()  // creates the zones once, then sends and fetches in the background
    try await context.readingList.add("tides-of-change", title: "Tides of change")  // durable; sent at once
    try await context.history.visit("tides-of-change")  // durable; sent after a 5 s debounce
    let summary = try await context.syncNow()  // pull to refresh: send everything, then fetch
    // Refused changes stay here, parked, until the host retries or discards them (see refusedChanges()).
    if !summary.refused.isEmpty { print("refused by the server:", summary.refused) }
    if !summary.problems.isEmpty { print("left for the next sync:", summary.problems) }

    let entries = await context.readingList.entries()  // newest first
    try await context.close()  // also ends the event stream
    await log.value
    return entries
}
// README sample ends

import FlatSyncTesting
import Testing

/// The README's "Use FlatSync from your own program" sample is the code above, compiled and run here;
/// a test checks that the README's code block is exactly that text, so the two cannot drift apart.
@Suite struct ReadmeSampleTests {
    @Test func theSampleRunsAndAnotherDeviceSeesItsChanges() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let entries = try await saveReadAndSync(
                deviceDirectory: directory.appendingPathComponent("phone"), cloud: cloud)
            #expect(entries.map(\.articleID) == ["tides-of-change"])
            #expect(entries.first?.title == "Tides of change")

            let tablet = try await SyncContext.open(
                directory: directory.appendingPathComponent("tablet"),
                account: CloudAccount(id: "user-1", transport: cloud)
            )
            _ = try await tablet.syncNow()
            #expect(await tablet.readingList.entries().map(\.articleID) == ["tides-of-change"])
            #expect(await tablet.history.item("tides-of-change")?.isRead == true)
            try await tablet.close()
        }
    }

    @Test func theReadmeShowsExactlyTheSampleThatIsCompiled() throws {
        let here = URL(fileURLWithPath: #filePath)
        let source = try String(contentsOf: here, encoding: .utf8)
        let sample = try #require(
            Self.text(in: source, after: "// README sample begins\n", before: "// README sample ends\n"))

        let readme = try String(
            contentsOf: here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("README.md"),
            encoding: .utf8
        )
        let section = try #require(
            readme.range(of: "## Use FlatSync from your own program"), "README.md lacks the section")
        let block = try #require(
            Self.text(in: String(readme[section.upperBound...]), after: "```swift\n", before: "```\n"))
        #expect(block == sample)
    }

    /// The text between the first `start` and the next `end`.
    private static func text(in text: String, after start: String, before end: String) -> String? {
        guard let open = text.range(of: start), let close = text.range(of: end, range: open.upperBound..<text.endIndex)
        else {
            return nil
        }
        return String(text[open.upperBound..<close.lowerBound])
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// Devices sharing one in-memory cloud, one test clock and one date counter, in a temporary directory.
///
/// ```swift
/// try await SyncHarness.run { harness in
///     let a = try await harness.device("A")
///     try await a.readingList.add("x")
///     await a.waitUntilIdle()
/// }
/// ```
final class SyncHarness: Sendable {
    let directory: URL
    let cloud: InMemoryCloud
    let clock = TestClock()
    let dates = DateCounter()

    init(directory: URL, cloud: InMemoryCloud = InMemoryCloud()) {
        self.directory = directory
        self.cloud = cloud
    }

    static func run<R>(cloud: InMemoryCloud = InMemoryCloud(), _ body: (SyncHarness) async throws -> R) async throws
        -> R
    {
        try await withTemporaryDirectory { directory in
            try await body(SyncHarness(directory: directory, cloud: cloud))
        }
    }

    func configuration(durability: Durability = .buffered) -> SyncContext.Configuration {
        var configuration = SyncContext.Configuration(clock: clock)
        configuration.durability = durability
        let dates = self.dates
        configuration.currentDate = { dates.next() }
        configuration.randomSeed = 42
        configuration.retryPolicy.jitter = 0
        configuration.snapshotDelay = .seconds(3_600)
        return configuration
    }

    /// Opens (or reopens) the device named `name`, signed in to `account` on this harness's cloud, and
    /// starts it.
    func device(
        _ name: String, account: String = "user", transport: (any CloudTransport)? = nil, start: Bool = true,
        configure: (inout SyncContext.Configuration) -> Void = { _ in }
    ) async throws -> SyncContext {
        var configuration = configuration()
        configuration.deviceID = name
        configure(&configuration)
        let context = try await SyncContext.open(
            directory: directory.appendingPathComponent(name),
            account: CloudAccount(id: account, transport: transport ?? cloud),
            configuration: configuration
        )
        if start {
            try await context.start()
            await context.waitUntilIdle()
        }
        return context
    }
}

/// Everything a device shows, without dates that differ only by when each device wrote them.
struct DeviceView: Equatable, CustomStringConvertible {
    var readingList: [String: ReadingListEntry]
    var history: [String: ReadingHistoryItem]

    init(_ context: SyncContext) async {
        readingList = Dictionary(uniqueKeysWithValues: await context.readingList.entries().map { ($0.articleID, $0) })
        history = Dictionary(uniqueKeysWithValues: await context.history.items().map { ($0.articleID, $0) })
    }

    init(server cloud: some CloudAdministration) async throws {
        readingList = [:]
        history = [:]
        for record in try await cloud.records(in: .readingList) {
            let entry = try ReadingListEntry(record: record)
            readingList[entry.articleID] = entry
        }
        for record in try await cloud.records(in: .readingHistory) {
            let item = try ReadingHistoryItem(record: record)
            history[item.articleID] = item
        }
    }

    var description: String {
        "list \(readingList.keys.sorted()) history \(history.keys.sorted().map { "\($0):\(history[$0]!.readCount)/\(history[$0]!.liking)" })"
    }

    /// What differs from `other`, item by item, for failure messages.
    func differences(from other: DeviceView) -> [String] {
        var lines: [String] = []
        for key in Set(readingList.keys).union(other.readingList.keys).sorted()
        where readingList[key] != other.readingList[key] {
            lines.append(
                "list \(key): \(readingList[key].map { "\($0)" } ?? "absent") vs \(other.readingList[key].map { "\($0)" } ?? "absent")"
            )
        }
        for key in Set(history.keys).union(other.history.keys).sorted() where history[key] != other.history[key] {
            lines.append(
                "history \(key): \(history[key].map { "\($0.record)" } ?? "absent") vs \(other.history[key].map { "\($0.record)" } ?? "absent")"
            )
        }
        return lines
    }
}

/// Every event a stream delivered, once its context has closed (closing ends the stream, so a missing
/// event fails the test instead of hanging it).
func collect(_ events: AsyncStream<SyncEvent>) async -> [SyncEvent] {
    var all: [SyncEvent] = []
    for await event in events { all.append(event) }
    return all
}

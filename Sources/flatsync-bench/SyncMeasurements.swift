import FlatSync
import FlatSyncTesting
import Foundation

// The sync rows: how well coalescing shrinks what is sent, and how fast 10k records travel from one
// device to another through an InMemoryCloud. Devices run on a TestClock so no debounce fires on its
// own: each sync is the explicit `syncNow()` being measured.

enum SyncMeasurements {
    /// 10,000 history mutations on 100 articles (visits and likes, with one removal in twenty), then
    /// one `syncNow()`: the records and modify requests it took. Beside it, the commands News's rule
    /// (coalesce only with the last pending command) would leave for the same sequence: one request each.
    static func coalescing(_ context: BenchContext) async throws -> Results {
        progress("10,000 history mutations on 100 articles, then one sync")
        let cloud = InMemoryCloud()
        let device = try await startedDevice(in: try context.makeDirectory("coalesce"), transport: cloud)
        var random = SeededRandomNumberGenerator(seed: 2026)
        var sequence: [ReadingHistoryChange] = []
        for index in 0..<10_000 {
            let article = Measurements.historyArticle(index % 100)
            switch Int.random(in: 0..<20, using: &random) {
            case 0: sequence.append(.remove(articleID: article))
            case 1...4:
                sequence.append(.setLiking(articleID: article, Bool.random(using: &random) ? .liked : .disliked))
            default: sequence.append(.visit(articleID: article, version: Int64(index)))
            }
        }
        for change in sequence { try await device.history.apply([change]) }
        await cloud.resetCounters()
        let summary = try await device.syncNow()
        let counters = await cloud.counters()
        try await device.close()
        guard summary.isComplete else { throw BenchError("the coalescing sync did not finish: \(summary.problems)") }
        var results = Results()
        results["coalesce_records_sent"] = Double(counters.recordsSaved + counters.recordsDeleted)
        results["coalesce_modify_requests"] = Double(counters.modifyRequests)
        results["coalesce_news_style_commands"] = Double(newsStyleCommandCount(sequence))
        results.note(
            "coalescing: 10,000 `history.apply` calls, one change each, on 100 articles (75 % visits, 20 % likes "
                + "or dislikes, 5 % removals), then `syncNow()` on an InMemoryCloud. News-style commands: the same "
                + "sequence coalesced only with the last pending command of the same kind, as NewsCore does."
        )
        return results
    }

    /// How many commands NewsCore's rule leaves: a change joins the last pending command when that
    /// command is of the same kind (modify or remove), else it starts a new one.
    static func newsStyleCommandCount(_ sequence: [ReadingHistoryChange]) -> Int {
        var commands = 0
        var lastIsRemove: Bool?
        for change in sequence {
            let isRemove: Bool
            if case .remove = change { isRemove = true } else { isRemove = false }
            if lastIsRemove != isRemove { commands += 1 }
            lastIsRemove = isRemove
        }
        return commands
    }

    /// Device A sends 10,000 new history items; device B, new, then fetches them all. Timed from A's
    /// `syncNow()` to the end of B's first `syncNow()`.
    static func pushPull(_ context: BenchContext) async throws -> Results {
        let count = 10_000
        let runs = context.pick(full: 3, quick: 1)
        progress("push \(count) records from one device and pull them on another × \(runs)")
        var samples: [Double] = []
        var requests = 0
        for run in 0..<runs {
            let cloud = InMemoryCloud()
            let round = try await pushPullRound(count: count, name: "\(run)", context: context, cloud: cloud) {
                cloud
            }
            samples.append(round.milliseconds)
            requests = round.requests
        }
        var results = Results()
        results["push_pull_10k_ms"] = samples.min()!
        results["push_pull_10k_requests"] = Double(requests)
        results.note(
            "push + pull: device A sends \(count) new history items (100 per request), device B fetches them "
                + "(400 per page), both `.fsync`, through an InMemoryCloud; best of \(runs); \(requests) requests."
        )
        return results
    }

    /// One push and pull, the same whatever carries it: device A, holding `count` new history items, and
    /// device B, new, each sync through a transport from `transport` (whose requests reach `cloud`), timed
    /// from A's `syncNow()` to the end of B's first one. Returns the time and the requests `cloud` served.
    static func pushPullRound(
        count: Int, name: String, context: BenchContext, cloud: InMemoryCloud,
        transport: () -> any CloudTransport
    ) async throws -> (milliseconds: Double, requests: Int) {
        let a = try await startedDevice(in: try context.makeDirectory("push-\(name)"), transport: transport())
        try await a.history.apply(
            (0..<count).map { .visit(articleID: Measurements.historyArticle($0), version: 1) })
        let b = try await startedDevice(in: try context.makeDirectory("pull-\(name)"), transport: transport())
        await cloud.resetCounters()
        var pulled = 0
        let milliseconds = try await timeMilliseconds {
            let sent = try await a.syncNow()
            let fetched = try await b.syncNow()
            guard sent.sent == count, fetched.isComplete else {
                throw BenchError("push/pull moved \(sent.sent) records out and did not finish")
            }
            pulled = await b.history.count()
        }
        guard pulled == count else { throw BenchError("device B has \(pulled) items, not \(count)") }
        let requests = await cloud.counters().requests
        try await a.close()
        try await b.close()
        return (milliseconds, requests)
    }

    /// A started device on `transport`, on a test clock (so nothing is sent before the measured sync).
    static func startedDevice(in directory: URL, transport: any CloudTransport) async throws -> SyncContext {
        let configuration = SyncContext.Configuration(clock: TestClock())
        let context = try await SyncContext.open(
            directory: directory, account: CloudAccount(id: "bench", transport: transport),
            configuration: configuration
        )
        try await context.start()
        await context.waitUntilIdle()
        return context
    }
}

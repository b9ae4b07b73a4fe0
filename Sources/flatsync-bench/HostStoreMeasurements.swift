import FlatSync
import FlatSyncTesting
import Foundation

// The host-defined store's rows (issue 32): a host record's durable save beside a bare append + fsync of
// its log frame, the cold start of 10k and 100k host records beside SQLite opening and fetching the same
// rows, and 10k host records pushed and pulled through an in-memory cloud.

enum HostStoreMeasurements {
    static func all(_ context: BenchContext) async throws -> Results {
        var results = try await enqueue(context)
        results.merge(try await coldStart(context))
        results.merge(try await pushPull(context))
        return results
    }

    /// The recipe saved as the `index`th host record: every record's frame has the same size.
    static func recipe(_ index: Int, servings: Int64 = 2) -> TestRecipe {
        TestRecipe(
            id: "recipe-" + String(index + 1_000_000), title: "Recipe number \(index + 1_000_000)", servings: servings)
    }

    static let recordTypes: [any SyncableRecord.Type] = [TestRecipe.self]

    // MARK: - Durable save

    static func enqueue(_ context: BenchContext) async throws -> Results {
        let rounds = context.pick(full: 1_500, quick: 300)
        let directory = try context.makeDirectory("host-enqueue")
        let store = try LocalStore(directory: directory, options: .init(durability: .fsync, recordTypes: recordTypes))
        let recipes = store.records(TestRecipe.self)
        // 1,000 records already pending, as the built-in row's smallest queue.
        try await recipes.save((0..<1_000).map { recipe($0) })
        try await store.persistSnapshot(of: TestRecipe.zone)
        let before = store.logByteCount
        try await recipes.save(recipe(1_000))
        let frameBytes = store.logByteCount - before
        progress("host-record save (fsync) beside a bare write+fsync of its \(frameBytes)-byte frame × \(rounds)")
        let bare = try Baselines.BareAppendFile(in: try context.makeDirectory("host-bare"), frameBytes: frameBytes)
        for _ in 0..<20 { _ = try bare.timedAppend() }
        var saves: [Double] = []
        var bareSamples: [Double] = []
        for round in 0..<rounds {
            let value = recipe(1_001 + round)
            if round % 2 == 0 { bareSamples.append(try bare.timedAppend()) }
            let start = benchClock.now
            try await recipes.save(value)
            saves.append((benchClock.now - start).milliseconds)
            if round % 2 == 1 { bareSamples.append(try bare.timedAppend()) }
        }
        try await store.close()
        var results = Results()
        results["host_enqueue_p50_ms"] = median(saves)
        results["host_enqueue_p99_ms"] = percentile(saves, 99)
        results["host_bare_append_p50_ms"] = median(bareSamples)
        results["host_log_frame_bytes"] = Double(frameBytes)
        results.note(
            "host enqueue: `records(Recipe.self).save(_:)` of a new two-field record (fsync), 1,000 records pending, "
                + "its time from call to return beside a bare write+fsync of its log frame (\(frameBytes) bytes), "
                + "alternating; medians of \(rounds).")
        return results
    }

    // MARK: - Cold start

    /// Builds a device of `records` host records in `scratch` and opens and reads it `times` times, printing
    /// the median: for a profiler (`--repeat-host-cold-start N [RECORDS]`).
    static func repeatColdStart(in scratch: URL, times: Int, records: Int) async throws {
        let template = scratch.appendingPathComponent("template")
        try await prepareDevice(at: template, count: records)
        var samples: [Double] = []
        var opens: [Double] = []
        for run in 0..<times {
            let directory = scratch.appendingPathComponent("run-\(run)")
            try copyDirectory(template, to: directory)
            var opened: LocalStore?
            var read: [TestRecipe] = []
            samples.append(
                try await timeMilliseconds {
                    let start = benchClock.now
                    let store = try LocalStore(directory: directory, options: .init(recordTypes: recordTypes))
                    opens.append((benchClock.now - start).milliseconds)
                    // Kept past the timing, as the bench row keeps it: freeing the values is not a cold start.
                    read = await store.records(TestRecipe.self).values()
                    opened = store
                })
            guard read.count == records else { throw BenchError("the cold start read \(read.count) records") }
            read = []
            await opened?.abandon()
            try? FileManager.default.removeItem(at: directory)
        }
        print(
            String(
                format: "host cold start of %d: median %.2f ms over %d (opening the store %.2f ms)", records,
                median(samples), times, median(opens)))
    }

    private static func prepareDevice(at template: URL, count: Int) async throws {
        try FileManager.default.createDirectory(at: template, withIntermediateDirectories: true)
        let store = try LocalStore(directory: template, options: .init(durability: .fsync, recordTypes: recordTypes))
        for start in stride(from: 0, to: count, by: 10_000) {
            try await store.records(TestRecipe.self).save((start..<min(count, start + 10_000)).map { recipe($0) })
        }
        try await Measurements.sendRound(store, zone: TestRecipe.zone)
        try await store.close()
    }

    static func coldStart(_ context: BenchContext) async throws -> Results {
        var results = Results()
        let sqlite = SQLiteAnchors.library(noting: &results)
        for (count, repetitions) in [
            (10_000, context.pick(full: 15, quick: 5)), (100_000, context.pick(full: 9, quick: 3)),
        ] {
            let template = try context.makeDirectory("host-device-\(count)")
            progress("building a device with \(count) synced host records")
            try await prepareDevice(at: template, count: count)
            let database = try context.makeDirectory("host-sqlite-\(count)").appendingPathComponent("recipes.sqlite")
            if let sqlite { try makeDatabase(at: database, rows: count, library: sqlite) }
            progress(
                "cold start of \(count) host records" + (sqlite == nil ? "" : ", and SQLite's") + " × \(repetitions)")
            var samples: [Double] = []
            var sqliteSamples: [Double] = []
            for _ in 0..<repetitions {
                let directory = try context.makeDirectory("host-cold-\(count)")
                try copyDirectory(template, to: directory)
                var opened: LocalStore?
                var read: [TestRecipe] = []
                samples.append(
                    try await timeMilliseconds {
                        let store = try LocalStore(directory: directory, options: .init(recordTypes: recordTypes))
                        read = await store.records(TestRecipe.self).values()
                        opened = store
                    })
                guard read.count == count else { throw BenchError("the cold start read \(read.count) records") }
                read = []
                await opened?.abandon()
                try? FileManager.default.removeItem(at: directory)
                if let sqlite {
                    var loaded: ([TestRecipe], SQLiteConnection)?
                    sqliteSamples.append(try await timeMilliseconds { loaded = try loadAll(database, library: sqlite) })
                    guard loaded?.0.count == count else { throw BenchError("SQLite read \(loaded?.0.count ?? 0) rows") }
                    loaded = nil
                }
            }
            results["host_cold_start_ms_\(count / 1000)k"] = median(samples)
            if !sqliteSamples.isEmpty { results["host_sqlite_cold_start_ms_\(count / 1000)k"] = median(sqliteSamples) }
        }
        results.note(
            "host cold start: `LocalStore(directory:)` with the host type registered, then `records(Recipe.self)"
                + ".values()`, on a copy of a closed device holding N synced two-field host records (each with a "
                + "change tag); median. SQLite's: `sqlite3_open_v2` of a WAL database holding the same N rows (name, "
                + "title, servings, change tag), then `SELECT` of every row into the same values, interleaved.")
        return results
    }

    private static func makeDatabase(at url: URL, rows: Int, library: SQLiteLibrary) throws {
        let connection = try SQLiteConnection(path: url.path, synchronous: .normal, library: library)
        try connection.execute(
            "CREATE TABLE recipes (id TEXT PRIMARY KEY NOT NULL, title TEXT NOT NULL, servings INTEGER NOT NULL, "
                + "changeTag TEXT)")
        let statement = try connection.cachedStatement(
            "INSERT INTO recipes (id, title, servings, changeTag) VALUES (?, ?, ?, ?)")
        try connection.transaction {
            for index in 0..<rows {
                let value = recipe(index)
                statement.bind(value.id, at: 1)
                statement.bind(value.title, at: 2)
                statement.bind(value.servings, at: 3)
                statement.bind(Measurements.serverChangeTag().rawValue, at: 4)
                try statement.run()
            }
        }
    }

    private static func loadAll(_ url: URL, library: SQLiteLibrary) throws -> ([TestRecipe], SQLiteConnection) {
        let connection = try SQLiteConnection(path: url.path, synchronous: .normal, library: library)
        let statement = try connection.cachedStatement("SELECT id, title, servings, changeTag FROM recipes")
        var values: [TestRecipe] = []
        var tags: [ChangeTag?] = []
        while try statement.next() {
            values.append(TestRecipe(id: statement.string(0), title: statement.string(1), servings: statement.int64(2)))
            tags.append(statement.optionalString(3).map(ChangeTag.init(rawValue:)))
        }
        statement.resetForReuse()
        return (values, connection)
    }

    // MARK: - Push and pull

    static func pushPull(_ context: BenchContext) async throws -> Results {
        let count = 10_000
        let runs = context.pick(full: 3, quick: 1)
        progress("push \(count) host records from one device and pull them on another × \(runs)")
        var samples: [Double] = []
        for run in 0..<runs {
            let cloud = InMemoryCloud()
            let a = try await device(try context.makeDirectory("host-push-\(run)"), cloud)
            try await a.records(TestRecipe.self).save((0..<count).map { recipe($0) })
            let b = try await device(try context.makeDirectory("host-pull-\(run)"), cloud)
            samples.append(
                try await timeMilliseconds {
                    let sent = try await a.syncNow()
                    let fetched = try await b.syncNow()
                    guard sent.sent == count, fetched.isComplete else {
                        throw BenchError("host push/pull moved \(sent.sent) records and did not finish")
                    }
                })
            let pulled = await b.records(TestRecipe.self).count()
            guard pulled == count else { throw BenchError("device B has \(pulled) host records, not \(count)") }
            try await a.close()
            try await b.close()
        }
        var results = Results()
        results["host_push_pull_10k_ms"] = samples.min()!
        results.note(
            "host push + pull: device A sends \(count) new host records (100 per request), device B fetches them, "
                + "both `.fsync`, through an InMemoryCloud; best of \(runs).")
        return results
    }

    private static func device(_ directory: URL, _ cloud: InMemoryCloud) async throws -> SyncContext {
        var configuration = SyncContext.Configuration(clock: TestClock())
        configuration.recordTypes = recordTypes
        let context = try await SyncContext.open(
            directory: directory, account: CloudAccount(id: "bench", transport: cloud), configuration: configuration)
        try await context.start()
        await context.waitUntilIdle()
        return context
    }
}

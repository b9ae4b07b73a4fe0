import FlatSync
import FlatSyncBenchHost
import Foundation
import Synchronization

// FlatSync's own figures, each through the public API a host uses (the package API only to build a
// realistic device directory: a send round without a sync engine, explicit snapshots).

enum Measurements {
    /// How long one durable mutation takes is held against a bare write+fsync of the same number of
    /// bytes, so first measure what one `readingList.add` puts in the log.
    static func logFrame(_ context: BenchContext) async throws -> Results {
        progress("measuring the log frame of one readingList.add")
        let directory = try context.makeDirectory("frame")
        let store = try LocalStore(directory: directory)
        try await prefill(store, pending: 1_000)
        let list = store.readingList
        for index in 0..<5 { try await list.add(readingListArticle(index)) }
        // The log's own count: its file is longer while open, by the space it reserves ahead.
        let before = store.logByteCount
        try await list.add(readingListArticle(5))
        let after = store.logByteCount
        try await store.close()
        var results = Results()
        results["log_frame_bytes"] = Double(after - before)
        return results
    }

    // MARK: - Enqueue latency

    /// `readingList.add` of a new article with 1k, 10k and 100k records pending, `.fsync`, and the bare
    /// write+fsync baseline, interleaved: each round takes one sample of each, in a rotating order, so all
    /// four see the same disk at the same moments (this machine's fsync latency drifts by a third within
    /// seconds, which made ratios of figures measured one after another swing past their targets).
    static func durableEnqueue(_ context: BenchContext) async throws -> Results {
        guard let frameBytes = context.results["log_frame_bytes"].map(Int.init) else {
            throw BenchError("the log frame size must be measured before the durable enqueue")
        }
        var results = Results()
        let rounds = context.pick(full: 2000, quick: 400)
        let levels = [1_000, 10_000, 100_000]
        var queues: [EnqueueQueue] = []
        for pending in levels {
            queues.append(try await EnqueueQueue(context, durability: .fsync, pending: pending, samples: rounds))
        }
        let sqlite = try SQLiteAnchors.library(noting: &results).map {
            progress("preparing a SQLite database (WAL, synchronous=FULL) with 10000 history rows")
            return try SQLiteAnchors.InsertQueue(
                in: try context.makeDirectory("sqlite-full"), synchronous: .full, rows: 10_000, library: $0)
        }
        progress(
            "bare write+fsync of \(frameBytes) bytes, durable enqueues at \(levels) pending"
                + (sqlite == nil ? "" : " and SQLite FULL inserts") + ", × \(rounds) each")
        let bare = try Baselines.BareAppendFile(in: try context.makeDirectory("bare-append"), frameBytes: frameBytes)
        let reserved = try Baselines.BareReservedFile(
            in: try context.makeDirectory("bare-reserved"), frameBytes: frameBytes)
        // Warm the bare files up as the queues were.
        for _ in 0..<sendRoundInterval {
            _ = try bare.timedAppend()
            _ = try reserved.timedAppend()
        }
        // Turns of one round: the stores, the two bare writes, and SQLite when it is there.
        let turns = queues.count + (sqlite == nil ? 2 : 3)
        var bareSamples: [Double] = []
        var reservedSamples: [Double] = []
        var sqliteSamples: [Double] = []
        var samples = [[Double]](repeating: [], count: queues.count)
        for round in 0..<rounds {
            for slot in 0..<turns {
                let turn = (slot + round) % turns
                if turn < queues.count {
                    samples[turn].append(try await queues[turn].timedAdd())
                } else if turn == queues.count {
                    bareSamples.append(try bare.timedAppend())
                } else if turn == queues.count + 1 {
                    reservedSamples.append(try reserved.timedAppend())
                } else if let sqlite {
                    sqliteSamples.append(try sqlite.timedInsert())
                }
            }
        }
        results["fsync_append_p50_ms"] = median(bareSamples)
        results["fsync_append_p99_ms"] = percentile(bareSamples, 99)
        results["reserved_fdatasync_p50_ms"] = median(reservedSamples)
        if !sqliteSamples.isEmpty {
            results["sqlite_durable_insert_p50_ms_10k"] = median(sqliteSamples)
            results["sqlite_durable_insert_p99_ms_10k"] = percentile(sqliteSamples, 99)
        }
        for (index, queue) in queues.enumerated() {
            try await queue.finish()
            let suffix = "\(levels[index] / 1000)k"
            results["enqueue_p50_ms_\(suffix)"] = median(samples[index])
            results["enqueue_p99_ms_\(suffix)"] = percentile(samples[index], 99)
        }
        results.note(
            "enqueue: one `store.readingList.add(newArticleID)` per sample, timed from call to return, into stores "
                + "whose pending records are history visits on distinct articles put there by `history.apply`. The "
                + "bare write+fsync, the bare write+fdatasync into reserved space (the calls the log makes), the "
                + "three stores and the SQLite insert take turns sample by sample. Every "
                + "\(sendRoundInterval) adds an untimed send round (seal, acknowledge, unseal) takes the reading-list "
                + "records off the queue again, as a sync engine would at once, so each queue stays within "
                + "\(sendRoundInterval) records of its size. SQLite: one reading-list row inserted per transaction "
                + "(BEGIN IMMEDIATE, INSERT, COMMIT) into a WAL database holding 10,000 history rows."
        )
        return results
    }

    /// The same at 10k pending with `.buffered` (its target is absolute, so it needs no baseline beside it).
    static func bufferedEnqueue(_ context: BenchContext) async throws -> Results {
        var results = Results()
        let count = context.pick(full: 10_000, quick: 2_000)
        let queue = try await EnqueueQueue(context, durability: .buffered, pending: 10_000, samples: count)
        let sqlite = try SQLiteAnchors.library(noting: &results).map {
            try SQLiteAnchors.InsertQueue(
                in: try context.makeDirectory("sqlite-normal"), synchronous: .normal, rows: 10_000, library: $0)
        }
        progress(
            "buffered enqueue at 10000 pending × \(count)" + (sqlite == nil ? "" : ", beside SQLite NORMAL inserts"))
        var samples: [Double] = []
        var sqliteSamples: [Double] = []
        samples.reserveCapacity(count)
        for _ in 0..<count {
            samples.append(try await queue.timedAdd())
            if let sqlite { sqliteSamples.append(try sqlite.timedInsert()) }
        }
        try await queue.finish()
        results["buffered_enqueue_p50_ms_10k"] = median(samples)
        results["buffered_enqueue_p99_ms_10k"] = percentile(samples, 99)
        if !sqliteSamples.isEmpty {
            results["sqlite_buffered_insert_p50_ms_10k"] = median(sqliteSamples)
            results["sqlite_buffered_insert_p99_ms_10k"] = percentile(sqliteSamples, 99)
        }
        return results
    }

    /// Adds that a send round takes back off the queue.
    static let sendRoundInterval = 100

    /// A store with `pending` records queued, ready to time `readingList.add` of new articles.
    final class EnqueueQueue {
        let pending: Int
        private let store: LocalStore
        private let directory: URL
        private let articles: [String]
        private var added = 0

        init(_ context: BenchContext, durability: Durability, pending: Int, samples: Int) async throws {
            progress("preparing a \(durability) store with \(pending) records pending")
            self.pending = pending
            directory = try context.makeDirectory("enqueue-\(durability)-\(pending)")
            store = try LocalStore(directory: directory, options: .init(durability: durability))
            try await prefill(store, pending: pending)
            // The prefill's snapshot is written now rather than by its timer in the middle of the samples.
            try await store.persistSnapshot(of: .readingHistory)
            articles = (0..<(samples + sendRoundInterval)).map(readingListArticle)
            for article in articles[samples...] { try await store.readingList.add(article) }  // warm-up
            try await sendRound(store, zone: .readingList)
        }

        /// Adds the next new article; returns the milliseconds from call to return. Every
        /// ``sendRoundInterval`` adds, an untimed send round empties the reading list's queue again.
        func timedAdd() async throws -> Double {
            let article = articles[added]
            added += 1
            let list = store.readingList
            let start = benchClock.now
            try await list.add(article)
            let ms = (benchClock.now - start).milliseconds
            if added % sendRoundInterval == 0 { try await sendRound(store, zone: .readingList) }
            return ms
        }

        /// Checks the queue stayed at its size, closes the store and removes its directory.
        func finish() async throws {
            let stillPending = await store.pendingRecordCount()
            guard (pending...(pending + sendRoundInterval)).contains(stillPending) else {
                throw BenchError("expected about \(pending) records pending, found \(stillPending)")
            }
            try await store.close()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    // MARK: - Burst

    /// One `history.apply` of 10,000 visits on distinct articles, `.fsync`, repeated; each repetition is
    /// followed by SQLite's burst: the same rows inserted in one transaction.
    static func burst(_ context: BenchContext) async throws -> Results {
        var results = Results()
        let runs = context.pick(full: 9, quick: 5)
        let count = 10_000
        let sqlite = SQLiteAnchors.library(noting: &results)
        progress(
            "burst of \(count) visits through history.apply" + (sqlite == nil ? "" : ", and SQLite's") + " × \(runs)")
        var samples: [Double] = []
        var sqliteSamples: [Double] = []
        for run in 0..<runs {
            let directory = try context.makeDirectory("burst-\(run)")
            let store = try LocalStore(directory: directory)
            let changes = (0..<count).map { ReadingHistoryChange.visit(articleID: historyArticle($0), version: 1) }
            var changed = 0
            samples.append(try await timeMilliseconds { changed = try await store.history.apply(changes) })
            guard changed == count else { throw BenchError("the burst changed \(changed) items, not \(count)") }
            try await store.close()
            if let sqlite {
                sqliteSamples.append(try SQLiteAnchors.timedBurst(count: count, in: directory, library: sqlite))
            }
            try? FileManager.default.removeItem(at: directory)
        }
        func rates(_ samples: [Double], _ prefix: String) {
            let rates = samples.map { Double(count) / ($0 / 1000) }
            results["\(prefix)"] = rates.max()!
            results["\(prefix)_median"] = median(rates)
            results["\(prefix)_min"] = rates.min()!
            results["\(prefix)_max"] = rates.max()!
        }
        rates(samples, "burst_mutations_per_s")
        if !sqliteSamples.isEmpty { rates(sqliteSamples, "sqlite_burst_mutations_per_s") }
        results.note(
            "burst: one `store.history.apply` of \(count) `.visit(articleID:version:)` changes on distinct articles "
                + "into an empty `.fsync` store, timed from call to return; \(runs) repetitions, the target is on the "
                + "median (`burst_mutations_per_s` is the best). SQLite's: the same \(count) rows inserted through "
                + "one cached statement in one transaction into an empty WAL database, synchronous=FULL, timed from "
                + "BEGIN to the end of COMMIT, right after each FlatSync repetition."
        )
        return results
    }

    /// Runs FlatSync's burst `times` times in `scratch` and prints the median and best milliseconds: for a
    /// profiler (`--repeat-burst N`).
    static func repeatBurst(in scratch: URL, times: Int) async throws {
        let count = 10_000
        var samples: [Double] = []
        for run in 0..<times {
            let directory = scratch.appendingPathComponent("burst-\(run)")
            let store = try LocalStore(directory: directory)
            let changes = (0..<count).map { ReadingHistoryChange.visit(articleID: historyArticle($0), version: 1) }
            samples.append(try await timeMilliseconds { _ = try await store.history.apply(changes) })
            try await store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        print(
            String(
                format: "burst of %d: median %.2f ms, min %.2f ms over %d", count, median(samples), samples.min()!,
                times))
    }

    // MARK: - Cold start

    /// Open + first read of a device directory with 10k and 100k history items, each with 1k pending
    /// commands in its log, each repetition followed by SQLite's open + fetch of every row of a table of as
    /// many history rows; then the peak memory of a fresh process doing the 100k one, and the memory of its
    /// open store once the first read is let go.
    static func coldStart(_ context: BenchContext) async throws -> Results {
        var results = Results()
        let sqlite = SQLiteAnchors.library(noting: &results)
        for (items, repetitions) in [
            (10_000, context.pick(full: 15, quick: 5)), (100_000, context.pick(full: 9, quick: 3)),
        ] {
            let template = try await prepareDevice(context, items: items, pendingMutations: 1_000)
            let database = try context.makeDirectory("sqlite-\(items)").appendingPathComponent("history.sqlite")
            if let sqlite { try SQLiteAnchors.makeHistoryDatabase(at: database, rows: items, library: sqlite) }
            progress("cold start of \(items) items" + (sqlite == nil ? "" : ", and SQLite's") + " × \(repetitions)")
            var samples: [Double] = []
            var sqliteSamples: [Double] = []
            for _ in 0..<repetitions {
                let directory = try context.makeDirectory("cold-\(items)")
                samples.append(try await timedColdStart(of: template, at: directory, items: items))

                if let sqlite {
                    var loaded: ([ReadingHistoryItem], [ChangeTag?], SQLiteConnection)?
                    sqliteSamples.append(
                        try await timeMilliseconds { loaded = try SQLiteAnchors.loadAll(database, library: sqlite) })
                    guard loaded?.0.count == items else {
                        throw BenchError("SQLite read \(loaded?.0.count ?? 0) rows, not \(items)")
                    }
                    loaded = nil
                }
            }
            results["cold_start_ms_\(items / 1000)k"] = median(samples)
            if !sqliteSamples.isEmpty { results["sqlite_cold_start_ms_\(items / 1000)k"] = median(sqliteSamples) }
            if items == 10_000 {
                results["cold_start_ms_10k_after_kill"] = try await coldStartAfterKill(
                    context, items: items, repetitions: repetitions)
            }

            if items == 100_000 {
                for host in ColdStartChild.Host.allCases {
                    if host == .flatSyncOnly && ColdStartChild.hostExecutable == nil {
                        results.note(
                            "memory: flatsync-bench-host was not built, so the memory rows are those of a host that "
                                + "also links the CloudKit transport (`swift build --product flatsync-bench` builds it)."
                        )
                        continue
                    }
                    progress("cold start of \(items) items in a fresh process (\(host)), for its memory")
                    let directory = try context.makeDirectory("cold-child")
                    try copyDirectory(template, to: directory)
                    let child = try ColdStartChild.run(directory: directory, host: host)
                    try? FileManager.default.removeItem(at: directory)
                    guard child.items == items else {
                        throw BenchError("the child read \(child.items) items, not \(items)")
                    }
                    // The host that links FlatSync only gives the plain keys; one with the CloudKit
                    // transport too, the `_ckws` ones (the plain keys too if the first was not built).
                    var suffixes = host == .flatSyncOnly ? [""] : ["_ckws"]
                    if host == .withCloudKitTransport && results["open_store_rss_mb_100k"] == nil {
                        suffixes.append("")
                    }
                    for suffix in suffixes {
                        results["cold_start_peak_rss_mb_100k\(suffix)"] = child.peakResidentMegabytes
                        results["cold_start_child_ms_100k\(suffix)"] = child.milliseconds
                        results["cold_start_child_ru_maxrss_mb_100k\(suffix)"] = child.ruMaxrssMegabytes
                        results["open_store_rss_mb_100k\(suffix)"] = child.openStoreResidentMegabytes
                        results["process_rss_mb_before_open\(suffix)"] = child.residentMegabytesBeforeOpen
                        results["open_store_dirty_mb_100k\(suffix)"] = child.openStoreDirtyMegabytes
                        results["process_dirty_mb_before_open\(suffix)"] = child.dirtyMegabytesBeforeOpen
                        results["open_store_growth_mb_100k\(suffix)"] =
                            child.openStoreResidentMegabytes - child.residentMegabytesBeforeOpen
                    }
                }
            }
        }
        results.note(
            "cold start: `LocalStore(directory:)` then `await store.history.items()`, on a copy of a directory built "
                + "like a device's (N visits, a send round acknowledging them all, both snapshots written, then "
                + "1,000 single `history.visit` mutations left pending, then `close()`, which compacts the log to one "
                + "entry per command); median. After a kill: the same device given up without `close()` (`abandon()`, "
                + "as a killed process leaves it), so the open replays the 1,000 entries over the older snapshot. "
                + "SQLite's: "
                + "`sqlite3_open_v2` of a WAL database holding N history rows, then `SELECT` of every row into "
                + "`ReadingHistoryItem` values (GRDB's `fetchAll`), interleaved with FlatSync's repetitions."
        )
        results.note(
            "memory: a fresh `flatsync-bench-host` process — a host that links FlatSync and nothing else — opens the "
                + "100k directory (its history with a change tag per record, as a synced device has) and reads the "
                + "history; its peak is VmHWM. The open store's memory is its VmRSS once that first read is let go; "
                + "before opening, the same process holds the resident size noted as `process_rss_mb_before_open` "
                + "(mostly the pages of the shared libraries it maps: Swift's runtime and FoundationEssentials, all "
                + "FlatSync imports on Linux). The `_ckws` keys are the same in a fresh `flatsync-bench`, which also "
                + "links FlatSyncCloudKit and so Foundation and FoundationNetworking with libcurl and its TLS chain, "
                + "as a host syncing over CKWS does. "
                + "Dirty memory is the process's private and shared dirty pages and swap from /proc/self/smaps_rollup: "
                + "VmRSS without the clean pages of mapped files (library code), as iOS counts an app's footprint."
        )
        return results
    }

    /// Opens and reads a fresh copy of `template` `times` times, as the cold-start rows do, and prints the
    /// median milliseconds: for a profiler (`--repeat-cold-start DIR N`).
    static func repeatColdStart(of template: URL, times: Int) async throws {
        var samples: [Double] = []
        let scratch = template.deletingLastPathComponent().appendingPathComponent("repeat-\(getpid())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        for _ in 0..<times {
            try? FileManager.default.removeItem(at: scratch)
            samples.append(try await timedColdStart(of: template, at: scratch, items: nil))
        }
        print(
            String(
                format: "cold start of %@: median %.2f ms, min %.2f ms over %d", template.path, median(samples),
                samples.min()!, times))
    }

    /// The median cold start (open and first read) of a device like the 10k one, left by a killed process.
    private static func coldStartAfterKill(
        _ context: BenchContext, items: Int, repetitions: Int
    ) async throws -> Double {
        let template = try await prepareDevice(context, items: items, pendingMutations: 1_000, closing: false)
        progress("cold start of \(items) items after a kill × \(repetitions)")
        var samples: [Double] = []
        for _ in 0..<repetitions {
            let directory = try context.makeDirectory("cold-killed-\(items)")
            samples.append(try await timedColdStart(of: template, at: directory, items: items))
        }
        return median(samples)
    }

    /// Copies `template` to `directory` (empty, or not there yet) and times one cold start on the copy:
    /// `LocalStore(directory:)` and the first `history.items()`, which must read `items` items (or any, for
    /// nil). The store and what it read outlive the timing — freeing them is not part of a cold start —
    /// then the store is given up and the copy removed.
    private static func timedColdStart(of template: URL, at directory: URL, items: Int?) async throws -> Double {
        try copyDirectory(template, to: directory)
        defer { try? FileManager.default.removeItem(at: directory) }
        var store: LocalStore?
        var read: [ReadingHistoryItem] = []
        let milliseconds = try await timeMilliseconds {
            let opened = try LocalStore(directory: directory)
            read = await opened.history.items()
            store = opened
        }
        guard items.map({ read.count == $0 }) ?? !read.isEmpty else {
            throw BenchError("the cold start read \(read.count) items, not \(items.map(String.init) ?? "some")")
        }
        read = []
        await store?.abandon()
        return milliseconds
    }

    /// Builds a device directory: `items` history items in the snapshot, `pendingMutations` visits pending;
    /// closed, or given up as a killed process leaves it (`closing: false`).
    private static func prepareDevice(
        _ context: BenchContext, items: Int, pendingMutations: Int, closing: Bool = true
    ) async throws -> URL {
        let directory = try context.makeDirectory("device-\(items)" + (closing ? "" : "-killed"))
        try await prepareDevice(in: directory, items: items, pendingMutations: pendingMutations, closing: closing)
        return directory
    }

    static func prepareDevice(in directory: URL, items: Int, pendingMutations: Int, closing: Bool = true) async throws {
        progress("building a device with \(items) history items and \(pendingMutations) pending mutations")
        let store = try LocalStore(directory: directory)
        let prefillMs = try await timeMilliseconds { try await prefill(store, pending: items) }
        let round = try await timeMilliseconds { try await sendRound(store, zone: .readingHistory) }
        let snapshots = try await timeMilliseconds {
            for zone in ZoneID.builtIn { try await store.persistSnapshot(of: zone) }
        }
        progress(
            String(format: "  prefill %.0f ms, send round %.0f ms, snapshots %.0f ms", prefillMs, round, snapshots))
        let history = store.history
        let stride = max(1, items / pendingMutations)
        for index in 0..<pendingMutations {
            try await history.visit(historyArticle((index * stride) % items), version: 2)
        }
        let pending = await store.pendingRecordCount()
        guard pending == pendingMutations else {
            throw BenchError("the device has \(pending) records pending, not \(pendingMutations)")
        }
        if closing {
            try await store.close()
        } else {
            await store.abandon()
        }
    }

    // MARK: - Helpers

    /// Puts `count` history visits on distinct articles in the queue, 10,000 per `apply`.
    static func prefill(_ store: LocalStore, pending count: Int) async throws {
        let history = store.history
        for start in stride(from: 0, to: count, by: 10_000) {
            let changes = (start..<min(count, start + 10_000)).map {
                ReadingHistoryChange.visit(articleID: historyArticle($0), version: 1)
            }
            try await history.apply(changes)
        }
        let pending = await store.pendingRecordCount()
        guard pending == count else { throw BenchError("the prefill left \(pending) records pending, not \(count)") }
    }

    /// One sending round without a server: every pending record of the zone is saved, as the engine
    /// records a save the server confirmed — the record's new change tag is kept — and acknowledged. So a
    /// prepared device holds a change tag per synced record, as a real one does.
    static func sendRound(_ store: LocalStore, zone: ZoneID) async throws {
        let commands = try await store.sealPendingCommands(in: zone)
        for command in commands {
            let changes = command.orderedChanges
            for change in changes {
                guard var record = change.record else { continue }
                record.changeTag = serverChangeTag()
                await store.serverSaved(record, created: false)
            }
            try await store.acknowledge(changes.map(\.recordID), in: command.id)
        }
        try await store.unsealPendingCommands(in: zone)
    }

    /// A change tag shaped like CloudKit's (eight lowercase letters and digits), different every call.
    static func serverChangeTag() -> ChangeTag {
        let digits = String(changeTagCounter.add(1, ordering: .relaxed).newValue, radix: 36)
        return ChangeTag(String(repeating: "0", count: max(0, 8 - digits.count)) + digits)
    }
    private static let changeTagCounter = Atomic<Int>(46_656)

    /// Article IDs of one length (22 characters, like News's), so every frame has the same size.
    static func historyArticle(_ index: Int) -> String { "history-article-" + padded(index) }
    static func readingListArticle(_ index: Int) -> String { "reading-article-" + padded(index) }

    private static func padded(_ index: Int) -> String {
        let digits = String(index)
        return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
    }
}

import FlatSync
import FlatSyncTesting
import Foundation
import Synchronization

/// The guided tour: two devices and an in-process ``InMemoryCloud`` in a fresh temporary directory,
/// driven by `SampleData/tour.json`, printing a timeline that ends with `converged: yes` or
/// `converged: no`.
///
/// Nothing waits on real time. The devices share a `TestClock`, so the history debounce fires only when
/// the script says `wait`, and the dates stamped on entries and items come from the tour's own calendar,
/// so every run prints the same timeline. Each step waits until the engine is idle before the next.
struct Tour {
    let sampleData: SampleData
    let console: Console

    /// Runs the script; returns true when the devices converged.
    func run() async throws -> Bool {
        let actions = try sampleData.script.actions(articles: Set(sampleData.articles.map(\.id)))
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("flatsync-tour-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }

        let devices = sampleData.script.devices
        console.out(
            "FlatSync tour: devices \(devices.joined(separator: " and ")) share an in-memory cloud, scripted by \(sampleData.directory.path)/tour.json."
        )
        console.out("Working in \(directory.path) (removed at the end). Times are the tour's own clock, in UTC.")
        let run = try await TourRun(sampleData: sampleData, directory: directory, console: console)
        var converged = false
        do {
            for action in actions { try await run.perform(action) }
            if let comparison = run.lastComparison {
                converged = comparison
            } else {
                converged = try await run.compare()
            }
        } catch {
            await run.closeQuietly()
            throw error
        }
        try await run.closeAndReportEvents()
        console.out("converged: \(converged ? "yes" : "no")")
        return converged
    }
}

/// The tour while it runs: the devices, the cloud, the clocks, and a journal of what each device did
/// (``explain(_:)`` reads it to say which merge rule decided).
///
/// Used by one task from start to end, never shared.
private final class TourRun {
    let sampleData: SampleData
    let console: Console
    let cloud = InMemoryCloud()
    let clock = TestClock()
    let calendar: TourCalendar
    let names: [String]
    /// How long history changes wait before they are sent (the engine's default).
    let historyDebounce: Duration
    var devices: [String: TourDevice] = [:]
    var journal: [JournalEntry] = []
    var lastComparison: Bool?

    /// Something a device did, and when by the tour's calendar.
    struct JournalEntry {
        var device: String
        var mutation: TourAction.Mutation
        var article: String
        var date: Date
    }

    init(sampleData: SampleData, directory: URL, console: Console) async throws {
        self.sampleData = sampleData
        self.console = console
        self.names = sampleData.script.devices
        let calendar = TourCalendar(start: sampleData.script.start)
        self.calendar = calendar
        var configuration = SyncContext.Configuration(clock: clock)
        // A temporary directory: surviving a killed process is enough, and much faster than fsync.
        configuration.durability = .buffered
        configuration.currentDate = { calendar.now }
        configuration.randomSeed = 1
        configuration.retryPolicy.jitter = 0
        historyDebounce = configuration.historyDebounce
        for name in names {
            devices[name] = try await TourDevice(
                name: name, directory: directory, cloud: cloud, configuration: configuration)
        }
    }

    private func device(_ name: String) -> TourDevice { devices[name]! }

    // MARK: - Steps

    func perform(_ action: TourAction) async throws {
        if case .say(let text) = action {
            console.out("\n── \(text) ──")
            return
        }
        calendar.advance(seconds: 60)
        switch action {
        case .say:
            break
        case .mutate(let mutation, let name, let articles, let times):
            try await mutate(mutation, on: device(name), articles: articles, times: times)
        case .network(let name, let online):
            await device(name).network.setOnline(online)
            // A host would call networkDidBecomeAvailable() here; the tour leaves sending to the next
            // `sync` step, so the timeline shows it in one place.
            line(
                name, online ? "online" : "offline",
                online ? "\(name)'s network is back" : "\(name)'s network is off: its changes wait in its command log")
        case .sync(let name):
            try await sync(device(name))
        case .showList(let name):
            let entries = await device(name).context.readingList.entries()
            line(name, "list", "\(count(entries.count, "entry", plural: "entries")), newest first")
            for entry in entries { note("  \(pad(entry.articleID, 26))  \(title(of: entry.articleID))") }
        case .showHistory(let name):
            let items = await device(name).context.history.items()
            line(name, "history", "\(count(items.count, "item")), most recent first")
            for item in items { note("  \(pad(item.articleID, 26))  \(describe(item))") }
        case .expireTokens:
            await cloud.expireAllChangeTokens()
            line("cloud", "expire", "the server expires every change token (as after compacting its history)")
        case .refuseUploads(let count):
            await cloud.setFaultPlan(.failNext(count, .modifyRecords, with: .zoneBusy))
            line(
                "cloud", "refuse",
                "the server will answer the next \(count == 1 ? "upload" : "\(count) uploads") with zoneBusy")
        case .wait(let seconds):
            let before = await cloud.counters()
            clock.advance(by: .seconds(seconds))
            for name in names { await device(name).context.waitUntilIdle() }
            let after = await cloud.counters()
            line("", "wait", "\(seconds) s pass on the devices' test clock")
            note(
                "→ the cloud served \(count(after.requests - before.requests, "request")): "
                    + "\(count(after.modifyRequests - before.modifyRequests, "modify request")) saving "
                    + "\(count(after.recordsSaved - before.recordsSaved, "record"))"
            )
        case .explain(let articles):
            for article in articles { await explain(article) }
        case .note(let name, let articles, let text):
            let notes = device(name).context.records(ArticleNote.self)
            for article in articles {
                try await notes.save(
                    ArticleNote(id: "note-\(name)-\(article)", articleID: article, text: text, created: calendar.now))
                line(name, "note", "\(pad(article, 26))  “\(text)”")
            }
            await device(name).context.waitUntilIdle()
            note("→ sent at once: a note is a record of the demo's own type, synced like an entry")
        case .showNotes(let name):
            let notes = await device(name).context.records(ArticleNote.self).values().sorted { $0.id < $1.id }
            line(name, "notes", count(notes.count, "note"))
            for item in notes { note("  \(pad(item.articleID, 26))  “\(item.text)”") }
        case .compare:
            lastComparison = try await compare()
        }
    }

    private func mutate(_ mutation: TourAction.Mutation, on device: TourDevice, articles: [String], times: Int)
        async throws
    {
        let context = device.context
        for round in 0..<times {
            for (index, article) in articles.enumerated() {
                if round + index > 0 { calendar.advance(seconds: times > 1 ? 1 : 5) }
                switch mutation {
                case .save: try await context.readingList.add(article, title: sampleData.article(article)?.title)
                case .unsave: try await context.readingList.remove(article)
                case .resave:
                    try await context.readingList.apply([
                        .remove(articleID: article),
                        .add(articleID: article, title: sampleData.article(article)?.title),
                    ])
                case .visit: try await context.history.visit(article)
                case .like: try await context.history.setLiking(article, .liked)
                case .dislike: try await context.history.setLiking(article, .disliked)
                }
                journal.append(
                    JournalEntry(device: device.name, mutation: mutation, article: article, date: calendar.now))
                if times == 1 { line(device.name, mutation.rawValue, "\(pad(article, 26))  \(title(of: article))") }
            }
        }
        if times > 1 {
            line(
                device.name, mutation.rawValue,
                "\(articles.count) articles × \(times) = \(articles.count * times) visits: \(articles.joined(separator: ", "))"
            )
        }
        await context.waitUntilIdle()
        let status = await context.status()
        let pending = status.pendingRecords
        let commands = status.pendingCommands
        let offline = await !device.network.isOnline
        switch mutation {
        case .save, .unsave, .resave:
            note(
                offline
                    ? "→ \(count(pending, "change")) pending: \(device.name) is offline"
                    : "→ sent at once: reading-list changes are urgent")
        case .visit, .like, .dislike:
            let because =
                "history changes wait for a \(historyDebounce.components.seconds) s debounce"
                + (offline ? " (and \(device.name) is offline)" : "")
            if times > 1 {
                note(
                    "→ \(articles.count * times) visits coalesced into \(count(pending, "pending record change")) in \(count(commands, "command")); \(because)"
                )
            } else {
                note("→ \(count(pending, "change")) pending: \(because)")
            }
        }
    }

    private func sync(_ device: TourDevice) async throws {
        let summary = try await device.context.syncNow()
        line(device.name, "sync", "sent \(summary.sent), fetched \(summary.fetched), deleted \(summary.deleted)")
        let resets = Dictionary(grouping: summary.resets, by: \.reason)
        for reason in resets.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            let zones = resets[reason]!.map(\.zone.name).joined(separator: ", ")
            switch reason {
            case .tokenExpired: note("→ reset (\(reason)): \(zones) fetched again from the start")
            case .deletedByUser: note("→ reset (\(reason)): \(zones) wiped")
            }
        }
        if !summary.isComplete {
            note(
                "→ not finished: \(count(summary.pendingRecords, "change")) still pending (\(summary.problems.map(\.description).joined(separator: "; ")))"
            )
            if !summary.resets.isEmpty && summary.pendingRecords > 0 {
                note(
                    "→ the reset kept \(device.name)'s pending \(summary.pendingRecords == 1 ? "change" : "changes"); the next sync sends \(summary.pendingRecords == 1 ? "it" : "them")"
                )
            }
        }
    }

    // MARK: - Explaining merges

    /// Prints the article's merged state and the merge rules that produced it (see
    /// Sources/FlatSync/FlatSync.docc/HowSyncWorks.md), found by
    /// matching the merged dates against the journal of what each device did.
    private func explain(_ article: String) async {
        line("", "explain", article)
        let did = names.map { name in
            let entries = journal.filter { $0.device == name && $0.article == article }
            return "\(name): "
                + (entries.isEmpty
                    ? "nothing" : entries.map { "\($0.mutation.rawValue) \(time($0.date))" }.joined(separator: ", "))
        }
        note("  did      " + did.joined(separator: " | "))
        var views: [(entry: ReadingListEntry?, item: ReadingHistoryItem?)] = []
        for name in names {
            views.append(
                (
                    await device(name).context.readingList.entry(article),
                    await device(name).context.history.item(article)
                ))
        }
        guard views.allSatisfy({ $0.entry == views[0].entry && $0.item == views[0].item }) else {
            note("  the devices still differ on \(article)")
            return
        }
        let (entry, item) = views[0]
        note(
            "  merged   "
                + [
                    entry.map { "on the list (added \(time($0.dateAdded)))" } ?? "not on the list",
                    item.map(describe) ?? "no history",
                ].joined(separator: "; "))
        for rule in readingListRules(article, entry) + historyRules(article, item) { note("  rule     " + rule) }
    }

    private func readingListRules(_ article: String, _ entry: ReadingListEntry?) -> [String] {
        let saves = journal.filter { $0.article == article && [.save, .resave].contains($0.mutation) }
        let removals = journal.filter { $0.article == article && $0.mutation == .unsave }
        if let entry {
            guard let winner = saves.first(where: { $0.date == entry.dateAdded }) else { return [] }
            if let removal = removals.last(where: { $0.device != winner.device }) {
                return [
                    "\(winner.device)'s \(winner.mutation.rawValue) (\(time(winner.date))) beats \(removal.device)'s unsave (\(time(removal.date))): an edit wins over a delete it did not see"
                ]
            }
            if saves.contains(where: { $0.device != winner.device }) {
                return [
                    "the later dateAdded wins whole: \(winner.device)'s \(winner.mutation.rawValue) (\(time(winner.date)))"
                ]
            }
            return []
        }
        guard let removal = removals.last else { return [] }
        return ["\(removal.device)'s unsave (\(time(removal.date))) stands: no device edited the entry after it"]
    }

    private func historyRules(_ article: String, _ item: ReadingHistoryItem?) -> [String] {
        guard let item else { return [] }
        var rules: [String] = []
        let likings = journal.filter { $0.article == article && [.like, .dislike].contains($0.mutation) }
        if let changedAt = item.likingChangedAt,
            let winner = likings.min(by: {
                abs($0.date.timeIntervalSince(changedAt)) < abs($1.date.timeIntervalSince(changedAt))
            }),
            let loser = likings.last(where: { $0.device != winner.device && $0.date < winner.date })
        {
            rules.append(
                "the liking set last wins: \(winner.device)'s \(winner.mutation.rawValue) (\(time(winner.date))) beats "
                    + "\(loser.device)'s \(loser.mutation.rawValue) (\(time(loser.date))), whichever device synced last"
            )
        }
        // Visits merge field by field only when more than one device changed the item.
        let editors = Set(
            journal.filter { $0.article == article && ![.save, .unsave, .resave].contains($0.mutation) }.map(\.device))
        if editors.count > 1, let visited = item.lastVisited {
            let by = item.deviceID.map { " by \($0)" } ?? ""
            rules.append(
                "the later lastVisited wins (\(time(visited))\(by))"
                    + (item.isRead ? "; read stays set: flags are sticky" : ""))
        }
        return rules
    }

    // MARK: - The end

    /// Prints every device's final state side by side and returns whether they and the server agree.
    func compare() async throws -> Bool {
        var lists: [[String: ReadingListEntry]] = []
        var histories: [[String: ReadingHistoryItem]] = []
        var notes: [[String: ArticleNote]] = []
        for name in names {
            let context = device(name).context
            notes.append(
                Dictionary(uniqueKeysWithValues: await context.records(ArticleNote.self).values().map { ($0.id, $0) }))
            lists.append(
                Dictionary(uniqueKeysWithValues: await context.readingList.entries().map { ($0.articleID, $0) }))
            histories.append(Dictionary(uniqueKeysWithValues: await context.history.items().map { ($0.articleID, $0) }))
        }
        var serverList: [String: ReadingListEntry] = [:]
        var serverNotes: [String: ArticleNote] = [:]
        for record in await cloud.records(in: .readingList) {
            if record.type == ArticleNote.recordType {
                let value = try ArticleNote(
                    id: record.id.name, fields: RecordFields(record.fields, recordName: record.id.name))
                serverNotes[value.id] = value
                continue
            }
            let entry = try ReadingListEntry(record: record)
            serverList[entry.articleID] = entry
        }
        var serverHistory: [String: ReadingHistoryItem] = [:]
        for record in await cloud.records(in: .readingHistory) {
            let item = try ReadingHistoryItem(record: record)
            serverHistory[item.articleID] = item
        }

        console.out(
            (String(repeating: " ", count: 30) + names.map { pad($0, 32) }.joined()).replacingOccurrences(
                of: " +$", with: "", options: .regularExpression))
        table("reading list", lists) { $0.map { "saved \(time($0.dateAdded))" } ?? "—" }
        table("history", histories) { $0.map(describe) ?? "—" }
        table("notes", notes) { $0.map { "on \($0.articleID)" } ?? "—" }
        let devicesAgree =
            lists.allSatisfy { $0 == lists[0] } && histories.allSatisfy { $0 == histories[0] }
            && notes.allSatisfy { $0 == notes[0] }
        let serverAgrees = serverList == lists[0] && serverHistory == histories[0] && serverNotes == notes[0]
        console.out("server: \(serverAgrees ? "holds exactly the same records" : "differs from the devices")")
        return devicesAgree && serverAgrees
    }

    /// One section of the side-by-side table; rows where the devices differ are marked `≠`.
    private func table<Value: Equatable>(_ title: String, _ columns: [[String: Value]], cell: (Value?) -> String) {
        let ids = Set(columns.flatMap(\.keys)).sorted()
        console.out("\(title) (\(columns.map { String($0.count) }.joined(separator: " / ")))")
        for id in ids {
            let values = columns.map { $0[id] }
            let mark = values.allSatisfy { $0 == values[0] } ? " " : "≠"
            let row = "\(mark) " + pad(id, 26) + "  " + values.map { pad(cell($0), 30) }.joined(separator: "  ")
            console.out(row.replacingOccurrences(of: " +$", with: "", options: .regularExpression))
        }
    }

    /// Closes every device and prints what their event streams said over the whole tour.
    func closeAndReportEvents() async throws {
        var parts: [String] = []
        for name in names {
            let events = try await device(name).close()
            var conflicts = 0
            var resets: [String: Int] = [:]
            var errors = 0
            for event in events {
                switch event {
                case .conflictResolved: conflicts += 1
                case .zoneReset(_, let reason): resets[reason.rawValue, default: 0] += 1
                case .error: errors += 1
                default: break
                }
            }
            var facts = ["\(count(conflicts, "conflict")) resolved"]
            facts += resets.keys.sorted().map { "\(count(resets[$0]!, "zone reset")) (\($0))" }
            if errors > 0 { facts.append(count(errors, "error event")) }
            parts.append("\(name): " + facts.joined(separator: ", "))
        }
        console.out("engine events: " + parts.joined(separator: "; "))
    }

    /// Closes every device after a failure, keeping the failure as the error reported.
    func closeQuietly() async {
        for name in names { _ = try? await devices[name]?.close() }
    }

    // MARK: - Printing

    /// `09:04  A      sync     sent 3, fetched 0, deleted 0`.
    private func line(_ who: String, _ verb: String, _ text: String) {
        console.out("\(time(calendar.now))  \(pad(who, 5))  \(pad(verb, 8)) \(text)")
    }

    /// A line under the previous one, indented past its time, device and verb.
    private func note(_ text: String) {
        console.out(String(repeating: " ", count: 24) + text)
    }

    private func title(of article: String) -> String {
        guard let article = sampleData.article(article) else { return "" }
        let title = article.title.count > 60 ? article.title.prefix(59) + "…" : article.title
        return "\(title) (\(article.source))"
    }

    private func describe(_ item: ReadingHistoryItem) -> String {
        var facts: [String] = []
        if let visited = item.lastVisited { facts.append("visited \(time(visited)) ×\(item.readCount)") }
        if item.isRead { facts.append("read") }
        if item.liking != .none { facts.append(item.liking.description) }
        return facts.joined(separator: " ")
    }

    private func time(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    }

    /// `text` followed by spaces up to `width` characters (never cut).
    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text.padding(toLength: width, withPad: " ", startingAt: 0)
    }

    private func count(_ number: Int, _ noun: String, plural: String? = nil) -> String {
        Output.count(number, noun, plural: plural)
    }
}

/// The tour's calendar: the date stamped on every entry and item, moved on only by the tour.
final class TourCalendar: Sendable {
    private let date: Mutex<Date>

    init(start: Date) {
        date = Mutex(start)
    }

    var now: Date { date.withLock { $0 } }

    func advance(seconds: Double) {
        date.withLock { $0 += seconds }
    }
}

import FlatSync
import FlatSyncTesting
import Foundation

/// The commands that act on one device directory: `save`, `unsave`, `visit`, `like`, `dislike`, `list`,
/// `history`, `pending`, `status` and `sync`.
///
/// All but `sync` work offline: they open only a ``LocalStore`` (durability `fsync`) and never the cloud,
/// so a mutation returns — and the process exits 0 — once its change is durable, and waits in the
/// device's command log for the next `sync`. The device ID is the one the store keeps in `device.plist`
/// (made on first open), so it stays stable whatever the directory is called.
struct DeviceCommands {
    let directory: URL
    let output: Output

    func run(_ command: DemoCommand, cloud: CloudConnection) async throws -> Demo.ExitStatus {
        switch command {
        case .save(let id, let title):
            try await mutate(id, done: "saved", unchanged: "is already on the reading list") {
                try await $0.readingList.apply([.add(articleID: id, title: title)])
            }
        case .unsave(let id):
            try await mutate(id, done: "removed", unchanged: "is not on the reading list") {
                try await $0.readingList.apply([.remove(articleID: id)])
            }
        case .visit(let id, let version):
            try await mutate(id, done: "visited", unchanged: "was not changed") {
                try await $0.history.apply([.visit(articleID: id, version: version)])
            }
        case .like(let id):
            try await mutate(id, done: "liked", unchanged: "is already liked") {
                try await $0.history.apply([.setLiking(articleID: id, .liked)])
            }
        case .dislike(let id):
            try await mutate(id, done: "disliked", unchanged: "is already disliked") {
                try await $0.history.apply([.setLiking(articleID: id, .disliked)])
            }
        case .note(let articleID, let text):
            try await addNote(to: articleID, text: text)
        case .notes(let articleID):
            try await withStore { store in
                let notes = await store.records(ArticleNote.self).values()
                    .filter { articleID == nil || $0.articleID == articleID }
                    .sorted { ($0.created, $0.id) < ($1.created, $1.id) }
                try output.emit(notes.map(NoteRow.init)) {
                    guard !notes.isEmpty else {
                        return articleID.map { "no notes on \($0)" } ?? "no notes"
                    }
                    return notes.map { "\($0.articleID)  \($0.text)  (\($0.id))" }.joined(separator: "\n")
                }
            }
        case .list:
            try await withStore { store in
                let entries = await store.readingList.entries()
                try output.emit(entries.map(ListRow.init)) { Self.describe(entries) }
            }
        case .history:
            try await withStore { store in
                let items = await store.history.items()
                try output.emit(items.map(HistoryRow.init)) { Self.describe(items) }
            }
        case .pending:
            try await withStore { store in
                let report = PendingReport(
                    commands: await store.pendingCommandCount(), records: await store.pendingRecordCount(),
                    refused: await store.refusedChanges().map(RefusedRow.init))
                try output.emit(report) { Self.describe(report) }
            }
        case .status:
            try await withStore { store in
                let report = StatusReport(
                    deviceID: store.deviceID,
                    readingList: await store.readingList.count(),
                    history: await store.history.count(),
                    pendingCommands: await store.pendingCommandCount(),
                    pendingRecords: await store.pendingRecordCount(),
                    refusedRecords: await store.refusedChanges().count
                )
                try output.emit(report) {
                    """
                    device        \(directory.path)
                    device ID     \(report.deviceID)
                    cloud         \(cloud.location) (not contacted; `sync` does that)
                    reading list  \(Output.count(report.readingList, "article"))
                    history       \(Output.count(report.history, "item"))
                    pending       \(Output.count(report.pendingRecords, "record change")) in \(Output.count(report.pendingCommands, "command"))\(report.refusedRecords > 0 ? ", \(report.refusedRecords) refused by the server (see `pending`)" : "")
                    """
                }
            }
        case .sync:
            return try await sync(cloud: cloud)
        case .discardRefused(let recordName):
            try await discardRefused(recordName, cloud: cloud)
        default:
            preconditionFailure("\(command.name) is not a device command")
        }
        return .success
    }

    // MARK: - Offline

    /// Opens the device directory on its own (no cloud), runs `body`, and closes it.
    private func withStore<T>(_ body: (LocalStore) async throws -> T) async throws -> T {
        let store = try await DeviceDirectory.open { () throws -> LocalStore in
            try LocalStore(
                directory: directory,
                options: LocalStore.Options(durability: .fsync, recordTypes: ArticleNote.registered))
        }
        let result: T
        do {
            result = try await body(store)
        } catch {
            try? await store.close()
            throw error
        }
        do {
            try await store.close()
        } catch {
            // The command ran and its change (if any) is durable in the command log; only a snapshot could
            // not be written, which the next command makes up for by replaying the log. Not a failure.
            let reason = (error as? FlatSyncError).map { Demo.describe($0) } ?? "\(error)"
            output.console.error(
                "flatsync-demo: warning: the snapshots could not be saved (\(reason)); nothing is lost: the "
                    + "command log holds every change and the next command replays it"
            )
        }
        return result
    }

    /// Applies one change and reports whether anything changed; returns once the change is durable.
    private func mutate(
        _ articleID: String, done: String, unchanged: String, _ change: (LocalStore) async throws -> Int
    ) async throws {
        try await withStore { store in
            let changed = try await change(store) > 0
            let pending = await store.pendingRecordCount()
            try output.emit(MutationReport(articleID: articleID, changed: changed)) {
                changed
                    ? "\(done) \(articleID) (\(Output.count(pending, "change")) pending; `flatsync-demo sync` sends \(pending == 1 ? "it" : "them"))"
                    : "\(articleID) \(unchanged); nothing changed"
            }
        }
    }

    /// `note ID TEXT`: a new note on a saved article, durable before it returns. An article that is not
    /// on the list has nothing to hold the note: the store refuses the note's `deleteSelf` reference.
    private func addNote(to articleID: String, text: String) async throws {
        try await withStore { store in
            guard await store.readingList.contains(articleID) else {
                throw DemoFailure(
                    "\(articleID) is not on the reading list; save it first (`flatsync-demo save \(articleID)`): a note "
                        + "belongs to a saved article and goes when the article is unsaved")
            }
            let note = ArticleNote(
                id: "note-" + UUID().uuidString.lowercased(), articleID: articleID, text: text, created: Date())
            try await store.records(ArticleNote.self).save(note)
            let pending = await store.pendingRecordCount()
            try output.emit(NoteRow(note)) {
                "noted on \(articleID) (\(Output.count(pending, "change")) pending; `flatsync-demo sync` sends \(pending == 1 ? "it" : "them"))"
            }
        }
    }

    // MARK: - Sync

    /// Signs in on the cloud (see ``CloudConnection/account(device:)``), calls `start()` then `syncNow()`,
    /// and prints what happened. Exit 1, after the summary, when the sync could not finish.
    private func sync(cloud: CloudConnection) async throws -> Demo.ExitStatus {
        let account: CloudAccount
        do {
            account = try await cloud.account(device: directory)
        } catch let error as CloudError {
            throw DemoFailure(
                "sync could not reach the cloud at \(cloud.location) (\(error.code): \(error.message)); nothing is "
                    + "lost: this device's changes stay pending; run `flatsync-demo sync` again")
        }
        let context = try await DeviceDirectory.open { () async throws -> SyncContext in
            try await SyncContext.open(directory: directory, account: account, configuration: .demo)
        }
        // Subscribe before anything runs: the tally counts every event of this run.
        let events = context.events()
        let pendingBefore = await context.status().pendingRecords
        let console = output.console
        let progress = console.errorIsTerminal ? console.writeError : nil
        let watcher = Task { await SyncProgress.watch(events, pendingRecords: pendingBefore, progress: progress) }

        var outcome: Result<SyncSummary, any Error>
        do {
            try await context.start()
            outcome = .success(try await context.syncNow())
        } catch {
            outcome = .failure(error)
        }
        let pendingAfter = await context.status().pendingRecords
        var closeError: (any Error)?
        do { try await context.close() } catch { closeError = error }
        // Closing ends the event stream, so the tally is complete.
        let tally = await watcher.value

        let summary: SyncSummary
        switch outcome {
        case .success(let value):
            summary = value
        case .failure(let error as CloudError):
            throw DemoFailure(
                "sync could not reach the cloud at \(cloud.location) (\(error.code): \(error.message)); nothing is lost: "
                    + "\(Output.count(pendingAfter, "change")) \(pendingAfter == 1 ? "stays" : "stay") pending; run `flatsync-demo sync` again"
            )
        case .failure(let error):
            throw error
        }
        if let closeError { throw closeError }

        let report = tally.report
        try output.emit(report) { tally.description(cloud: cloud.location.description) }
        if !tally.refused.isEmpty {
            let first = RefusedRow(tally.refused[0])
            let others =
                tally.refused.count > 1 ? " and \(Output.count(tally.refused.count - 1, "other")) (see `pending`)" : ""
            console.error(
                "flatsync-demo: the server refused \(Output.count(tally.refused.count, "change")) (\(first.line))\(others); "
                    + "they stay on this device and every `flatsync-demo sync` sends them again: fix what the server "
                    + "objects to (a production container needs the schema `flatsync-demo cloud schema` prints), or "
                    + "drop them with `flatsync-demo discard-refused`")
            return .failure
        }
        guard summary.isComplete else {
            var left: [String] = []
            if summary.pendingRecords > 0 {
                left.append("\(Output.count(summary.pendingRecords, "change")) still waiting to be sent")
            }
            if !summary.problems.isEmpty { left.append(summary.problems.map(\.description).joined(separator: "; ")) }
            console.error(
                "flatsync-demo: sync did not finish: \(left.joined(separator: "; ")); nothing is lost, run `flatsync-demo sync` again"
            )
            return .failure
        }
        return .success
    }

    /// `discard-refused`: drops the refused changes (one, with `--record`) and takes the server's versions back.
    private func discardRefused(_ recordName: String?, cloud: CloudConnection) async throws {
        let account = try await cloud.account(device: directory)
        let context = try await DeviceDirectory.open { () async throws -> SyncContext in
            try await SyncContext.open(directory: directory, account: account, configuration: .demo)
        }
        do {
            let refused = await context.refusedChanges()
            let chosen = refused.filter { recordName == nil || $0.recordID.name == recordName }
            if let recordName, chosen.isEmpty {
                throw DemoFailure(
                    "no refused change to \(recordName) on this device; `flatsync-demo pending` lists the refused ones")
            }
            let dropped = Set(try await context.discardRefusedChanges(chosen.map(\.recordID)))
            try await context.close()
            let rows = chosen.filter { dropped.contains($0.recordID) }.map(RefusedRow.init)
            try output.emit(rows) {
                rows.isEmpty
                    ? "no change was refused; nothing to drop"
                    : "dropped \(Output.count(rows.count, "refused change")); the server's versions are back on this "
                        + "device:\n" + rows.map { "  \($0.line)" }.joined(separator: "\n")
            }
        } catch {
            try? await context.close()
            throw error
        }
    }

    // MARK: - For people

    static func describe(_ report: PendingReport) -> String {
        guard report.records > 0 else { return "nothing waits to be sent" }
        var text =
            "\(Output.count(report.records, "record change")) in \(Output.count(report.commands, "command")) "
            + "\(report.records == 1 ? "waits" : "wait") to be sent; run `flatsync-demo sync`"
        if !report.refused.isEmpty {
            text +=
                "\n\(report.refused.count) of them the server refused; `sync` sends them again, `discard-refused` "
                + "drops them:\n" + report.refused.map { "  \($0.line)" }.joined(separator: "\n")
        }
        return text
    }

    static func describe(_ entries: [ReadingListEntry]) -> String {
        guard !entries.isEmpty else { return "the reading list is empty" }
        let width = entries.map(\.articleID.count).max() ?? 0
        let lines = entries.map { entry in
            "  \(Output.shortDate(entry.dateAdded))  \(entry.articleID.padding(toLength: width, withPad: " ", startingAt: 0))"
                + (entry.title.map { "  \($0)" } ?? "")
        }
        return "\(Output.count(entries.count, "saved article")), newest first:\n" + lines.joined(separator: "\n")
    }

    static func describe(_ items: [ReadingHistoryItem]) -> String {
        guard !items.isEmpty else { return "the history is empty" }
        let width = items.map(\.articleID.count).max() ?? 0
        let lines = items.map { item in
            let row = HistoryRow(item)
            var facts: [String] = []
            if item.readCount > 0 { facts.append("visited \(item.readCount)×") }
            if row.read { facts.append("read") }
            if row.liked { facts.append("liked") }
            if row.disliked { facts.append("disliked") }
            return
                "  \(Output.shortDate(row.lastVisited))  \(item.articleID.padding(toLength: width, withPad: " ", startingAt: 0))  "
                + facts.joined(separator: ", ")
        }
        return "\(Output.count(items.count, "history item")), most recent first:\n" + lines.joined(separator: "\n")
    }
}

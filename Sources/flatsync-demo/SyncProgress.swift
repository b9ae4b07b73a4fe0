import FlatSync
import Foundation

/// What one `sync` run did, added up from the engine's events.
///
/// Events rather than the ``SyncSummary`` that `syncNow()` returns: `start()` already sends the pending
/// commands and fetches every zone in the background, and `syncNow()` queues behind that work, so its
/// summary covers only what was left by then (usually nothing). The events cover the whole run.
struct SyncTally: Equatable, Sendable {
    var sent = 0
    var fetched = 0
    var deleted = 0
    /// Changes the server refused during the run (the last refusal of each record).
    var refused: [RefusedChange] = []
    var resets: [Reset] = []

    struct Reset: Equatable, Sendable, CustomStringConvertible {
        var zone: ZoneID
        var reason: ZoneResetReason
        /// `ReadingList: tokenExpired`, the form of ``SyncSummary/ZoneReset``.
        var description: String { "\(zone): \(reason)" }
    }

    mutating func record(_ event: SyncEvent) {
        switch event {
        case .didSend(_, let saved, let deleted, _): sent += saved + deleted
        case .didFetch(_, let changed, let deleted):
            fetched += changed
            self.deleted += deleted
        case .zoneReset(let zone, let reason): resets.append(Reset(zone: zone, reason: reason))
        case .changeRefused(let refusal):
            refused.removeAll { $0.recordID == refusal.recordID }
            refused.append(refusal)
        default: break
        }
    }

    /// The `--json` shape of `sync`, as its help in CommandTable.swift gives it.
    var report: SyncReport {
        SyncReport(
            sent: sent, fetched: fetched, deleted: deleted, resets: resets.map(\.description),
            refused: refused.map(RefusedRow.init))
    }

    /// Lines for people.
    func description(cloud: String) -> String {
        var lines = ["synced with \(cloud): sent \(sent), fetched \(fetched), deleted \(deleted)"]
        for reset in resets {
            switch reset.reason {
            case .tokenExpired:
                lines.append(
                    "  \(reset.zone) was fetched again from the start (the server expired its change token); pending changes were kept"
                )
            case .deletedByUser:
                lines.append(
                    "  \(reset.zone) was deleted by the user: its data and pending changes on this device were wiped")
            }
        }
        for refusal in refused {
            lines.append("  refused: \(RefusedRow(refusal).line)")
        }
        return lines.joined(separator: "\n")
    }
}

/// Progress of a long `sync` on standard error, for a person watching a terminal: a status line
/// rewritten in place while many records are sent, and a line for each large fetch.
///
/// Shown only past ``threshold`` records, so an everyday sync prints nothing but its summary.
struct SyncProgress {
    /// Below this many records, a sync is quick enough to need no progress.
    static let threshold = 200

    /// Record changes waiting when the sync began.
    let pendingRecords: Int
    private var sent = 0
    private var statusLineOpen = false

    init(pendingRecords: Int) {
        self.pendingRecords = pendingRecords
    }

    /// What to write on standard error for `event` (possibly nothing). Status lines start with a carriage
    /// return and a clear-line escape so they overwrite each other.
    mutating func text(for event: SyncEvent) -> String {
        switch event {
        case .didSend(_, let saved, let deleted, let failed) where pendingRecords > Self.threshold:
            sent += saved + deleted + failed
            statusLineOpen = true
            return "\r\u{1B}[Ksync: sent \(min(sent, pendingRecords)) of \(pendingRecords) changes"
        case .didFetch(let zone, let changed, let deleted) where changed + deleted > Self.threshold:
            return finish() + "sync: fetched \(zone): \(changed) changed, \(deleted) deleted\n"
        default:
            return ""
        }
    }

    /// Ends an open status line.
    mutating func finish() -> String {
        defer { statusLineOpen = false }
        return statusLineOpen ? "\n" : ""
    }

    /// Reads `events` to their end (the context closed), writing progress to `progress` when given, and
    /// returns the tally.
    static func watch(
        _ events: AsyncStream<SyncEvent>, pendingRecords: Int, progress: (@Sendable (String) -> Void)?
    ) async -> SyncTally {
        var tally = SyncTally()
        var reporter = SyncProgress(pendingRecords: pendingRecords)
        for await event in events {
            tally.record(event)
            if let progress {
                let text = reporter.text(for: event)
                if !text.isEmpty { progress(text) }
            }
        }
        if let progress {
            let text = reporter.finish()
            if !text.isEmpty { progress(text) }
        }
        return tally
    }
}

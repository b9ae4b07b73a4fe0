import FlatSync
import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where the demo writes: standard output for results, standard error for failures and progress.
///
/// A value rather than direct `print` calls so a whole run can be captured in memory.
struct Console: Sendable {
    var writeOut: @Sendable (String) -> Void
    var writeError: @Sendable (String) -> Void
    /// True when standard error is a terminal: progress lines are for people watching, not for logs.
    var errorIsTerminal: Bool

    /// The process's standard output and error. `FileHandle` writes at once (no buffer), so a line on
    /// standard error never overtakes the results printed before it.
    static var standard: Console {
        Console(
            writeOut: { FileHandle.standardOutput.write(Data($0.utf8)) },
            writeError: { FileHandle.standardError.write(Data($0.utf8)) },
            errorIsTerminal: isatty(STDERR_FILENO) == 1
        )
    }

    /// Writes `text` and a newline on standard output.
    func out(_ text: String) { writeOut(text + "\n") }
    /// Writes `text` and a newline on standard error.
    func error(_ text: String) { writeError(text + "\n") }
}

/// How results are printed: one JSON value (`--json`) or lines for people.
struct Output: Sendable {
    let console: Console
    let json: Bool

    /// Prints `value` as one line of JSON with sorted keys when `--json` was given, else `human()`.
    func emit(_ value: some Encodable, human: () -> String) throws {
        console.out(json ? try Self.json(value) : human())
    }

    /// One JSON value, keys sorted, dates as ISO-8601 strings (whole seconds, UTC).
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// `1 change`, `3 changes`: a count with its noun, for people.
    static func count(_ number: Int, _ noun: String, plural: String? = nil) -> String {
        "\(number) \(number == 1 ? noun : plural ?? noun + "s")"
    }

    /// `2025-05-12 09:03` in the local time zone, for people.
    static func shortDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: date)
    }
}

// MARK: - The JSON shapes the commands' help gives (CommandTable.swift)

/// `list`: one entry.
struct ListRow: Codable, Equatable {
    var articleID: String
    var dateAdded: Date

    init(_ entry: ReadingListEntry) {
        articleID = entry.articleID
        dateAdded = entry.dateAdded
    }
}

/// `note` and `notes`: one note.
struct NoteRow: Codable, Equatable {
    var noteID: String
    var articleID: String
    var text: String
    var created: Date

    init(_ note: ArticleNote) {
        noteID = note.id
        articleID = note.articleID
        text = note.text
        created = note.created
    }
}

/// `history`: one item. `lastVisited` falls back to `firstSeen` for an item never visited, then to the
/// epoch (no item made by FlatSync lacks both), so the field is always a date.
struct HistoryRow: Codable, Equatable {
    var articleID: String
    var lastVisited: Date
    var read: Bool
    var liked: Bool
    var disliked: Bool

    init(_ item: ReadingHistoryItem) {
        articleID = item.articleID
        lastVisited = item.lastVisited ?? item.firstSeen ?? Date(timeIntervalSince1970: 0)
        read = item.isRead
        liked = item.isLiked
        disliked = item.isDisliked
    }
}

/// `pending`.
struct PendingReport: Codable, Equatable {
    var commands: Int
    var records: Int
    /// The pending changes the server refused, which `sync` sends again (they count in ``records``).
    var refused: [RefusedRow]
}

/// A change the server refused, in `pending --json` and `discard-refused --json`.
struct RefusedRow: Codable, Equatable {
    var zone: String
    var recordName: String
    /// `save` or `delete`.
    var operation: String
    /// FlatSync's code, such as `invalidArguments`.
    var code: String
    /// The server's code, such as `BAD_REQUEST`, when it gave one.
    var serverErrorCode: String?
    var reason: String

    init(_ refusal: RefusedChange) {
        zone = refusal.recordID.zone.name
        recordName = refusal.recordID.name
        operation = refusal.isDelete ? "delete" : "save"
        code = refusal.code.name
        serverErrorCode = refusal.serverErrorCode
        reason = refusal.reason
    }

    /// `rh-x (save): BAD_REQUEST: reason`, for people (the code once, where the reason does not say it).
    var line: String {
        let code = serverErrorCode ?? self.code
        return "\(recordName) (\(operation)): " + (reason.contains(code) ? reason : "\(code): \(reason)")
    }
}

/// `sync`.
struct SyncReport: Codable, Equatable {
    /// Records the server confirmed saved or deleted during this run.
    var sent: Int
    /// Records fetched and applied.
    var fetched: Int
    /// Local records removed because the server deleted them.
    var deleted: Int
    /// Zone resets, as "ReadingList: tokenExpired".
    var resets: [String]
    /// Changes the server refused during this run; they stay pending on the device.
    var refused: [RefusedRow]
}

/// `cloud stats`.
struct CloudStatsReport: Codable, Equatable {
    var requests: Int
    var modifyRequests: Int
    var recordsSaved: Int
    var recordsDeleted: Int
}

/// `save`, `unsave`, `visit`, `like`, `dislike`: whether the device's data changed.
struct MutationReport: Codable, Equatable {
    var articleID: String
    var changed: Bool
}

/// `status`.
struct StatusReport: Codable, Equatable {
    var deviceID: String
    var readingList: Int
    var history: Int
    var pendingCommands: Int
    var pendingRecords: Int
    var refusedRecords: Int
}

/// `cloud expire-tokens`, `cloud delete-zone`, `cloud faults`: what was done.
struct CloudActionReport: Codable, Equatable {
    var done: String
    var zone: String?
    var rate: Double?
    var seed: UInt64?
}

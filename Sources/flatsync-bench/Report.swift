import Foundation

// The two outputs: a table for people and one flat JSON object for machines, one key per row (the rows are
// described in the Performance article, Sources/FlatSync/FlatSync.docc/Performance.md).

/// One line of the table: a measured value, what it is held against, and its target.
struct Row: Sendable {
    enum Unit: Sendable { case milliseconds, perSecond, megabytes, count }

    enum Target: Sendable {
        /// The value itself is at most this.
        case atMost(Double)
        /// The value itself is at least this.
        case atLeast(Double)
        /// The value divided by the baseline is at most this.
        case ratioAtMost(Double)
        /// The value divided by the baseline is at least this.
        case ratioAtLeast(Double)
    }

    /// The JSON key of the value.
    var key: String
    var title: String
    var unit: Unit
    /// The JSON key of the figure in the baseline column, and what to call it there.
    var baseline: (key: String, label: String)? = nil
    /// The JSON key under which value ÷ baseline goes (or baseline ÷ value when `invertRatio`).
    var ratioKey: String? = nil
    var invertRatio = false
    var target: Target? = nil
    /// A baseline row: measured to compare against, with no target of its own.
    var isBaseline = false
}

enum Report {
    /// Every row, in table order, with its target from the Performance article
    /// (Sources/FlatSync/FlatSync.docc/Performance.md). A row whose value was not measured is left out
    /// of both outputs.
    static let rows: [Row] = [
        Row(
            key: "fsync_append_p50_ms", title: "bare write+fsync p50 (one frame's bytes)", unit: .milliseconds,
            isBaseline: true),
        Row(
            key: "enqueue_p50_ms_1k", title: "durable enqueue p50, 1k pending", unit: .milliseconds,
            baseline: ("fsync_append_p50_ms", "bare append"), ratioKey: "enqueue_ratio_1k",
            target: .ratioAtMost(1.25)
        ),
        Row(
            key: "enqueue_p50_ms_10k", title: "durable enqueue p50, 10k pending", unit: .milliseconds,
            baseline: ("fsync_append_p50_ms", "bare append"), ratioKey: "enqueue_ratio_10k",
            target: .ratioAtMost(1.25)
        ),
        Row(
            key: "enqueue_p50_ms_100k", title: "durable enqueue p50, 100k pending", unit: .milliseconds,
            baseline: ("fsync_append_p50_ms", "bare append"), ratioKey: "enqueue_ratio_100k",
            target: .ratioAtMost(1.25)
        ),
        Row(
            key: "enqueue_p50_ms_100k", title: "durable enqueue p50, 100k vs 1k pending", unit: .milliseconds,
            baseline: ("enqueue_p50_ms_1k", "at 1k"), ratioKey: "enqueue_ratio_100k_to_1k", target: .ratioAtMost(1.2)
        ),
        Row(
            key: "enqueue_p99_ms_10k", title: "durable enqueue p99, 10k pending", unit: .milliseconds,
            baseline: ("fsync_append_p99_ms", "bare p99"), ratioKey: "enqueue_p99_ratio_10k"
        ),
        Row(
            key: "reserved_fdatasync_p50_ms", title: "bare write+fdatasync p50 into reserved space",
            unit: .milliseconds, baseline: ("enqueue_p50_ms_10k", "FlatSync 10k"),
            ratioKey: "reserved_fdatasync_to_enqueue_10k", isBaseline: true
        ),
        Row(
            key: "sqlite_durable_insert_p50_ms_10k", title: "SQLite insert p50, WAL FULL, 10k rows",
            unit: .milliseconds,
            baseline: ("enqueue_p50_ms_10k", "FlatSync"), ratioKey: "sqlite_durable_to_enqueue_10k", isBaseline: true
        ),
        Row(
            key: "buffered_enqueue_p50_ms_10k", title: "buffered enqueue p50, 10k pending", unit: .milliseconds,
            target: .atMost(0.010)
        ),
        Row(
            key: "sqlite_buffered_insert_p50_ms_10k", title: "SQLite insert p50, WAL NORMAL, 10k rows",
            unit: .milliseconds, baseline: ("buffered_enqueue_p50_ms_10k", "FlatSync"),
            ratioKey: "sqlite_buffered_to_enqueue_10k", isBaseline: true
        ),
        Row(
            key: "full_rewrite_p50_ms_1k", title: "News-style full rewrite p50, 1k", unit: .milliseconds,
            baseline: ("enqueue_p50_ms_1k", "enqueue"), ratioKey: "full_rewrite_to_enqueue_1k", isBaseline: true
        ),
        Row(
            key: "full_rewrite_p50_ms_10k", title: "News-style full rewrite p50, 10k", unit: .milliseconds,
            baseline: ("enqueue_p50_ms_10k", "enqueue"), ratioKey: "full_rewrite_to_enqueue_10k", isBaseline: true
        ),
        Row(
            key: "sqlite_burst_mutations_per_s_median", title: "SQLite burst: 10,000 inserts, one transaction (median)",
            unit: .perSecond, isBaseline: true
        ),
        Row(
            key: "burst_mutations_per_s_median", title: "burst of 10,000 mutations, batch apply (median)",
            unit: .perSecond, baseline: ("sqlite_burst_mutations_per_s_median", "SQLite"),
            ratioKey: "burst_to_sqlite", target: .ratioAtLeast(2)
        ),
        Row(
            key: "burst_mutations_per_s", title: "burst of 10,000 mutations, batch apply (best)", unit: .perSecond
        ),
        Row(
            key: "group_commit_bare_fsync_per_s", title: "bare write+fsync per mutation, back to back",
            unit: .perSecond, isBaseline: true
        ),
        Row(
            key: "group_commit_mutations_per_s_1", title: "durable adds, 1 writer", unit: .perSecond,
            baseline: ("group_commit_bare_fsync_per_s", "bare"), ratioKey: "group_commit_1_to_bare"
        ),
        Row(
            key: "group_commit_mutations_per_s_4", title: "durable adds, 4 concurrent writers", unit: .perSecond,
            baseline: ("group_commit_mutations_per_s_1", "1 writer"), ratioKey: "group_commit_4_to_1"
        ),
        Row(
            // Reported, no target: a reading app has one writer or a few (see the Performance article,
            // Sources/FlatSync/FlatSync.docc/Performance.md).
            key: "group_commit_mutations_per_s_16", title: "durable adds, 16 concurrent writers", unit: .perSecond,
            baseline: ("group_commit_mutations_per_s_1", "1 writer"), ratioKey: "group_commit_16_to_1"
        ),
        Row(
            key: "group_commit_fsyncs_16", title: "fsyncs issued by the 16 writers", unit: .count,
            baseline: ("group_commit_mutations_16", "adds"), ratioKey: "group_commit_adds_per_fsync_16",
            invertRatio: true
        ),
        Row(
            key: "sqlite_cold_start_ms_10k", title: "SQLite open + fetch all, 10k rows", unit: .milliseconds,
            isBaseline: true),
        Row(
            key: "cold_start_ms_10k", title: "cold start, 10k history + 1k pending", unit: .milliseconds,
            baseline: ("sqlite_cold_start_ms_10k", "SQLite"), ratioKey: "cold_start_to_sqlite_10k",
            target: .ratioAtMost(0.6)
        ),
        Row(
            key: "cold_start_ms_10k_after_kill", title: "the same after a kill (no close: 1k entries replayed)",
            unit: .milliseconds, baseline: ("sqlite_cold_start_ms_10k", "SQLite"),
            ratioKey: "cold_start_after_kill_to_sqlite_10k"
        ),
        Row(
            key: "sqlite_cold_start_ms_100k", title: "SQLite open + fetch all, 100k rows", unit: .milliseconds,
            isBaseline: true),
        Row(
            key: "cold_start_ms_100k", title: "cold start, 100k history + 1k pending", unit: .milliseconds,
            baseline: ("sqlite_cold_start_ms_100k", "SQLite"), ratioKey: "cold_start_to_sqlite_100k",
            target: .ratioAtMost(0.6)
        ),
        Row(
            key: "cold_start_ms_100k", title: "cold start, 100k vs 10k", unit: .milliseconds,
            baseline: ("cold_start_ms_10k", "at 10k"), ratioKey: "cold_start_100k_to_10k", target: .ratioAtMost(11)
        ),
        Row(
            key: "process_rss_mb_before_open",
            title: "memory of a fresh host (FlatSync only) before it opens the store",
            unit: .megabytes, isBaseline: true
        ),
        Row(
            key: "cold_start_peak_rss_mb_100k", title: "peak memory, fresh host, 100k cold start", unit: .megabytes,
            target: .atMost(40)
        ),
        Row(
            key: "cold_start_peak_rss_mb_100k_ckws", title: "the same in a host linking the CKWS transport too",
            unit: .megabytes
        ),
        Row(
            key: "open_store_rss_mb_100k", title: "memory of the host with the 100k store open", unit: .megabytes,
            baseline: ("process_rss_mb_before_open", "before open"), target: .atMost(30)
        ),
        Row(
            key: "open_store_rss_mb_100k_ckws", title: "the same in a host linking the CKWS transport too",
            unit: .megabytes, baseline: ("process_rss_mb_before_open_ckws", "before open")
        ),
        Row(
            key: "open_store_dirty_mb_100k", title: "dirty memory with the 100k store open (footprint)",
            unit: .megabytes, baseline: ("process_dirty_mb_before_open", "before open")
        ),
        Row(
            key: "coalesce_records_sent", title: "10,000 mutations on 100 articles: records sent", unit: .count,
            target: .atMost(100)
        ),
        Row(
            key: "coalesce_modify_requests", title: "10,000 mutations on 100 articles: modify requests", unit: .count,
            baseline: ("coalesce_news_style_commands", "News-style"), ratioKey: "coalesce_news_style_to_requests",
            invertRatio: true, target: .atMost(1)
        ),
        Row(
            key: "push_pull_10k_ms", title: "push 10k records, second device pulls them", unit: .milliseconds,
            target: .atMost(500)
        ),
        Row(
            key: "push_pull_10k_http_ms", title: "the same through CKWS over HTTP (localhost emulator)",
            unit: .milliseconds, baseline: ("push_pull_10k_ms", "in memory"), ratioKey: "push_pull_10k_http_ratio",
            target: .atMost(2_000)
        ),
        Row(
            key: "push_latency_p50_ms_http", title: "push latency over HTTP, A's sync done → B's fetch done, p50",
            unit: .milliseconds, target: .atMost(50)
        ),
        Row(key: "push_latency_p95_ms_http", title: "the same, p95", unit: .milliseconds),
        Row(
            key: "push_save_to_fetch_p50_ms_http", title: "the same from A's add (its own fsync and send), p50",
            unit: .milliseconds
        ),
        Row(key: "idle_poll_requests_per_min", title: "requests/min of a device following pushes, idle", unit: .count),
        Row(
            key: "host_bare_append_p50_ms", title: "bare write+fsync of a host record's log frame, p50",
            unit: .milliseconds, isBaseline: true),
        Row(
            key: "host_enqueue_p50_ms", title: "host record save (fsync), p50", unit: .milliseconds,
            baseline: ("host_bare_append_p50_ms", "bare"), ratioKey: "host_enqueue_to_bare", target: .ratioAtMost(1.25)
        ),
        Row(
            key: "host_sqlite_cold_start_ms_10k", title: "SQLite open + fetch all, 10k host rows",
            unit: .milliseconds, isBaseline: true),
        Row(
            key: "host_cold_start_ms_10k", title: "cold start, 10k host records", unit: .milliseconds,
            baseline: ("host_sqlite_cold_start_ms_10k", "SQLite"), ratioKey: "host_cold_start_to_sqlite_10k",
            target: .ratioAtMost(0.6)
        ),
        Row(
            key: "host_sqlite_cold_start_ms_100k", title: "SQLite open + fetch all, 100k host rows",
            unit: .milliseconds, isBaseline: true),
        Row(
            key: "host_cold_start_ms_100k", title: "cold start, 100k host records", unit: .milliseconds,
            baseline: ("host_sqlite_cold_start_ms_100k", "SQLite"), ratioKey: "host_cold_start_to_sqlite_100k",
            target: .ratioAtMost(0.6)
        ),
        Row(
            key: "host_push_pull_10k_ms", title: "push 10k host records, second device pulls them",
            unit: .milliseconds, target: .atMost(500)
        ),
        Row(key: "idle_poll_hold_s", title: "the courier's hold for that rate (s)", unit: .count, isBaseline: true),
        Row(key: "ckws_encode_us_per_record", title: "CKWS JSON encode per record (µs)", unit: .count),
        Row(key: "ckws_decode_us_per_record", title: "CKWS JSON decode per record (µs)", unit: .count),
    ]

    /// Figures measured outside this run, for orientation only (see the Performance article,
    /// Sources/FlatSync/FlatSync.docc/Performance.md; the SQLite anchors are measured in
    /// the run itself when the library is there).
    static let anchors: [String] = [
        "durable insert, SQLite WAL synchronous=FULL through GRDB: 0.17–0.28 ms",
        "buffered insert, SQLite WAL synchronous=NORMAL through GRDB: ≈ 0.024 ms",
        "one SQLite transaction through GRDB: ≈ 150,000 inserts/s",
        "open + fetch all rows, SQLite through GRDB: 10k 19 ms, 100k 182 ms",
        "raw data of 100k history items ≈ 9.5 MB",
        "NewsCore coalesces a new command only with the last pending one, and sends one command per request",
    ]

    /// The design's keys, in its order; the JSON object lists them first.
    static let designKeys = [
        "fsync_append_p50_ms", "enqueue_p50_ms_1k", "enqueue_p50_ms_10k", "enqueue_p50_ms_100k", "enqueue_p99_ms_10k",
        "buffered_enqueue_p50_ms_10k", "full_rewrite_p50_ms_1k", "full_rewrite_p50_ms_10k", "burst_mutations_per_s",
        "burst_mutations_per_s_median", "group_commit_mutations_per_s_1", "group_commit_mutations_per_s_4",
        "group_commit_mutations_per_s_16", "group_commit_fsyncs_16", "cold_start_ms_10k", "cold_start_ms_100k",
        "cold_start_peak_rss_mb_100k", "open_store_rss_mb_100k", "coalesce_records_sent", "coalesce_modify_requests",
        "push_pull_10k_ms", "push_pull_10k_http_ms", "push_latency_p50_ms_http", "push_latency_p95_ms_http",
    ]

    // MARK: - Evaluation

    enum Verdict: String { case pass = "PASS", miss = "MISS", none = "" }

    struct Line {
        var row: Row
        var value: Double
        var baseline: Double?
        var ratio: Double?
        var verdict: Verdict
    }

    /// The rows that have a value, evaluated against their targets.
    static func evaluate(_ results: Results) -> [Line] {
        rows.compactMap { row in
            guard let value = results[row.key] else { return nil }
            let baseline = row.baseline.flatMap { results[$0.key] }
            let ratio = baseline.map { row.invertRatio ? $0 / value : value / $0 }
            let verdict: Verdict
            switch row.target {
            case .atMost(let limit)?: verdict = value <= limit ? .pass : .miss
            case .atLeast(let limit)?: verdict = value >= limit ? .pass : .miss
            case .ratioAtMost(let limit)?: verdict = ratio.map { $0 <= limit ? .pass : .miss } ?? .none
            case .ratioAtLeast(let limit)?: verdict = ratio.map { $0 >= limit ? .pass : .miss } ?? .none
            case nil: verdict = .none
            }
            return Line(row: row, value: value, baseline: baseline, ratio: ratio, verdict: verdict)
        }
    }

    /// `results` with the ratios of the rows added under their ratio keys.
    static func withRatios(_ results: Results) -> Results {
        var results = results
        for line in evaluate(results) {
            if let key = line.row.ratioKey, let ratio = line.ratio { results[key] = ratio }
        }
        return results
    }

    // MARK: - JSON

    /// One flat JSON object: the design's keys first, then the others sorted, then the run's facts.
    static func json(_ results: Results, mode: RunMode, seconds: Double) -> String {
        let results = withRatios(results)
        let lines = evaluate(results)
        var keys = designKeys.filter { results[$0] != nil }
        keys += results.values.keys.filter { !designKeys.contains($0) }.sorted()
        var members = keys.map { "\(jsonString($0)): \(jsonNumber(results[$0]!))" }
        members.append("\"quick\": \(mode == .quick)")
        members.append("\"targets_checked\": \(lines.filter { $0.verdict != .none }.count)")
        members.append("\"targets_missed\": \(lines.filter { $0.verdict == .miss }.count)")
        members.append("\"run_seconds\": \(jsonNumber(seconds))")
        return "{" + members.joined(separator: ", ") + "}"
    }

    /// A JSON number with six significant digits; JSON has no NaN or infinity, so those become null.
    static func jsonNumber(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(format: "%.6g", value)
    }

    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    // MARK: - Table

    static func table(_ results: Results, mode: RunMode, seconds: Double, started: Date) -> String {
        let lines = evaluate(results)
        var out: [String] = []
        out.append(
            "FlatSync benchmark — \(mode) run, \(started.formatted(.iso8601)), took \(String(format: "%.1f", seconds)) s"
        )
        out.append("machine: \(machineDescription())")
        out.append("OS: \(ProcessInfo.processInfo.operatingSystemVersionString)")
        switch SQLiteLibrary.shared {
        case .success(let library): out.append("SQLite \(library.version), loaded at run time for the anchors")
        case .failure(let error): out.append("SQLite anchors not measured: \(error.description)")
        }
        if let start = results["load_average_start"], let end = results["load_average_end"] {
            out.append(
                String(format: "load average (1 min): %.2f at the start, %.2f at the end", start, end)
                    + (max(start, end) > 1
                        ? " — the cores were busy with other work, which slows absolute figures most (ratios to same-run baselines hold better)"
                        : "")
            )
        }
        if let frame = results["log_frame_bytes"] {
            out.append(
                "one durable enqueue writes a \(Int(frame))-byte log frame; the bare append writes as many bytes")
        }
        out.append("")

        let header = ["measure", "value", "baseline", "ratio", "target", "result"]
        let cells: [[String]] = lines.map { line in
            [
                line.row.title,
                format(line.value, line.row.unit),
                line.baseline.map { "\(format($0, line.row.unit)) \(line.row.baseline!.label)" } ?? "—",
                line.ratio.map { String(format: $0 >= 100 ? "%.0f×" : "%.2f×", $0) } ?? "—",
                targetText(line.row),
                line.verdict.rawValue,
            ]
        }
        let widths = header.indices.map { column in
            ([header] + cells).map { $0[column].count }.max()!
        }
        func render(_ cells: [String]) -> String {
            cells.indices.map { column in
                let cell = cells[column]
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                // Text left, numbers right.
                return column == 0 || column == 4 || column == 5 ? cell + padding : padding + cell
            }
            .joined(separator: "  ")
            .trimmingCharacters(in: .whitespaces)
        }
        out.append(render(header))
        out.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        out += cells.map(render)

        let checked = lines.filter { $0.verdict != .none }
        let missed = checked.filter { $0.verdict == .miss }
        out.append("")
        out.append("targets: \(checked.count - missed.count) of \(checked.count) met")
        if missed.isEmpty == false { out.append("missed: " + missed.map(\.row.title).joined(separator: "; ")) }

        var extras: [String] = []
        if let value = results["enqueue_p50_ms_10k"], let rewrite = results["full_rewrite_p50_ms_10k"] {
            extras.append(
                String(
                    format: "FlatSync's durable enqueue at 10k pending is %.0f× faster than a full rewrite",
                    rewrite / value))
        }
        for (prefix, name) in [
            ("burst_mutations_per_s", "FlatSync burst"), ("sqlite_burst_mutations_per_s", "SQLite burst"),
        ] {
            if let low = results[prefix + "_min"], let mid = results[prefix + "_median"],
                let high = results[prefix + "_max"]
            {
                extras.append("\(name), mutations/s: min \(grouped(low)), median \(grouped(mid)), max \(grouped(high))")
            }
        }
        let writers = [1, 4, 16].filter { results["group_commit_mutations_\($0)"] != nil }
        if !writers.isEmpty {
            extras.append(
                "group commit, adds per fsync: "
                    + writers.map { count in
                        let adds = results["group_commit_mutations_\(count)"]!
                        let fsyncs = max(1, results["group_commit_fsyncs_\(count)"] ?? 1)
                        return String(format: "%d writer%@ %.1f", count, count == 1 ? "" : "s", adds / fsyncs)
                    }.joined(separator: ", "))
        }
        if let open = results["open_store_rss_mb_100k"], let before = results["process_rss_mb_before_open"] {
            extras.append(
                String(
                    format:
                        "the fresh host (FlatSync only) holds %.1f MB before it opens the store (Swift's runtime and "
                        + "FoundationEssentials); with the 100k store open it holds %.1f MB, %.1f MB more",
                    before, open, open - before))
        }
        if let value = results["cold_start_child_ms_100k"] {
            extras.append(String(format: "100k cold start in the fresh child process: %.1f ms", value))
        }
        if let rss = results["cold_start_peak_rss_mb_100k"], let maxrss = results["cold_start_child_ru_maxrss_mb_100k"],
            abs(maxrss - rss) > 1
        {
            extras.append(
                String(
                    format: "the child's peak memory is its VmHWM (%.1f MB); its ru_maxrss says %.1f MB because ", rss,
                    maxrss)
                    + "posix_spawn shares the parent's address space until exec, which carries the parent's peak over"
            )
        }
        if let p99 = results["buffered_enqueue_p99_ms_10k"] {
            extras.append(String(format: "buffered enqueue p99 at 10k pending: %.4f ms", p99))
        }
        if !extras.isEmpty {
            out.append("")
            out += extras
        }
        if !results.notes.isEmpty {
            out.append("")
            out += results.notes.map { "note — \($0)" }
        }
        out.append("")
        out += anchors.map { "anchor from the design brief's figures (not measured here): \($0)" }
        return out.joined(separator: "\n")
    }

    static func format(_ value: Double, _ unit: Row.Unit) -> String {
        switch unit {
        case .milliseconds:
            if value < 1 { return String(format: "%.4f ms", value) }
            if value < 100 { return String(format: "%.2f ms", value) }
            return String(format: "%.1f ms", value)
        case .perSecond:
            return "\(grouped(value))/s"
        case .megabytes:
            return String(format: "%.1f MB", value)
        case .count:
            return grouped(value)
        }
    }

    static func targetText(_ row: Row) -> String {
        switch row.target {
        case .atMost(let limit)?: return "≤ \(trimmed(limit))\(unitSuffix(row.unit))"
        case .atLeast(let limit)?:
            return "≥ \(row.unit == .perSecond ? grouped(limit) : trimmed(limit))\(unitSuffix(row.unit))"
        case .ratioAtMost(let limit)?: return "≤ \(trimmed(limit))× \(row.baseline?.label ?? "baseline")"
        case .ratioAtLeast(let limit)?: return "≥ \(trimmed(limit))× \(row.baseline?.label ?? "baseline")"
        case nil: return row.isBaseline ? "(baseline)" : "—"
        }
    }

    private static func unitSuffix(_ unit: Row.Unit) -> String {
        switch unit {
        case .milliseconds: return " ms"
        case .perSecond: return "/s"
        case .megabytes: return " MB"
        case .count: return ""
        }
    }

    private static func trimmed(_ value: Double) -> String {
        value == value.rounded() ? String(Int64(value)) : String(value)
    }

    /// 150000 → "150,000".
    static func grouped(_ value: Double) -> String {
        let digits = String(Int64(value.rounded()))
        var out = ""
        for (index, character) in digits.reversed().enumerated() {
            if index > 0 && index % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return String(out.reversed())
    }
}

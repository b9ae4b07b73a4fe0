import FlatSyncTestSupport
import Foundation
import Testing

/// Device directories and one shared cloud directory in a test's temporary directory, and the demo's
/// commands run against them: each call is a separate `flatsync-demo` process, so two device names
/// act as two devices.
///
/// ```swift
/// try await DemoWorld.run { world in
///     try await world.ok("A", "save", "x")
///     try await world.ok("A", "sync")
///     #expect(try await world.list("B") == [])
/// }
/// ```
struct DemoWorld {
    let root: URL

    static func run(_ body: (DemoWorld) async throws -> Void) async throws {
        try await withTemporaryDirectory { try await body(DemoWorld(root: $0)) }
    }

    var cloud: URL { root.appendingPathComponent("cloud", isDirectory: true) }

    func device(_ name: String) -> URL { root.appendingPathComponent(name, isDirectory: true) }

    /// Runs a device command on `device` (`--device` and `--cloud` added).
    func run(_ device: String, _ arguments: String...) async throws -> DemoProcess.Result {
        try await DemoProcess.run(arguments + ["--device", self.device(device).path, "--cloud", cloud.path])
    }

    /// Runs a `cloud` command (`--cloud` added).
    func cloudCommand(_ arguments: String...) async throws -> DemoProcess.Result {
        try await DemoProcess.run(["cloud"] + arguments + ["--cloud", cloud.path])
    }

    /// Runs a device command and expects exit 0.
    @discardableResult
    func ok(_ device: String, _ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> DemoProcess.Result
    {
        let result = try await DemoProcess.run(
            arguments + ["--device", self.device(device).path, "--cloud", cloud.path])
        #expect(
            result.status == 0, "\(arguments.joined(separator: " ")) on \(device): \(result)",
            sourceLocation: sourceLocation)
        return result
    }

    /// Runs a `cloud` command and expects exit 0.
    func cloudOK(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let result = try await DemoProcess.run(["cloud"] + arguments + ["--cloud", cloud.path])
        #expect(
            result.status == 0, "cloud \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
    }

    /// The device's reading list from `list --json`: article IDs, newest first.
    func list(_ device: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String] {
        try await listRows(device, sourceLocation: sourceLocation).map { $0["articleID"] as? String ?? "?" }
    }

    /// The rows of `list --json`.
    func listRows(_ device: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [[String: Any]] {
        let result = try await run(device, "list", "--json")
        #expect(result.status == 0, "list on \(device): \(result)", sourceLocation: sourceLocation)
        return try result.json(sourceLocation: sourceLocation) as? [[String: Any]] ?? []
    }

    /// The rows of `history --json`, by article ID.
    func history(_ device: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> [String: [String:
        Any]]
    {
        let result = try await run(device, "history", "--json")
        #expect(result.status == 0, "history on \(device): \(result)", sourceLocation: sourceLocation)
        let rows = try result.json(sourceLocation: sourceLocation) as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: rows.map { ($0["articleID"] as? String ?? "?", $0) })
    }

    /// `sync --json` on the device: its exit status and report.
    func sync(_ device: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> (
        status: Int32, report: [String: Any]
    ) {
        let result = try await run(device, "sync", "--json")
        let report =
            result.status == 0 || !result.stdout.isEmpty
            ? try result.json(sourceLocation: sourceLocation) as? [String: Any] : nil
        return (result.status, report ?? [:])
    }
}

/// What a JSON value decoded by `JSONSerialization` is, telling booleans from numbers (both arrive as
/// `NSNumber`; a boolean's `objCType` is `c`).
enum JSONKind: Equatable {
    case string, bool, int, double, array, object, null

    init(_ value: Any) {
        switch value {
        case is String: self = .string
        case let number as NSNumber:
            let type = String(cString: number.objCType)
            self = type == "c" ? .bool : (type == "d" || type == "f") ? .double : .int
        case is [Any]: self = .array
        case is [String: Any]: self = .object
        default: self = .null
        }
    }
}

/// The keys of a JSON object and the kind of each value, to compare with the shapes the commands' help gives
/// (Sources/flatsync-demo/CommandTable.swift).
func shape(of object: [String: Any]) -> [String: JSONKind] {
    object.mapValues(JSONKind.init)
}

/// Parses an ISO-8601 date as the demo prints it (`2025-05-12T09:03:00Z`).
func isoDate(_ value: Any?) -> Date? {
    (value as? String).flatMap { try? Date($0, strategy: .iso8601) }
}

import FlatSync
import Foundation

/// The demo's entry point: reads the command line, runs the command, and turns every outcome into an
/// exit status — 0 success, 1 failure (one line on standard error), 2 usage error.
enum Demo {
    enum ExitStatus: Int32, Sendable {
        case success = 0
        case failure = 1
        case usage = 2
    }

    static func run(
        _ arguments: [String],
        environment: [String: String] = ProcessInfo.processInfo.environment,
        currentDirectory: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true),
        console: Console = .standard
    ) async -> ExitStatus {
        let parsed: ParsedCommandLine
        do {
            parsed = try Arguments.parse(arguments, environment: environment, currentDirectory: currentDirectory)
        } catch {
            console.error("flatsync-demo: \(error.message)")
            console.error(error.usage)
            return .usage
        }
        switch parsed {
        case .help(let text):
            console.out(text)
            return .success
        case .run(let invocation):
            do {
                return try await execute(invocation, environment: environment, console: console)
            } catch {
                console.error("flatsync-demo: " + failureMessage(for: error, in: invocation))
                return .failure
            }
        }
    }

    private static func execute(
        _ invocation: Invocation, environment: [String: String], console: Console
    ) async throws -> ExitStatus {
        let output = Output(console: console, json: invocation.json)
        switch invocation.command {
        case .tour:
            let sampleData = try SampleData.load(environment: environment)
            return try await Tour(sampleData: sampleData, console: console).run() ? .success : .failure
        case .cloudSchema:
            let schema = ArticleNote.schema
            console.out(invocation.json ? String(decoding: schema.jsonData, as: UTF8.self) : schema.ckdbText)
            return .success
        case .cloudStats, .cloudExpireTokens, .cloudDeleteZone, .cloudFaults:
            return try await CloudCommands(location: invocation.cloud, output: output).run(invocation.command)
        case .cloudServe(let port, let options):
            guard case .directory(let directory) = invocation.cloud else {
                preconditionFailure("the parser lets cloud serve take a directory only")
            }
            return try await ServeCommand(directory: directory, port: port, options: options, console: console).run()
        case .cloudLogin(let callbackPort):
            let connection = CloudConnection(location: invocation.cloud, service: invocation.service)
            return try await LoginCommand(
                device: invocation.device, connection: connection, callbackPort: callbackPort, output: output
            ).run()
        case .watch:
            let connection = CloudConnection(location: invocation.cloud, service: invocation.service)
            return try await WatchCommand(device: invocation.device, connection: connection, output: output).run()
        default:
            return try await DeviceCommands(directory: invocation.device, output: output)
                .run(
                    invocation.command, cloud: CloudConnection(location: invocation.cloud, service: invocation.service))
        }
    }

    /// One line saying what failed and what to do about it.
    static func failureMessage(for error: any Error, in invocation: Invocation) -> String {
        let what = invocation.command.name
        let text: String
        switch error {
        case let failure as DemoFailure:
            text = failure.message
        case let error as FlatSyncError where error.code == .storeLocked:
            text =
                "the device directory \(invocation.device.path) is in use by another process (another flatsync-demo, "
                + "say); wait for it to finish and try again, or use another --device"
        case let error as FlatSyncError where error.isDiskFull:
            text =
                "\(what) failed: the disk is full (\(error.message)\(error.path.map { ", \($0)" } ?? "")); everything "
                + "saved before is safe; free some space and try again"
        case let error as FlatSyncError:
            text = "\(what) failed: \(describe(error)); " + advice(for: error.code)
        case let error as CloudError:
            text =
                "\(what) failed: the cloud at \(invocation.cloud) answered \(error.code): \(error.message); "
                + (error.isTransient ? "try again" : "check the cloud, then try again")
        default:
            text = "\(what) failed: \(error)"
        }
        return text.replacingOccurrences(of: "\n", with: " ")
    }

    /// The error's message, path and cause on one line.
    static func describe(_ error: FlatSyncError) -> String {
        "\(error.message)\(error.path.map { " (\($0))" } ?? "")\(error.cause.map { " [\($0)]" } ?? "")"
    }

    private static func advice(for code: FlatSyncError.Code) -> String {
        switch code {
        case .ioFailed:
            return
                "nothing was half-written; check that the directory is writable and the disk has space, then try again"
        case .unsupportedFormatVersion:
            return "the directory was written by a newer FlatSync; use that version or another --device"
        default: return "nothing was half-written; try again"
        }
    }
}

/// A failure the demo itself describes, already in the one-line form of ``Demo/failureMessage(for:in:)``.
struct DemoFailure: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

extension DemoCommand {
    /// The command as typed: `save`, `cloud delete-zone`.
    var name: String {
        switch self {
        case .tour: return "tour"
        case .save: return "save"
        case .unsave: return "unsave"
        case .visit: return "visit"
        case .like: return "like"
        case .dislike: return "dislike"
        case .note: return "note"
        case .notes: return "notes"
        case .list: return "list"
        case .history: return "history"
        case .pending: return "pending"
        case .sync: return "sync"
        case .discardRefused: return "discard-refused"
        case .status: return "status"
        case .cloudStats: return "cloud stats"
        case .cloudExpireTokens: return "cloud expire-tokens"
        case .cloudDeleteZone: return "cloud delete-zone"
        case .cloudFaults: return "cloud faults"
        case .cloudServe: return "cloud serve"
        case .cloudSchema: return "cloud schema"
        case .cloudLogin: return "cloud login"
        case .watch: return "watch"
        }
    }
}

extension FlatSyncError {
    /// The file system is out of space (or quota), here or in an error it wraps.
    var isDiskFull: Bool {
        var error: (any Error)? = self
        while let current = error {
            if let posix = current as? POSIXError, posix.code == .ENOSPC || posix.code == .EDQUOT { return true }
            error = (current as? FlatSyncError)?.cause
        }
        return false
    }
}

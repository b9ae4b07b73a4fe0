import FlatSync
import FlatSyncCloudKit
import Foundation

/// What the user asked the demo to do, once the command line has been checked.
enum DemoCommand: Equatable, Sendable {
    case tour
    case save(articleID: String, title: String?)
    case unsave(articleID: String)
    case visit(articleID: String, version: Int64?)
    case like(articleID: String)
    case dislike(articleID: String)
    case note(articleID: String, text: String)
    case notes(articleID: String?)
    case list
    case history
    case pending
    case sync
    case discardRefused(recordName: String?)
    case status
    case cloudStats
    case cloudExpireTokens
    case cloudDeleteZone(ZoneID)
    case cloudFaults(rate: Double, seed: UInt64?)
    case cloudServe(port: UInt16?, options: ServeOptions)
    case cloudSchema
    case cloudLogin(callbackPort: UInt16?)
    case watch
}

/// How `cloud serve` runs its server.
struct ServeOptions: Equatable, Sendable {
    /// `-v`: one line per request on standard error.
    var verbose = false
    /// `--guessed-error-codes`: also send the four error codes CloudKit does not document.
    var guessedErrorCodes = false
    /// `--production-schema`: refuse, as a production container does, what the schema does not declare.
    var productionSchema: ProductionSchema?
    /// `--require-sign-in`: requests without a web auth token get 421 and a sign-in URL.
    var requireSignIn = false
    /// `--sign-in-callback URL`: where the sign-in page sends the token (else it shows it).
    var signInCallback: URL?
    /// `--courier-hold SECONDS`: how long the web courier holds a poll before an empty answer (default 25).
    var courierHoldSeconds: Int?
}

/// The schema `cloud serve --production-schema` enforces.
enum ProductionSchema: Equatable, Sendable {
    /// The schema FlatSync declares (`cloud schema`).
    case declared
    /// A schema in a JSON file, as `cloud schema --json` prints one (a relative path is taken from the
    /// current directory).
    case file(path: String)
}

/// Where the cloud is: a `DirectoryCloud` directory, or a CloudKit Web Services endpoint.
enum CloudLocation: Equatable, Sendable, CustomStringConvertible {
    /// A directory that several processes share.
    case directory(URL)
    /// An `http://` or `https://` CKWS endpoint: `cloud serve`'s URL, or Apple's server.
    case service(URL)

    var description: String {
        switch self {
        case .directory(let url): return url.path
        case .service(let url): return url.absoluteString
        }
    }
}

/// The container a CKWS endpoint is asked for (`--container`, `--environment`, `$FLATSYNC_CK_API_TOKEN`).
struct ServiceSettings: Equatable, Sendable {
    /// The demo's container when `--container` is not given.
    static let defaultContainer = "iCloud.dev.flatsync.demo"
    /// The API token sent to a local emulator when `$FLATSYNC_CK_API_TOKEN` is not set (it accepts any).
    static let emulatorAPIToken = "flatsync-demo"

    var container = ServiceSettings.defaultContainer
    var environment = CloudKitWebServicesTransport.Configuration.Environment.development
    /// `$FLATSYNC_CK_API_TOKEN`, when set.
    var apiToken: String?
}

/// A checked command with the directories it acts on and how to print.
struct Invocation: Equatable, Sendable {
    var command: DemoCommand
    /// The device directory (`--device`, else `$FLATSYNC_DEVICE`, else `./.flatsync/device`).
    var device: URL
    /// The cloud (`--cloud`, else `$FLATSYNC_CLOUD`, else `./.flatsync/cloud`): a `DirectoryCloud`
    /// directory or an `http://`/`https://` CKWS endpoint.
    var cloud: CloudLocation
    /// `--json`: print exactly one JSON value on standard output.
    var json: Bool
    /// The container asked for when ``cloud`` is an endpoint.
    var service = ServiceSettings()
}

/// The outcome of reading a command line that was not a usage error.
enum ParsedCommandLine: Equatable, Sendable {
    /// Run this.
    case run(Invocation)
    /// Print this help text and exit 0.
    case help(String)
}

/// A command line the demo cannot run: printed on standard error with ``usage``; the exit status is 2.
struct UsageError: Error, Equatable, Sendable {
    /// What is wrong, in one line.
    var message: String
    /// The usage of the command concerned (or of the whole tool).
    var usage: String
}

/// Reads the command line against ``CommandTable``: the table says which words name a command, what
/// operands and options it takes and how they become a ``DemoCommand``; this type only walks the tokens.
///
/// Options may come before or after the command words, as `--name value` or `--name=value`; `--` ends
/// the options (for an article ID that starts with `-`). No arguments at all means the tour.
enum Arguments {
    static func parse(
        _ arguments: [String],
        environment: [String: String],
        currentDirectory: URL
    ) throws(UsageError) -> ParsedCommandLine {
        func locations(_ command: DemoCommand, _ values: [String: String], json: Bool) throws(UsageError)
            -> Invocation
        {
            var service = ServiceSettings()
            if let container = values["container"] { service.container = container }
            if let name = values["environment"] {
                guard let environment = CloudKitWebServicesTransport.Configuration.Environment(rawValue: name) else {
                    throw UsageError(
                        message: "--environment must be development or production, not '\(name)'", usage: Help.toolUsage
                    )
                }
                service.environment = environment
            }
            service.apiToken = environment["FLATSYNC_CK_API_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            return Invocation(
                command: command,
                device: directory(
                    values["device"], environment["FLATSYNC_DEVICE"], ".flatsync/device", in: currentDirectory),
                cloud: try cloud(values["cloud"], environment["FLATSYNC_CLOUD"], in: currentDirectory),
                json: json,
                service: service
            )
        }
        if arguments.isEmpty { return .run(try locations(.tour, [:], json: false)) }

        var words: [String] = []
        var values: [String: String] = [:]
        var flags: Set<String> = []
        var wantsHelp = false
        var remaining = arguments[...]
        var optionsEnded = false
        while let token = remaining.popFirst() {
            if optionsEnded || !token.hasPrefix("-") || token == "-" {
                words.append(token)
                continue
            }
            if token == "--" {
                optionsEnded = true
                continue
            }
            if token == "-h" || token == "--help" {
                wantsHelp = true
                continue
            }
            if token == "-v" {
                flags.insert("verbose")
                continue
            }
            guard token.hasPrefix("--") else {
                throw UsageError(message: "unknown option '\(token)'", usage: Help.toolUsage)
            }
            var name = String(token.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = CommandTable.option(named: name) else {
                throw UsageError(message: "unknown option '--\(name)'", usage: Help.toolUsage)
            }
            guard let placeholder = option.placeholder else {
                if inlineValue != nil {
                    throw UsageError(message: "--\(name) takes no value", usage: Help.toolUsage)
                }
                flags.insert(name)
                continue
            }
            if option.valueIsOptional, inlineValue == nil, remaining.first.map({ $0.hasPrefix("-") }) ?? true {
                // Given alone (last, or before another option): its default.
                values[name] = option.defaultValue
                continue
            }
            guard let value = inlineValue ?? remaining.popFirst() else {
                throw UsageError(message: "--\(name) needs a value (\(placeholder))", usage: Help.toolUsage)
            }
            if values[name] != nil {
                throw UsageError(message: "--\(name) is given more than once", usage: Help.toolUsage)
            }
            values[name] = value
        }

        // The longest entry whose words start the command line: "cloud stats" rather than "cloud".
        let spec = CommandTable.commands
            .filter { words.starts(with: $0.words) }
            .max { $0.words.count < $1.words.count }
        if wantsHelp {
            if words.isEmpty { return .help(Help.tool) }
            guard let spec else { throw unknownCommand(words) }
            return .help(Help.command(spec))
        }
        guard !words.isEmpty else {
            throw UsageError(message: "no command given", usage: Help.toolUsage)
        }
        guard let spec else { throw unknownCommand(words) }

        let operands = Array(words.dropFirst(spec.words.count))
        if operands.count < spec.operands.filter({ !$0.isOptional }).count {
            let missing = spec.operands[operands.count]
            throw UsageError(message: "\(spec.name) needs \(missing.description)", usage: spec.usage)
        }
        if operands.count > spec.operands.count {
            let extra = operands[spec.operands.count]
            throw UsageError(message: "unexpected argument '\(extra)' for \(spec.name)", usage: spec.usage)
        }
        for name in Set(values.keys).union(flags).sorted() where !spec.accepts(name) {
            throw UsageError(message: "\(spec.name) does not take --\(name)", usage: spec.usage)
        }
        let command: DemoCommand
        do {
            command = try spec.make(CommandValues(operands: operands, options: values, flags: flags))
        } catch {
            throw UsageError(message: error.message, usage: spec.usage)
        }
        let invocation = try locations(command, values, json: flags.contains("json"))
        if case .cloudServe = command, case .service(let url) = invocation.cloud {
            throw UsageError(
                message: "cloud serve serves a cloud directory; --cloud must be a directory, not \(url.absoluteString)",
                usage: spec.usage)
        }
        if case .cloudLogin = command, case .directory = invocation.cloud {
            throw UsageError(
                message: "cloud login signs in to a CloudKit endpoint; give --cloud an http:// or https:// URL",
                usage: spec.usage)
        }
        if case .watch = command, case .directory = invocation.cloud {
            throw UsageError(
                message: "watch needs a cloud that notifies: give --cloud the URL `flatsync-demo cloud serve` printed",
                usage: spec.usage)
        }
        return .run(invocation)
    }

    private static func unknownCommand(_ words: [String]) -> UsageError {
        if words.first == "cloud", words.count > 1 {
            return UsageError(message: "unknown command 'cloud \(words[1])'", usage: Help.cloudUsage)
        }
        if words == ["cloud"] {
            return UsageError(message: "cloud needs a subcommand", usage: Help.cloudUsage)
        }
        return UsageError(message: "unknown command '\(words[0])'", usage: Help.toolUsage)
    }

    /// The option's value, else the environment variable's (when set and not empty), else the default;
    /// relative paths are taken from `base`.
    private static func directory(_ option: String?, _ variable: String?, _ fallback: String, in base: URL) -> URL {
        let path = option ?? variable.flatMap { $0.isEmpty ? nil : $0 } ?? fallback
        return URL(fileURLWithPath: path, relativeTo: base).standardizedFileURL
    }

    /// The cloud, as ``directory(_:_:_:in:)`` finds it, except that an `http://` or `https://` value is an
    /// endpoint.
    private static func cloud(_ option: String?, _ variable: String?, in base: URL) throws(UsageError)
        -> CloudLocation
    {
        let value = option ?? variable.flatMap { $0.isEmpty ? nil : $0 } ?? ".flatsync/cloud"
        let lowered = value.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else {
            return .directory(directory(value, nil, value, in: base))
        }
        guard let url = URL(string: value), url.host?.isEmpty == false, url.query == nil else {
            throw UsageError(
                message: "'\(value)' is not a usable URL: give the server's address, such as http://127.0.0.1:8080",
                usage: Help.toolUsage)
        }
        return .service(url)
    }
}

/// The operands and option values of one command line, handed to a ``CommandSpec``'s builder.
struct CommandValues {
    var operands: [String]
    var options: [String: String]
    var flags: Set<String> = []

    /// The operand at `index` checked as an article ID (Sources/FlatSync/FlatSync.docc/Architecture.md), so a
    /// bad one is a usage error and
    /// nothing is opened.
    func articleID(_ index: Int = 0) throws(ArgumentProblem) -> String {
        let id = operands[index]
        do {
            try ArticleID.validate(id)
        } catch {
            throw ArgumentProblem("invalid article ID: \(error.message)")
        }
        return id
    }

    /// The option's value as an `http://` or `https://` URL, or nil when the option is absent.
    func url(_ name: String) throws(ArgumentProblem) -> URL? {
        guard let text = options[name] else { return nil }
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
        else {
            throw ArgumentProblem("--\(name) must be an http:// or https:// URL, not '\(text)'")
        }
        return url
    }

    /// The option's value as a number of type `T` within `range`, or nil when the option is absent.
    func number<T: LosslessStringConvertible & Comparable>(
        _ name: String, in range: ClosedRange<T>, meaning: String
    ) throws(ArgumentProblem) -> T? {
        guard let text = options[name] else { return nil }
        guard let value = T(text), range.contains(value) else {
            throw ArgumentProblem("--\(name) must be \(meaning), not '\(text)'")
        }
        return value
    }
}

/// Why a builder refused its operands or options; the parser adds the command's usage.
struct ArgumentProblem: Error {
    var message: String
    init(_ message: String) { self.message = message }
}

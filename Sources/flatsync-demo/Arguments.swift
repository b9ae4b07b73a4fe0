import FlatSync
import Foundation

/// What the user asked the demo to do, once the command line has been checked.
enum DemoCommand: Equatable, Sendable {
    case tour
    case save(articleID: String, title: String?)
    case unsave(articleID: String)
    case visit(articleID: String, version: Int64?)
    case like(articleID: String)
    case dislike(articleID: String)
    case list
    case history
    case pending
    case sync
    case status
    case cloudStats
    case cloudExpireTokens
    case cloudDeleteZone(ZoneID)
    case cloudFaults(rate: Double, seed: UInt64?)
}

/// A checked command with the directories it acts on and how to print.
struct Invocation: Equatable, Sendable {
    var command: DemoCommand
    /// The device directory (`--device`, else `$FLATSYNC_DEVICE`, else `./.flatsync/device`).
    var device: URL
    /// The `DirectoryCloud` directory (`--cloud`, else `$FLATSYNC_CLOUD`, else `./.flatsync/cloud`).
    var cloud: URL
    /// `--json`: print exactly one JSON value on standard output.
    var json: Bool
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
        func locations(_ command: DemoCommand, _ values: [String: String], json: Bool) -> Invocation {
            Invocation(
                command: command,
                device: directory(
                    values["device"], environment["FLATSYNC_DEVICE"], ".flatsync/device", in: currentDirectory),
                cloud: directory(
                    values["cloud"], environment["FLATSYNC_CLOUD"], ".flatsync/cloud", in: currentDirectory),
                json: json
            )
        }
        if arguments.isEmpty { return .run(locations(.tour, [:], json: false)) }

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
        if operands.count < spec.operands.count {
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
            command = try spec.make(CommandValues(operands: operands, options: values))
        } catch {
            throw UsageError(message: error.message, usage: spec.usage)
        }
        return .run(locations(command, values, json: flags.contains("json")))
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
}

/// The operands and option values of one command line, handed to a ``CommandSpec``'s builder.
struct CommandValues {
    var operands: [String]
    var options: [String: String]

    /// The operand at `index` checked as an article ID (DESIGN §2), so a bad one is a usage error and
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

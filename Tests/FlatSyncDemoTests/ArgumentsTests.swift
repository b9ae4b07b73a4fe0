import FlatSync
import FlatSyncCloudKit
import Foundation
import Testing

@testable import flatsync_demo

/// The command-line parser, without processes: what each command line becomes, and which are usage
/// errors with which message.
@Suite struct ArgumentsTests {
    private static let home = URL(fileURLWithPath: "/home/reader", isDirectory: true)

    private func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError)
        -> ParsedCommandLine
    {
        try Arguments.parse(arguments, environment: environment, currentDirectory: Self.home)
    }

    private func command(_ arguments: [String]) throws -> DemoCommand {
        guard case .run(let invocation) = try parse(arguments) else {
            Issue.record("\(arguments) asked for help")
            return .tour
        }
        return invocation.command
    }

    // MARK: - Commands

    @Test(arguments: [
        ([], DemoCommand.tour),
        (["tour"], .tour),
        (["save", "x"], .save(articleID: "x", title: nil)),
        (["save", "x", "--title", "Tides of change"], .save(articleID: "x", title: "Tides of change")),
        (["save", "--title=A = B", "x"], .save(articleID: "x", title: "A = B")),
        (["save", "--", "-dash-id"], .save(articleID: "-dash-id", title: nil)),
        (["unsave", "x"], .unsave(articleID: "x")),
        (["visit", "x"], .visit(articleID: "x", version: nil)),
        (["visit", "x", "--version", "0"], .visit(articleID: "x", version: 0)),
        (["visit", "--version", "12", "x"], .visit(articleID: "x", version: 12)),
        (["like", "x"], .like(articleID: "x")),
        (["dislike", "x"], .dislike(articleID: "x")),
        (["list"], .list), (["history"], .history), (["pending"], .pending), (["sync"], .sync), (["status"], .status),
        (["cloud", "stats"], .cloudStats),
        (["cloud", "expire-tokens"], .cloudExpireTokens),
        (["cloud", "delete-zone", "ReadingList"], .cloudDeleteZone(.readingList)),
        (["cloud", "delete-zone", "readinghistory"], .cloudDeleteZone(.readingHistory)),
        (["cloud", "delete-zone", "READINGLIST"], .cloudDeleteZone(.readingList)),
        (["cloud", "faults", "--rate", "0.3", "--seed", "42"], .cloudFaults(rate: 0.3, seed: 42)),
        (["cloud", "faults", "--rate", "0"], .cloudFaults(rate: 0, seed: nil)),
        (["cloud", "faults", "--rate", "1"], .cloudFaults(rate: 1, seed: nil)),
        (["cloud", "serve"], .cloudServe(port: nil, options: ServeOptions())),
        (
            ["cloud", "serve", "--port", "8080", "-v", "--guessed-error-codes", "--production-schema", "declared"],
            .cloudServe(
                port: 8080, options: ServeOptions(verbose: true, guessedErrorCodes: true, productionSchema: .declared))
        ),
        (
            ["cloud", "serve", "--production-schema"],
            .cloudServe(port: nil, options: ServeOptions(productionSchema: .declared))
        ),
        (
            ["cloud", "serve", "--production-schema", "-v"],
            .cloudServe(port: nil, options: ServeOptions(verbose: true, productionSchema: .declared))
        ),
        (
            ["cloud", "serve", "--production-schema", "old.json"],
            .cloudServe(port: nil, options: ServeOptions(productionSchema: .file(path: "old.json")))
        ),
        (["cloud", "serve", "--require-sign-in"], .cloudServe(port: nil, options: ServeOptions(requireSignIn: true))),
        (
            ["cloud", "serve", "--courier-hold", "3"],
            .cloudServe(port: nil, options: ServeOptions(courierHoldSeconds: 3))
        ),
        (["cloud", "login", "--cloud", "http://127.0.0.1:1"], .cloudLogin(callbackPort: nil)),
        (["cloud", "login", "--cloud", "https://x.test", "--callback-port", "9"], .cloudLogin(callbackPort: 9)),
        (["watch", "--cloud", "http://127.0.0.1:1"], .watch),
    ])
    func aValidCommandLineBecomesItsCommand(arguments: [String], expected: DemoCommand) throws {
        #expect(try command(arguments) == expected)
    }

    @Test(arguments: [
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["cloud"], "cloud needs a subcommand"),
        (["cloud", "purge"], "unknown command 'cloud purge'"),
        (["save"], "save needs an article ID (ID)"),
        (["save", "a", "b"], "unexpected argument 'b' for save"),
        (["save", ""], "invalid article ID: An article ID must not be empty."),
        (["save", "a\u{7}b"], "invalid article ID"),
        (["save", String(repeating: "x", count: 257)], "invalid article ID"),
        (["save", "x", "--title"], "--title needs a value (T)"),
        (["save", "x", "--title", "a", "--title", "b"], "--title is given more than once"),
        (["save", "x", "--version", "1"], "save does not take --version"),
        (["save", "x", "--json=yes"], "--json takes no value"),
        (["save", "-x"], "unknown option '-x'"),
        (["list", "--colour"], "unknown option '--colour'"),
        (["visit", "x", "--version", "-1"], "--version must be a whole number, 0 or more, not '-1'"),
        (["visit", "x", "--version", "1.5"], "--version must be a whole number, 0 or more, not '1.5'"),
        (["visit", "x", "--version", "99999999999999999999"], "--version must be"),
        (["cloud", "faults"], "cloud faults needs --rate R"),
        (["cloud", "faults", "--rate", "1.01"], "--rate must be a number from 0 to 1, not '1.01'"),
        (["cloud", "faults", "--rate", "nan"], "--rate must be a number from 0 to 1"),
        (["cloud", "faults", "--rate", "0.5", "--seed", "-3"], "--seed must be a whole number, 0 or more, not '-3'"),
        (["cloud", "delete-zone", "Bookmarks"], "unknown zone 'Bookmarks': use ReadingList or ReadingHistory"),
        (["cloud", "delete-zone"], "cloud delete-zone needs a zone"),
        (["cloud", "stats", "--device", "d"], "cloud stats does not take --device"),
        (["tour", "--json"], "tour does not take --json"),
        (["--json"], "no command given"),
        (["cloud", "serve", "--cloud", "http://127.0.0.1:8080"], "cloud serve serves a cloud directory"),
        (["cloud", "serve", "--port", "0"], "--port must be a port number"),
        (["cloud", "serve", "--port", "70000"], "--port must be a port number"),
        (["cloud", "serve", "--courier-hold", "0"], "--courier-hold must be a whole number of seconds"),
        (["cloud", "login"], "cloud login signs in to a CloudKit endpoint"),
        (["watch"], "watch needs a cloud that notifies"),
        (["watch", "--cloud", "http://127.0.0.1:1", "--json"], "watch does not take --json"),
        (["sync", "--cloud", "http://"], "'http://' is not a usable URL"),
        (["sync", "--cloud", "http://h?x=1"], "'http://h?x=1' is not a usable URL"),
        (["sync", "--environment", "staging"], "--environment must be development or production"),
        (["save", "x", "--container", "iCloud.x"], "save does not take --container"),
    ])
    func aBadCommandLineIsAUsageError(arguments: [String], message: String) {
        #expect {
            _ = try parse(arguments)
        } throws: { error in
            guard let error = error as? UsageError else { return false }
            return error.message.hasPrefix(message) && error.usage.contains("usage:")
        }
    }

    @Test func aUsageErrorAboutOneCommandShowsThatCommandsUsage() throws {
        #expect(
            throws: UsageError(
                message: "save needs an article ID (ID)",
                usage: "usage: flatsync-demo save ID [--title T] [--device DIR] [--cloud DIR|URL] [--json]")
        ) {
            _ = try parse(["save"])
        }
    }

    // MARK: - Options and directories

    @Test func optionsMayComeBeforeOrAfterTheCommand() throws {
        let before = try parse(["--json", "--device", "d", "list"])
        let after = try parse(["list", "--device=d", "--json"])
        #expect(before == after)
        guard case .run(let invocation) = before else { return }
        #expect(invocation.json)
        #expect(invocation.device.path == "/home/reader/d")
    }

    @Test func directoriesComeFromOptionsThenTheEnvironmentThenDefaults() throws {
        let environment = ["FLATSYNC_DEVICE": "/devices/a", "FLATSYNC_CLOUD": "shared"]
        guard case .run(let defaults) = try parse(["list"]),
            case .run(let fromEnvironment) = try parse(["list"], environment: environment),
            case .run(let fromOptions) = try parse(
                ["list", "--device", "/x", "--cloud", "../y"], environment: environment),
            case .run(let emptyVariable) = try parse(["list"], environment: ["FLATSYNC_DEVICE": ""])
        else {
            Issue.record("asked for help")
            return
        }
        #expect(defaults.device.path == "/home/reader/.flatsync/device")
        #expect(defaults.cloud.path == "/home/reader/.flatsync/cloud")
        #expect(!defaults.json)
        #expect(fromEnvironment.device.path == "/devices/a")
        #expect(fromEnvironment.cloud.path == "/home/reader/shared")
        #expect(fromOptions.device.path == "/x")
        #expect(fromOptions.cloud.path == "/home/y")
        #expect(emptyVariable.device.path == "/home/reader/.flatsync/device", "an empty variable counts as unset")
    }

    // MARK: - Help

    @Test func helpIsForTheToolOrForTheCommandNamed() throws {
        #expect(try parse(["--help"]) == .help(Help.tool))
        #expect(try parse(["-h"]) == .help(Help.tool))
        let save = CommandTable.commands.first { $0.name == "save" }!
        #expect(try parse(["save", "--help"]) == .help(Help.command(save)))
        let faults = CommandTable.commands.first { $0.name == "cloud faults" }!
        #expect(try parse(["cloud", "faults", "-h"]) == .help(Help.command(faults)))
        #expect(throws: UsageError.self) { try parse(["nope", "--help"]) }
    }

    @Test func everyCommandHasHelpThatShowsItsUsage() {
        for spec in CommandTable.commands {
            let help = Help.command(spec)
            #expect(help.hasPrefix(spec.usage + "\n"), "\(spec.name)")
            #expect(Help.tool.contains("  " + spec.name), "\(spec.name) is missing from --help")
        }
    }

    @Test func commandNamesMatchTheTable() {
        // DemoCommand.name is how failures name a command; it must be a command a person can type.
        let names = Set(CommandTable.commands.map(\.name))
        let commands: [DemoCommand] = [
            .tour, .save(articleID: "x", title: nil), .unsave(articleID: "x"), .visit(articleID: "x", version: nil),
            .like(articleID: "x"), .dislike(articleID: "x"), .note(articleID: "x", text: "t"), .notes(articleID: nil),
            .list, .history, .pending, .sync,
            .discardRefused(recordName: nil), .status, .cloudStats,
            .cloudExpireTokens, .cloudDeleteZone(.readingList), .cloudFaults(rate: 0, seed: nil),
            .cloudServe(port: nil, options: ServeOptions()), .cloudSchema, .cloudLogin(callbackPort: nil), .watch,
        ]
        #expect(Set(commands.map(\.name)) == names)
    }
}

@Suite struct CloudLocationArgumentsTests {
    private static let home = URL(fileURLWithPath: "/home/reader", isDirectory: true)

    private func invocation(_ arguments: [String], environment: [String: String] = [:]) throws -> Invocation {
        guard
            case .run(let invocation) = try Arguments.parse(
                arguments, environment: environment, currentDirectory: Self.home)
        else { throw UsageError(message: "help", usage: "") }
        return invocation
    }

    @Test func anHTTPCloudIsAnEndpointAndAnythingElseADirectory() throws {
        #expect(
            try invocation(["sync", "--cloud", "http://127.0.0.1:8080"]).cloud
                == .service(URL(string: "http://127.0.0.1:8080")!))
        #expect(
            try invocation(["sync", "--cloud", "HTTPS://api.apple-cloudkit.com"]).cloud
                == .service(URL(string: "HTTPS://api.apple-cloudkit.com")!))
        #expect(
            try invocation(["sync"], environment: ["FLATSYNC_CLOUD": "http://127.0.0.1:9"]).cloud
                == .service(URL(string: "http://127.0.0.1:9")!))
        #expect(try invocation(["sync", "--cloud", "httpdocs"]).cloud.description == "/home/reader/httpdocs")
    }

    @Test func theContainerEnvironmentAndAPITokenComeFromOptionsAndTheEnvironment() throws {
        let defaults = try invocation(["sync", "--cloud", "http://127.0.0.1:1"])
        #expect(defaults.service == ServiceSettings())
        let given = try invocation(
            [
                "sync", "--cloud", "https://api.apple-cloudkit.com", "--container", "iCloud.com.example",
                "--environment", "production",
            ],
            environment: ["FLATSYNC_CK_API_TOKEN": "tok"])
        #expect(
            given.service == ServiceSettings(container: "iCloud.com.example", environment: .production, apiToken: "tok")
        )
    }
}

extension CloudLocation {
    /// The directory's path or the URL, as people see it.
    fileprivate var path: String { description }
}

import FlatSync

/// One command the demo understands: the words that name it, its operands and options, its help, and
/// how its checked values become a ``DemoCommand``. ``Arguments`` and ``Help`` read only this table.
struct CommandSpec: Sendable {
    /// The words that name the command: `["save"]`, `["cloud", "faults"]`.
    var words: [String]
    /// The operands, in order, all required.
    var operands: [Operand]
    /// Options of this command alone (the shared ones are ``CommandTable/sharedOptions``).
    var options: [OptionSpec] = []
    /// Which of ``CommandTable/sharedOptions`` the command takes: all of them for device commands;
    /// `cloud` commands act on no device; the tour acts on no directory and prints no JSON.
    var sharedOptions: [String] = ["device", "cloud", "json"]
    /// One line for the command list.
    var summary: String
    /// The rest of the command's help: what it does, offline or not, its JSON shape.
    var details: String
    /// Turns checked values into the command.
    var make: @Sendable (CommandValues) throws(ArgumentProblem) -> DemoCommand

    var name: String { words.joined(separator: " ") }

    /// `flatsync-demo save ID [--title T] [--device DIR] [--cloud DIR] [--json]`.
    var usage: String {
        let parts =
            ["flatsync-demo"] + words + operands.map { $0.isOptional ? "[\($0.placeholder)]" : $0.placeholder }
            + allOptions.map(\.usage)
        return "usage: " + parts.joined(separator: " ")
    }

    /// The command's own options, then the shared ones it takes.
    var allOptions: [OptionSpec] {
        options + CommandTable.sharedOptions.filter { sharedOptions.contains($0.name) }
    }

    func accepts(_ option: String) -> Bool {
        allOptions.contains { $0.name == option }
    }

    /// An operand: its placeholder in usage lines and what to call it in an error.
    struct Operand: Sendable, CustomStringConvertible {
        var placeholder: String
        var description: String
        /// An optional operand may be left out; optional ones come last, and usage shows them in brackets.
        var isOptional = false
    }
}

/// An option: `--name PLACEHOLDER`, or a flag when ``placeholder`` is nil.
struct OptionSpec: Sendable {
    var name: String
    var placeholder: String?
    var help: String
    /// Required options are shown without brackets.
    var isRequired = false
    /// The value an option that takes one has when it is given alone (followed by nothing, or by another
    /// option); nil: it needs its value.
    var defaultValue: String? = nil

    var valueIsOptional: Bool { defaultValue != nil }

    var usage: String {
        let value = placeholder.map { valueIsOptional ? " [\($0)]" : " \($0)" } ?? ""
        let text = "--\(name)" + value
        return isRequired ? text : "[\(text)]"
    }
}

/// Every command the demo takes, in the order `--help` lists them: this table is the demo's command-line contract.
enum CommandTable {
    static let sharedOptions = [
        OptionSpec(
            name: "device", placeholder: "DIR",
            help: "the device directory (default: $FLATSYNC_DEVICE, else ./.flatsync/device)"),
        OptionSpec(
            name: "cloud", placeholder: "DIR|URL",
            help: "the cloud: a directory devices share, or the http:// URL of `cloud serve` (or https:// "
                + "for CloudKit) (default: $FLATSYNC_CLOUD, else ./.flatsync/cloud)"),
        OptionSpec(name: "json", placeholder: nil, help: "print exactly one JSON value on standard output"),
        OptionSpec(
            name: "container", placeholder: "ID",
            help: "with a URL cloud: the container (default: \(ServiceSettings.defaultContainer)); the API token "
                + "comes from $FLATSYNC_CK_API_TOKEN (a local server accepts any)"),
        OptionSpec(
            name: "environment", placeholder: "ENV",
            help: "with a URL cloud: development (the default) or production"),
    ]

    /// The shared options of a command that reaches the cloud.
    static let online = ["device", "cloud", "json", "container", "environment"]
    /// The shared options of a `cloud` command, which acts on no device.
    static let cloudOnly = ["cloud", "json", "container", "environment"]

    private static let id = CommandSpec.Operand(placeholder: "ID", description: "an article ID (ID)")
    private static let offline = "Works offline: it opens only the device directory and never contacts the cloud."
    private static let mutation = offline + " It exits 0 only once the change is durable (fsync'd); `sync` sends it."

    static let commands: [CommandSpec] = [
        CommandSpec(
            words: ["tour"], operands: [], sharedOptions: [],
            summary: "the guided tour (also what runs with no arguments)",
            details: """
                Two devices and an in-memory cloud in a temporary directory, driven by SampleData/tour.json over
                SampleData/articles.json: saves, a sync, a conflict and the merge rule that settled it, an
                expired-token reset, a coalesced burst, notes deleted with their article, and the final states
                side by side. Ends with
                `converged: yes` (exit 0) or `converged: no` (exit 1). Set FLATSYNC_SAMPLE_DATA to use another
                SampleData folder.
                """,
            make: { _ in .tour }
        ),
        CommandSpec(
            words: ["save"], operands: [id],
            options: [OptionSpec(name: "title", placeholder: "T", help: "the article's title, stored with the entry")],
            summary: "save an article to the reading list",
            details: """
                Saving an article already on the list changes nothing. \(mutation)
                JSON: {"articleID": String, "changed": Bool}
                """,
            make: { values throws(ArgumentProblem) in
                .save(articleID: try values.articleID(), title: values.options["title"])
            }
        ),
        CommandSpec(
            words: ["unsave"], operands: [id],
            summary: "remove an article from the reading list",
            details: """
                Removing an article that is not on the list changes nothing. \(mutation)
                JSON: {"articleID": String, "changed": Bool}
                """,
            make: { values throws(ArgumentProblem) in .unsave(articleID: try values.articleID()) }
        ),
        CommandSpec(
            words: ["visit"], operands: [id],
            options: [
                OptionSpec(
                    name: "version", placeholder: "N", help: "the article version read (a whole number, 0 or more)")
            ],
            summary: "record a visit: the article counts as seen and read",
            details: """
                \(mutation)
                JSON: {"articleID": String, "changed": Bool}
                """,
            make: { values throws(ArgumentProblem) in
                .visit(
                    articleID: try values.articleID(),
                    version: try values.number("version", in: 0...Int64.max, meaning: "a whole number, 0 or more")
                )
            }
        ),
        CommandSpec(
            words: ["like"], operands: [id],
            summary: "like an article (replaces a dislike)",
            details: """
                \(mutation)
                JSON: {"articleID": String, "changed": Bool}
                """,
            make: { values throws(ArgumentProblem) in .like(articleID: try values.articleID()) }
        ),
        CommandSpec(
            words: ["dislike"], operands: [id],
            summary: "dislike an article (replaces a like)",
            details: """
                \(mutation)
                JSON: {"articleID": String, "changed": Bool}
                """,
            make: { values throws(ArgumentProblem) in .dislike(articleID: try values.articleID()) }
        ),
        CommandSpec(
            words: ["note"],
            operands: [id, CommandSpec.Operand(placeholder: "TEXT", description: "the note's text (TEXT)")],
            summary: "add a note to a saved article",
            details: """
                The article must be on the reading list; unsaving it deletes its notes, here at once and on every
                device once synced. Notes are the demo's own record type, synced by FlatSync's host-store API
                (see the DocC article "Syncing your own records"). \(mutation)
                JSON: {"noteID": String, "articleID": String, "text": String, "created": ISO-8601 String}
                """,
            make: { values throws(ArgumentProblem) in
                let text = values.operands[1]
                guard !text.isEmpty else { throw ArgumentProblem("a note's text must not be empty") }
                return .note(articleID: try values.articleID(), text: text)
            }
        ),
        CommandSpec(
            words: ["notes"],
            operands: [CommandSpec.Operand(placeholder: "ID", description: "an article ID (ID)", isOptional: true)],
            summary: "print the notes, of one article or of all, oldest first",
            details: """
                \(offline)
                JSON: [{"noteID": String, "articleID": String, "text": String, "created": ISO-8601 String}],
                oldest first
                """,
            make: { values throws(ArgumentProblem) in
                .notes(articleID: values.operands.isEmpty ? nil : try values.articleID())
            }
        ),
        CommandSpec(
            words: ["list"], operands: [],
            summary: "print the reading list, newest first",
            details: """
                \(offline)
                JSON: [{"articleID": String, "dateAdded": ISO-8601 String}], newest first
                """,
            make: { _ in .list }
        ),
        CommandSpec(
            words: ["history"], operands: [],
            summary: "print the reading history, most recent first",
            details: """
                \(offline)
                JSON: [{"articleID": String, "lastVisited": ISO-8601 String, "read": Bool, "liked": Bool,
                "disliked": Bool}], most recent first. "lastVisited" is the last visit, or when the article
                was first seen if it was never visited (an item that was only liked, say).
                """,
            make: { _ in .history }
        ),
        CommandSpec(
            words: ["pending"], operands: [],
            summary: "print what waits to be sent, and which changes the server refused",
            details: """
                \(offline) A change the server refused (a production schema without one of its fields, say)
                stays pending on the device: `sync` sends it again, `discard-refused` drops it.
                JSON: {"commands": Int, "records": Int, "refused": [{"zone": String, "recordName": String,
                "operation": "save"|"delete", "code": String, "serverErrorCode": String?, "reason": String}]}
                ("records" counts the refused ones too)
                """,
            make: { _ in .pending }
        ),
        CommandSpec(
            words: ["sync"], operands: [], sharedOptions: online,
            summary: "send pending changes to the cloud and fetch the others' changes",
            details: """
                Signs in on the cloud at --cloud (as "demo-user" on a directory; as the signed-in user of a URL,
                through CloudKit Web Services, keeping the web auth token in the device directory), makes sure
                the zones exist, sends
                every pending change and fetches every zone's changes (a reset when the server expired the
                change tokens). Prints progress on standard error when more than 200 records are sent or
                fetched and standard error is a terminal.
                Exit 0 when everything was sent and fetched. When the sync could not finish (no network, the
                server busy, injected faults), it prints its summary, then one line on standard error saying
                what is left, and exits 1: nothing is lost, run sync again. When the server refused changes
                (a field its production schema lacks, say), they stay on the device, pending; sync exits 1 with
                a line saying what was refused, and every later sync sends them again; `discard-refused` drops
                them.
                JSON: {"sent": Int, "fetched": Int, "deleted": Int, "resets": [String], "refused": [{"zone",
                "recordName", "operation", "code", "serverErrorCode", "reason"}]}
                "sent" counts records the server confirmed saved or deleted; "fetched" the records fetched and
                applied that changed this device (its own changes coming back do not count); "deleted" the
                local records removed because another device deleted them; "resets" holds entries such as
                "ReadingList: tokenExpired" or "ReadingHistory: deletedByUser".
                """,
            make: { _ in .sync }
        ),
        CommandSpec(
            words: ["discard-refused"], operands: [],
            options: [
                OptionSpec(
                    name: "record", placeholder: "NAME",
                    help: "only the change to this record (as `pending` names it, such as rh-ecb-holds-rates)")
            ],
            sharedOptions: online,
            summary: "drop the changes the server refused, and take the server's version back",
            details: """
                Reaches the cloud: looks up the server's version of each record whose change was refused, puts
                it back on this device (or removes the record where the server has none) and drops the change,
                which is then never sent. Without --record, every refused change goes.
                JSON: [{"zone", "recordName", "operation", "code", "serverErrorCode", "reason"}] (the changes
                dropped)
                """,
            make: { values throws(ArgumentProblem) in .discardRefused(recordName: values.options["record"]) }
        ),
        CommandSpec(
            words: ["status"], operands: [],
            summary: "print the device's ID, counts and pending changes",
            details: """
                \(offline)
                JSON: {"deviceID": String, "readingList": Int, "history": Int, "pendingCommands": Int,
                "pendingRecords": Int, "refusedRecords": Int}
                """,
            make: { _ in .status }
        ),
        CommandSpec(
            words: ["cloud", "stats"], operands: [], sharedOptions: cloudOnly,
            summary: "print the cloud's request and record counters",
            details: """
                Counts every request any device sent to the cloud directory, failed ones included.
                JSON: {"requests": Int, "modifyRequests": Int, "recordsSaved": Int, "recordsDeleted": Int}
                """,
            make: { _ in .cloudStats }
        ),
        CommandSpec(
            words: ["cloud", "expire-tokens"], operands: [], sharedOptions: cloudOnly,
            summary: "expire every change token, as the server does after compacting its history",
            details: """
                The next sync of every device fetches each zone from the start (a reset) and keeps its pending
                changes.
                JSON: {"done": "expire-tokens"}
                """,
            make: { _ in .cloudExpireTokens }
        ),
        CommandSpec(
            words: ["cloud", "delete-zone"],
            operands: [.init(placeholder: "ZONE", description: "a zone (ReadingList or ReadingHistory)")],
            sharedOptions: cloudOnly,
            summary: "delete a zone as the user would, from Settings",
            details: """
                ZONE is ReadingList or ReadingHistory (any case). Each device wipes that zone's data and pending
                changes on its next sync; later changes start the zone afresh.
                JSON: {"done": "delete-zone", "zone": String}
                """,
            make: { values throws(ArgumentProblem) in
                let name = values.operands[0]
                guard let zone = ZoneID.builtIn.first(where: { $0.name.lowercased() == name.lowercased() }) else {
                    throw ArgumentProblem("unknown zone '\(name)': use ReadingList or ReadingHistory")
                }
                return .cloudDeleteZone(zone)
            }
        ),
        CommandSpec(
            words: ["cloud", "faults"], operands: [],
            options: [
                OptionSpec(
                    name: "rate", placeholder: "R",
                    help: "the share of requests that fail, 0 to 1 (0 turns faults off)", isRequired: true),
                OptionSpec(
                    name: "seed", placeholder: "S",
                    help: "the random seed, to replay the same faults (default: a random one, printed)"),
            ],
            sharedOptions: cloudOnly,
            summary: "make a share of the cloud's requests fail, for every device",
            details: """
                Failures are the transient ones a client must survive: no network, a lost request or a lost
                response (the server applied it), an unavailable or throttling service, a busy zone.
                JSON: {"done": "faults", "rate": Double, "seed": Int} ("seed" is absent when the rate is 0)
                """,
            make: { values throws(ArgumentProblem) in
                guard values.options["rate"] != nil else { throw ArgumentProblem("cloud faults needs --rate R") }
                let rate = try values.number("rate", in: 0.0...1.0, meaning: "a number from 0 to 1")!
                let seed: UInt64? = try values.number("seed", in: 0...UInt64.max, meaning: "a whole number, 0 or more")
                return .cloudFaults(rate: rate, seed: seed)
            }
        ),
        CommandSpec(
            words: ["cloud", "serve"], operands: [],
            options: [
                OptionSpec(name: "port", placeholder: "P", help: "the port on 127.0.0.1 (default: a free one)"),
                OptionSpec(name: "verbose", placeholder: nil, help: "-v: one line per request on standard error"),
                OptionSpec(
                    name: "production-schema", placeholder: "SCHEMA",
                    help: "act as a production container deployed with SCHEMA: `declared` (what `cloud schema` "
                        + "prints; also when the option is given alone) or a JSON file like `cloud schema --json` "
                        + "prints; a save outside it is refused record by record, as CloudKit does (without the "
                        + "option: development, which takes any new record type or field)",
                    defaultValue: "declared"),
                OptionSpec(
                    name: "guessed-error-codes", placeholder: nil,
                    help: "also send four error codes CloudKit does not document (ZONE_BUSY, LIMIT_EXCEEDED, "
                        + "CHANGE_TOKEN_EXPIRED, USER_DELETED_ZONE): guesses, to test a client against them"),
                OptionSpec(
                    name: "require-sign-in", placeholder: nil,
                    help: "refuse requests without a web auth token (421 and a sign-in URL), for `cloud login`"),
                OptionSpec(
                    name: "sign-in-callback", placeholder: "URL",
                    help: "where the sign-in page sends the token, such as `cloud login --callback-port`'s "
                        + "http://127.0.0.1:P/ (default: the page shows the token, to paste)"),
                OptionSpec(
                    name: "courier-hold", placeholder: "SECONDS",
                    help: "how long the push courier holds a device's poll before it answers empty (default 25)"),
            ],
            sharedOptions: ["cloud"],
            summary: "serve the cloud directory over localhost HTTP as CloudKit Web Services",
            details: """
                Runs in the foreground on 127.0.0.1 and prints its URL; devices then use --cloud URL. The
                directory stays the cloud's state, so the server can be stopped and started again (Ctrl-C stops
                it cleanly) and `cloud` commands work on the directory or the URL alike. Every response carries
                a new web auth token. Pushes go as CloudKit sends them: to devices that made a push token
                (tokens/create, tokens/register) and long-poll its courier URL (`watch`), for zones with a
                zone subscription (devices make them when they start). It sends only the error codes Apple
                documents, unless --guessed-error-codes.
                """,
            make: { values throws(ArgumentProblem) in
                .cloudServe(
                    port: try values.number("port", in: 1...UInt16.max, meaning: "a port number from 1 to 65535"),
                    options: ServeOptions(
                        verbose: values.flags.contains("verbose"),
                        guessedErrorCodes: values.flags.contains("guessed-error-codes"),
                        productionSchema: values.options["production-schema"].map {
                            $0 == "declared" ? .declared : .file(path: $0)
                        },
                        requireSignIn: values.flags.contains("require-sign-in"),
                        signInCallback: try values.url("sign-in-callback"),
                        courierHoldSeconds: try values.number(
                            "courier-hold", in: 1...3_600, meaning: "a whole number of seconds from 1 to 3600")))
            }
        ),
        CommandSpec(
            words: ["cloud", "schema"], operands: [], sharedOptions: ["json"],
            summary: "print the CloudKit schema FlatSync writes, to deploy before going to production",
            details: """
                Prints the record types and fields FlatSync writes in CloudKit's schema language, the text
                Apple's `cktool import-schema` takes (deploy it to the container's development environment,
                then to production in CloudKit Console). A production container refuses any field it lacks.
                JSON: {"recordTypes": {"ReadingListEntry": {"articleID": "STRING", …}, …}} with CloudKit Web
                Services type names; `cloud serve --production-schema` reads a file of this shape.
                """,
            make: { _ in .cloudSchema }
        ),
        CommandSpec(
            words: ["cloud", "login"], operands: [],
            options: [
                OptionSpec(
                    name: "callback-port", placeholder: "P",
                    help: "also wait for the token on http://127.0.0.1:P/ (the API token's sign-in callback)")
            ],
            sharedOptions: online,
            summary: "sign in to a CloudKit container and keep the web auth token in the device directory",
            details: """
                Asks users/current; when the server answers that a sign-in is needed (421), prints the
                sign-in URL and waits for the web auth token: pasted on standard input, or delivered to the
                localhost callback of --callback-port. The token is stored in the device directory (mode 0600)
                and used by the device's next sync; every response replaces it with a new one.
                JSON: {"userRecordName": String, "signedIn": Bool}
                """,
            make: { values throws(ArgumentProblem) in
                .cloudLogin(
                    callbackPort: try values.number(
                        "callback-port", in: 1...UInt16.max, meaning: "a port number from 1 to 65535"))
            }
        ),
        CommandSpec(
            words: ["watch"], operands: [], sharedOptions: ["device", "cloud", "container", "environment"],
            summary: "stay connected: sync now, then fetch whenever the server says a zone changed",
            details: """
                Needs a URL cloud (`cloud serve`, or CloudKit). Syncs once (making sure the server pushes
                changes of the zones), then makes a push token and long-polls its web courier URL as CloudKit
                JS does; for each notification it fetches what the notification names (the whole database
                after a quiet poll or a reconnection, since pushes can be missed), printing one line per
                fetch that brought changes, until Ctrl-C. Between fetches the device directory is free:
                other commands work on it meanwhile.
                """,
            make: { _ in .watch }
        ),
    ]

    /// The option called `name` in any command, so tokens can be read before the command is known.
    static func option(named name: String) -> OptionSpec? {
        (sharedOptions + commands.flatMap(\.options)).first { $0.name == name }
    }
}

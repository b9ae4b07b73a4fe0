/// The demo's help texts, all made from ``CommandTable`` so they cannot disagree with the parser.
enum Help {
    /// The short usage printed under a usage error that concerns no one command.
    static var toolUsage: String {
        """
        usage: flatsync-demo                  run the tour
               flatsync-demo COMMAND [ARGS] [--device DIR] [--cloud DIR|URL] [--json]
        Run 'flatsync-demo --help' for the commands, 'flatsync-demo COMMAND --help' for one of them.
        """
    }

    /// The usage printed under an unknown `cloud` subcommand.
    static var cloudUsage: String {
        let lines = CommandTable.commands.filter { $0.words.first == "cloud" }.map {
            "  " + $0.usage.dropFirst("usage: ".count)
        }
        return "usage:\n" + lines.joined(separator: "\n")
    }

    /// `flatsync-demo --help`.
    static var tool: String {
        let width = CommandTable.commands.map { synopsis($0).count }.max() ?? 0
        let list = CommandTable.commands.map { spec in
            let left = synopsis(spec)
            return "  " + left + String(repeating: " ", count: width - left.count + 2) + spec.summary
        }
        let options = CommandTable.sharedOptions.map { "  " + $0.usage.dropFirst().dropLast() + "\n      " + $0.help }
        return """
            flatsync-demo: FlatSync's demo. With no arguments it runs the tour; the commands act on one device
            directory and a cloud that several devices (processes) share: a cloud directory, or the URL of
            `cloud serve` (CloudKit Web Services on localhost) or of CloudKit itself.

            usage: flatsync-demo [COMMAND [ARGS]] [--device DIR] [--cloud DIR|URL] [--json]

            commands:
            \(list.joined(separator: "\n"))

            options (--device for device commands, --cloud for sync and cloud commands; not for tour):
            \(options.joined(separator: "\n"))
              -h, --help
                  this help; 'flatsync-demo COMMAND --help' for one command

            Device commands other than sync work offline and never contact the cloud; sync sends what they
            queued. Two devices are two device directories sharing one --cloud. A command waits up to 10 s
            for a device directory another process holds (a watch syncing, say).

            environment:
              FLATSYNC_DEVICE, FLATSYNC_CLOUD   defaults for --device and --cloud
              FLATSYNC_CK_API_TOKEN            the container's API token for an https:// cloud (a local
                                               `cloud serve` accepts any)
              FLATSYNC_SAMPLE_DATA             the SampleData folder the tour reads

            exit status: 0 success, 1 failure (one line on standard error says what and what to do;
            sync also exits 1 when it could not finish), 2 usage error.
            """
    }

    /// `flatsync-demo COMMAND --help`.
    static func command(_ spec: CommandSpec) -> String {
        var text =
            spec.usage + "\n\n" + spec.summary.prefix(1).uppercased() + spec.summary.dropFirst() + ".\n" + spec.details
            + "\n"
        if !spec.allOptions.isEmpty {
            text +=
                "\noptions:\n"
                + spec.allOptions.map { "  --\($0.name)\($0.placeholder.map { " \($0)" } ?? "")\n      \($0.help)" }
                .joined(separator: "\n") + "\n"
        }
        return text
    }

    /// `save ID [--title T]`: the words, operands and own options, for the command list.
    private static func synopsis(_ spec: CommandSpec) -> String {
        // A command with many options shows them in its own help only, so the list stays narrow.
        let options = spec.options.count > 2 ? ["[options]"] : spec.options.map(\.usage)
        let operands = spec.operands.map { $0.isOptional ? "[\($0.placeholder)]" : $0.placeholder }
        return (spec.words + operands + options).joined(separator: " ")
    }
}

import FlatSyncTestSupport
import Foundation
import Testing

@testable import flatsync_demo

/// The tour, run as the real binary, and the checks of its script.
@Suite struct TourTests {
    @Test func theTourRunsAndConverges() async throws {
        let result = try await DemoProcess.run([])
        #expect(result.status == 0, "\(result)")
        #expect(result.lines.last == "converged: yes")
        #expect(result.stderr.isEmpty)
        // The timeline shows what the issue promises.
        for expected in [
            "the liking set last wins", "an edit wins over a delete it did not see", "reset (tokenExpired)",
            "the reset kept B's pending change", "40 visits coalesced into 5 pending record changes",
            "1 modify request saving 5 records", "server: holds exactly the same records",
            "notes    1 note", "a note is a record of the demo's own type", "notes (1 / 1)",
        ] {
            #expect(result.stdout.contains(expected), "missing: \(expected)")
        }
        let workspace = result.lines.first { $0.hasPrefix("Working in ") }?.dropFirst("Working in ".count).split(
            separator: " "
        ).first
        #expect(
            workspace.map { !FileManager.default.fileExists(atPath: String($0)) } == true,
            "the temporary directory is removed")
    }

    @Test func theTourSaysConvergedNoAndExits1WhenTheDevicesDiffer() async throws {
        try await withSampleData(
            script: """
                {"start": "2025-01-01T00:00:00Z", "devices": ["A", "B"], "steps": [
                  {"do": "offline", "device": "A"},
                  {"do": "save", "device": "A", "articles": ["ecb-holds-rates"]},
                  {"do": "compare"}
                ]}
                """
        ) { directory in
            let result = try await DemoProcess.run([], environment: ["FLATSYNC_SAMPLE_DATA": directory.path])
            #expect(result.status == 1, "\(result)")
            #expect(result.lines.last == "converged: no")
            #expect(result.stdout.contains("≠ ecb-holds-rates"))
        }
    }

    @Test func missingSampleDataFailsWithAClearMessage() async throws {
        try await withTemporaryDirectory { directory in
            let result = try await DemoProcess.run([], environment: ["FLATSYNC_SAMPLE_DATA": directory.path])
            #expect(result.status == 1)
            #expect(
                result.stderr.hasPrefix("flatsync-demo: cannot find the tour's sample data")
                    && result.stderr.contains("FLATSYNC_SAMPLE_DATA"), "\(result)")
        }
    }

    @Test func theSampleDataIsFoundNextToTheSources() throws {
        let directory = try SampleData.locate(environment: [:])
        #expect(directory.lastPathComponent == "SampleData")
        let sample = try SampleData.load(environment: [:])
        #expect(sample.articles.count >= 50)
        #expect(Set(sample.articles.map(\.id)).count == sample.articles.count, "article IDs are unique")
        #expect(throws: DemoFailure.self) {
            try SampleData.locate(environment: [:], sourceFile: "/nowhere/Sources/x/y.swift")
        }
    }

    @Test(arguments: [
        (
            #"{"do": "save", "device": "C", "articles": ["ecb-holds-rates"]}"#,
            "step 1 (\"do\": \"save\"): unknown device \"C\""
        ),
        (
            #"{"do": "save", "device": "A", "articles": ["no-such-article"]}"#,
            "article \"no-such-article\" is not in articles.json"
        ),
        (#"{"do": "save", "device": "A"}"#, "needs a non-empty \"articles\" list"),
        (#"{"do": "dance"}"#, "step 1 (\"do\": \"dance\"): unknown action"),
        (#"{"do": "wait", "seconds": 0}"#, "\"seconds\" must be at least 1"),
        (#"{"do": "say"}"#, "needs \"text\""),
    ])
    func aBadScriptStepIsNamedBeforeTheTourStarts(step: String, message: String) throws {
        let script = try JSONDecoder.tour.decode(
            TourScript.self,
            from: Data(#"{"start": "2025-01-01T00:00:00Z", "devices": ["A", "B"], "steps": [\#(step)]}"#.utf8))
        #expect {
            _ = try script.actions(articles: ["ecb-holds-rates"])
        } throws: { error in
            (error as? DemoFailure)?.message.contains(message) == true
        }
    }

    @Test func theShippedScriptIsValid() throws {
        let sample = try SampleData.load(environment: [:])
        let actions = try sample.script.actions(articles: Set(sample.articles.map(\.id)))
        #expect(actions.contains(.compare))
        #expect(actions.contains(.expireTokens))
    }

    /// A SampleData folder with the package's articles and `script` as tour.json.
    private func withSampleData(script: String, _ body: (URL) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let articles = try SampleData.locate(environment: [:]).appendingPathComponent("articles.json")
            try FileManager.default.copyItem(at: articles, to: directory.appendingPathComponent("articles.json"))
            try Data(script.utf8).write(to: directory.appendingPathComponent("tour.json"))
            try await body(directory)
        }
    }
}

extension JSONDecoder {
    /// Decodes the tour's files (ISO-8601 dates).
    static var tour: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}

import FlatSync
import FlatSyncTestSupport
import Foundation
import Testing

/// The README's walkthrough of a refused change, as separate processes: a production `cloud serve` whose
/// schema lacks a field refuses a like; the device keeps it, says so, and sends it once the schema is fixed.
@Suite struct RefusedChangeDemoTests {
    /// Starts `cloud serve` on `directory` and returns it with its URL.
    private func serve(_ directory: URL, _ extra: [String]) async throws -> (BackgroundDemo, String) {
        let server = try BackgroundDemo(["cloud", "serve", "--cloud", directory.path] + extra)
        guard let url = servedURL(await server.line { $0.hasPrefix("serving ") }) else {
            await server.stop()
            throw DemoTestFailure("cloud serve printed no URL:\n\(server.transcript)")
        }
        return (server, url)
    }

    @Test func cloudSchemaPrintsTheSchemaLanguageAndJSON() async throws {
        let text = try await DemoProcess.run(["cloud", "schema"])
        #expect(text.status == 0)
        #expect(text.stdout.hasPrefix("DEFINE SCHEMA"))
        #expect(text.stdout.contains("RECORD TYPE ReadingHistoryItem ("))
        #expect(text.stdout.contains("fsLastModifiedBy"))
        let json = try await DemoProcess.run(["cloud", "schema", "--json"])
        let types = try #require((try json.json() as? [String: Any])?["recordTypes"] as? [String: [String: String]])
        #expect(types["ReadingListEntry"]?["dateAdded"] == "TIMESTAMP")
        #expect(types["ReadingHistoryItem"]?["likingStatus"] == "INT64")
        #expect(Set(types.keys) == ["ReadingListEntry", "ReadingHistoryItem", "Note"], "the demo's notes too")
        #expect(types["Note"]?["article"] == "REFERENCE")
        #expect(types["Note"]?["fsLastModifiedBy"] == "STRING")
    }

    @Test func aRefusedLikeIsKeptReportedAndSentOnceTheSchemaIsFixed() async throws {
        try await withTemporaryDirectory { root in
            let cloud = root.appendingPathComponent("cloud")
            let device = root.appendingPathComponent("a")
            // A production schema deployed before likes existed: no likingChangedAt.
            let declared = try await DemoProcess.run(["cloud", "schema", "--json"])
            var schema = try CloudSchema(json: Data(declared.stdout.utf8))
            schema.recordTypes["ReadingHistoryItem"]!["likingChangedAt"] = nil
            let old = root.appendingPathComponent("old-schema.json")
            try schema.jsonData.write(to: old)

            func run(_ arguments: [String], _ url: String) async throws -> DemoProcess.Result {
                try await DemoProcess.run(arguments + ["--device", device.path, "--cloud", url])
            }
            let port = String(try freePort())
            var (server, url) = try await serve(cloud, ["--port", port, "--production-schema", old.path])
            do {
                #expect(try await run(["visit", "ecb-holds-rates"], url).status == 0)
                #expect(try await run(["like", "ecb-holds-rates"], url).status == 0)
                let refused = try await run(["sync"], url)
                #expect(refused.status == 1, "\(refused)")
                #expect(refused.stderr.contains("the server refused 1 change"), "\(refused)")
                #expect(refused.stderr.contains("likingChangedAt"), "\(refused)")
                #expect(refused.stderr.contains("discard-refused"), "\(refused)")

                let pending = try await run(["pending", "--json"], url)
                let report = try #require(try pending.json() as? [String: Any])
                #expect(report["records"] as? Int == 1)
                let rows = try #require(report["refused"] as? [[String: Any]])
                #expect(rows.first?["recordName"] as? String == "rh-ecb-holds-rates")
                #expect(rows.first?["serverErrorCode"] as? String == "BAD_REQUEST")
                let history = try await run(["history", "--json"], url)
                #expect(history.stdout.contains(#""liked":true"#), "still liked on the device: \(history)")
                let again = try await run(["sync"], url)
                #expect(again.status == 1, "refused again while the schema lacks the field")

                // The schema is deployed: the same server directory, started as a production container with
                // FlatSync's declared schema. The change goes through.
                await server.stop()
                (server, url) = try await serve(cloud, ["--port", port, "--production-schema", "declared"])
                let fixed = try await run(["sync", "--json"], url)
                #expect(fixed.status == 0, "\(fixed)")
                let after = try await run(["pending", "--json"], url)
                #expect((try after.json() as? [String: Any])?["records"] as? Int == 0, "\(after)")
                await server.stop()
            } catch {
                await server.stop()
                throw error
            }
        }
    }

    @Test func discardRefusedDropsTheChangeAndTakesTheServersVersionBack() async throws {
        try await withTemporaryDirectory { root in
            let cloud = root.appendingPathComponent("cloud")
            let device = root.appendingPathComponent("a")
            var schema = CloudSchema.flatSync
            schema.recordTypes["ReadingHistoryItem"]!["likingChangedAt"] = nil
            let old = root.appendingPathComponent("old-schema.json")
            try schema.jsonData.write(to: old)
            let (server, url) = try await serve(cloud, ["--production-schema", old.path])
            do {
                func run(_ arguments: [String]) async throws -> DemoProcess.Result {
                    try await DemoProcess.run(arguments + ["--device", device.path, "--cloud", url])
                }
                #expect(try await run(["visit", "x"]).status == 0)
                #expect(try await run(["sync"]).status == 0)
                #expect(try await run(["like", "x"]).status == 0)
                #expect(try await run(["sync"]).status == 1)
                let unknown = try await run(["discard-refused", "--record", "rh-nothing"])
                #expect(unknown.status == 1 && unknown.stderr.contains("no refused change"), "\(unknown)")
                let discarded = try await run(["discard-refused", "--json"])
                #expect(discarded.status == 0, "\(discarded)")
                #expect((try discarded.json() as? [[String: Any]])?.first?["recordName"] as? String == "rh-x")
                let history = try await run(["history", "--json"])
                #expect(history.stdout.contains(#""liked":false"#), "the server's version is back: \(history)")
                let pending = try await run(["pending", "--json"])
                #expect((try pending.json() as? [String: Any])?["records"] as? Int == 0)
                #expect(try await run(["sync"]).status == 0)
                await server.stop()
            } catch {
                await server.stop()
                throw error
            }
        }
    }
}

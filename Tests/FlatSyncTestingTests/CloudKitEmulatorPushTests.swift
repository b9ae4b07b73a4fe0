import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// Push tokens (documented: tokens/create and tokens/register, under /device/ as observed live) and the
// emulator-defined long poll of their webcourierURL.

@Suite("CKWS emulator: push")
struct CloudKitEmulatorPushTests {
    @Test func tokensCreateAnswersWithALongPollURL() async throws {
        try await withEmulator { server, client in
            let created = try await client.post("tokens/create", ["apnsEnvironment": "production"])
            #expect(created.status == 200)
            #expect(created.webAuthToken != nil)
            #expect(Set(created.json.keys) == ["apnsEnvironment", "apnsToken", "webcourierURL"])
            #expect(created.json["apnsEnvironment"] as? String == "production")
            let token = try #require(created.json["apnsToken"] as? String)
            #expect(token.count == 64 && token.allSatisfy(\.isHexDigit))
            #expect(created.json["webcourierURL"] as? String == server.baseURL.absoluteString + "/_push/" + token)

            let registered = try await client.post(
                "tokens/register", ["apnsToken": "feedface", "apnsEnvironment": "development"])
            #expect(registered.status == 200)
            #expect(registered.json.isEmpty)
            let refused = try await client.post("tokens/create", ["apnsEnvironment": "staging"])
            #expect(refused.status == 400)
            #expect(try await server.backing.counters().requests == 0, "push tokens are not database requests")
        }
    }

    @Test func aPollAnswersWithTheZonesChangedByOtherRequestsThenTimesOutWith204() async throws {
        try await withEmulator { server, client in
            try await client.createZones(["Notes", "Photos"])
            let first = try await courierURL(client)
            let second = try await courierURL(client)
            // Whether the change lands before or while the poll waits, the poll reports it.
            async let poll = client.send("GET", URL(string: first + "?timeout=30")!, timeout: .seconds(40))
            try await client.modify("Notes", [operation("create", "a")])
            try await client.modify("Photos", [operation("create", "b")], atomic: false)
            let answered = try await poll
            #expect(answered.status == 200)
            var seen = (answered.json["zoneIDs"] as? [[String: String]] ?? []).compactMap { $0["zoneName"] }
            #expect(seen.first == "Notes")
            if !seen.contains("Photos") {
                let next = try await client.send("GET", URL(string: first + "?timeout=30")!)
                seen += (next.json["zoneIDs"] as? [[String: String]] ?? []).compactMap { $0["zoneName"] }
            }
            #expect(seen == ["Notes", "Photos"])

            // The other token was told too (every token is, as APNs tells every device).
            let other = try await client.send("GET", URL(string: second + "?timeout=30")!)
            #expect(other.json["zoneIDs"] as? [[String: String]] == [["zoneName": "Notes"], ["zoneName": "Photos"]])

            // Once told, a poll waits for the next change: none comes, so 204 after the timeout.
            let quiet = try await client.send("GET", URL(string: first + "?timeout=1")!)
            #expect(quiet.status == 204)
            #expect(quiet.body.isEmpty)

            // A user's deletion through the administration endpoint is a change too.
            try await HTTPCloudAdministration(baseURL: server.baseURL).deleteZoneAsUser(ZoneID("Photos"))
            let deleted = try await client.send("GET", URL(string: second + "?timeout=30")!)
            #expect(deleted.json["zoneIDs"] as? [[String: String]] == [["zoneName": "Photos"]])
        }
    }

    @Test func unknownTokensAndBadTimeoutsAreRefused() async throws {
        try await withEmulator { _, client in
            let unknown = try await client.send("GET", path: "/_push/0123?timeout=1")
            #expect(unknown.status == 404)
            #expect(unknown.json["serverErrorCode"] as? String == "NOT_FOUND")
            let courier = try await courierURL(client)
            let bad = try await client.send("GET", URL(string: courier + "?timeout=soon")!)
            #expect(bad.status == 400)
            #expect(try await client.send("POST", URL(string: courier)!, body: Data()).status == 405)
        }
    }

    @Test func stoppingTheServerEndsAPollAtOnce() async throws {
        let server = try CloudKitWebServicesServer()
        do {
            try await pollThenStop(server)
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Answers one poll, starts a minute-long one on the same connection, and stops `server`.
    private func pollThenStop(_ server: CloudKitWebServicesServer) async throws {
        let client = WireClient(baseURL: server.baseURL)
        try await client.createZones(["Notes"])
        let courier = try await courierURL(client)
        try await client.modify("Notes", [operation("create", "a")])
        let path = String(courier.dropFirst(server.baseURL.absoluteString.count))
        let port = server.port
        // A first poll answers at once (a change is waiting), so the connection is being served ...
        let (connection, first) = try await offPool { () -> (RawHTTPConnection, Int?) in
            let connection = try RawHTTPConnection(port: port, timeoutSeconds: 120)
            connection.send("GET \(path)?timeout=0 HTTP/1.1\r\n\r\n")
            return (connection, connection.readResponse()?.status)
        }
        #expect(first == 200)
        // ... and a second one on the same connection would wait a minute.
        let start = ContinuousClock.now
        _ = try await offPool { connection.send("GET \(path)?timeout=60 HTTP/1.1\r\n\r\n") }
        await server.stop()
        let rest = try await offPool { connection.readUntilClosed() }
        #expect(!String(decoding: rest, as: UTF8.self).contains("HTTP/1.1 2"), "cut off, not answered")
        #expect(ContinuousClock.now - start < .seconds(30), "ended by the stop, not by the 60-second timeout")
    }

    private func courierURL(_ client: WireClient) async throws -> String {
        let created = try await client.post("tokens/create", ["apnsEnvironment": "development"])
        return try #require(created.json["webcourierURL"] as? String)
    }
}

import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The push path as CloudKit serves it, on the wire: tokens/create and tokens/register under /device/
// (observed live), the webcourierURL long-polled exactly as given, one APNs-style notification per
// response, an empty 200 as a keepalive, only registered tokens and only subscribed zones notified.

@Suite("CKWS emulator: push")
struct CloudKitEmulatorPushTests {
    /// A short hold, so a poll with nothing to say answers soon.
    static let options = CloudKitWebServicesServer.Options(courierHoldTime: .seconds(1))

    @Test func tokensCreateAnswersWithACourierURLWhoseTokenIsEscaped() async throws {
        try await withEmulator(options: Self.options) { server, client in
            let created = try await client.post(
                "tokens/create", ["apnsEnvironment": "production", "clientId": UUID().uuidString])
            #expect(created.status == 200)
            #expect(created.webAuthToken != nil)
            #expect(Set(created.json.keys) == ["apnsEnvironment", "apnsToken", "webcourierURL"])
            #expect(created.json["apnsEnvironment"] as? String == "production")
            let token = try #require(created.json["apnsToken"] as? String)
            #expect(Data(base64Encoded: token)?.count == 32, "random base64")
            let courier = try #require(created.json["webcourierURL"] as? String)
            let escaped = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            #expect(courier == "\(server.baseURL.absoluteString)/aps?tok=\(escaped)&ttl=43200")
            #expect(courier.contains("%3D") && (courier.contains("%2B") || courier.contains("%2F")))
            #expect(try await client.post("tokens/create", ["apnsEnvironment": "staging"]).status == 400)
            // The live server needs the environment in the body (MistKit #379), not only in the path.
            #expect(try await client.post("tokens/create", ["clientId": "c"]).status == 400)
            #expect(try await server.backing.counters().requests == 0, "push tokens are not database requests")
        }
    }

    @Test func tokensRegisterNeedsTheEnvironmentAndTheToken() async throws {
        try await withEmulator(options: Self.options) { _, client in
            let registered = try await client.post(
                "tokens/register", ["apnsToken": "feedface", "apnsEnvironment": "development", "clientId": "c"])
            #expect(registered.status == 200)
            #expect(registered.json.isEmpty)
            #expect(try await client.post("tokens/register", ["apnsToken": "feedface"]).status == 400)
            #expect(try await client.post("tokens/register", ["apnsEnvironment": "development"]).status == 400)
        }
    }

    @Test func aRegisteredTokenGetsOneNotificationPerPollForASubscribedZone() async throws {
        try await withEmulator(options: Self.options) { server, client in
            try await client.createZones(["Notes", "Photos"])
            try await client.subscribe("Notes")
            let courier = try await client.registeredCourier()
            try await client.modify("Notes", [operation("create", "a")])
            try await client.modify("Photos", [operation("create", "b")])

            let answer = try await client.poll(courier)
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "application/json; charset=utf-8")
            let json = answer.json
            #expect(json.object("aps") as NSDictionary == ["content-available": 1])
            let ck = json.object("ck")
            #expect(Set(ck.keys) == ["ce", "cid", "nid", "ckuserid", "fet"])
            #expect(ck["ce"] as? Int == 2, "development")
            #expect(ck["cid"] as? String == client.container)
            #expect(UUID(uuidString: ck["nid"] as? String ?? "") != nil)
            #expect(ck["ckuserid"] as? String == server.options.userRecordName)
            #expect(
                ck.object("fet") as NSDictionary
                    == [
                        "zid": "Notes", "zoid": server.options.userRecordName, "dbs": 1, "sid": "sub-Notes",
                    ])
            #expect(CloudNotification(userInfo: json).fetch == .zones([ZoneID("Notes")]))

            // Photos has no subscription: nothing more comes, and the held poll answers empty.
            let quiet = try await client.poll(courier)
            #expect(quiet.status == 200)
            #expect(quiet.body.isEmpty, "a keepalive")
        }
    }

    @Test func anUnregisteredTokenGetsNothing() async throws {
        try await withEmulator(options: Self.options) { _, client in
            try await client.createZones(["Notes"])
            try await client.subscribe("Notes")
            let created = try await client.post("tokens/create", ["apnsEnvironment": "development"])
            let courier = try #require(created.json["webcourierURL"] as? String)
            try await client.modify("Notes", [operation("create", "a")])
            let answer = try await client.poll(courier)
            #expect(answer.status == 200 && answer.body.isEmpty, "created but not registered: keepalives only")
        }
    }

    @Test func aChangeWhileAPollIsHeldAnswersIt() async throws {
        try await withEmulator(options: .init(courierHoldTime: .seconds(20))) { _, client in
            try await client.createZones(["Notes"])
            try await client.subscribe("Notes")
            let courier = try await client.registeredCourier()
            async let held = client.poll(courier, timeout: .seconds(30))
            // Whether the change lands before or while the poll waits, the poll reports it.
            try await client.modify("Notes", [operation("create", "a")])
            let answer = try await held
            #expect(answer.json.object("ck").object("fet")["zid"] as? String == "Notes")
        }
    }

    @Test func undeliveredNotificationsCoalescePerSubscriptionAndEveryTokenIsTold() async throws {
        try await withEmulator(options: Self.options) { _, client in
            try await client.createZones(["Notes", "Photos"])
            try await client.subscribe("Notes")
            try await client.subscribe("Photos")
            let first = try await client.registeredCourier()
            let second = try await client.registeredCourier()
            try await client.modify("Notes", [operation("create", "a")])
            try await client.modify("Photos", [operation("create", "b")])
            try await client.modify("Notes", [operation("create", "c")])
            try await client.modify("Notes", [operation("forceDelete", "a")])
            for courier in [first, second] {
                var zones: [String] = []
                while true {
                    let answer = try await client.poll(courier)
                    guard !answer.body.isEmpty else { break }
                    zones.append(answer.json.object("ck").object("fet")["zid"] as? String ?? "?")
                }
                #expect(zones == ["Notes", "Photos"], "Notes once, in its first place in the queue")
            }
        }
    }

    @Test func aDeletedZoneTakesItsSubscriptionWithItSoItsDeletionIsNotPushed() async throws {
        // Assumed (not documented either way): devices learn of the deletion from the whole-database fetch
        // that follows every keepalive.
        try await withEmulator(options: Self.options) { server, client in
            try await client.createZones(["Notes"])
            try await client.subscribe("Notes")
            let courier = try await client.registeredCourier()
            try await HTTPCloudAdministration(baseURL: server.baseURL).deleteZoneAsUser(ZoneID("Notes"))
            #expect(try await server.backing.subscriptions().isEmpty)
            let answer = try await client.poll(courier)
            #expect(answer.status == 200 && answer.body.isEmpty)
        }
    }

    @Test func aCourierURLThatWasDecodedReencodedOrAddedToIsUnknown() async throws {
        try await withEmulator(options: Self.options) { server, client in
            let courier = try await client.registeredCourier()
            let query = String(courier[courier.firstIndex(of: "?")!...].dropFirst())
            let base = server.baseURL.absoluteString + "/aps?"
            let lowercased = query.replacingOccurrences(of: "%2B", with: "%2b")
                .replacingOccurrences(of: "%2F", with: "%2f").replacingOccurrences(of: "%3D", with: "%3d")
            let variants = [
                base + lowercased,  // escapes re-encoded in lower case
                base + query.removingPercentEncoding!,  // decoded: a raw +, / and =
                base + query + "&timeout=25",  // added to
                base + query.replacingOccurrences(of: "%", with: "%25"),  // escaped twice
                base + "tok=nope&ttl=43200",
            ]
            for variant in variants where variant != courier {
                let answer = try await client.send("GET", URL(string: variant)!)
                #expect(answer.status == 404, "\(variant)")
            }
            #expect(try await client.poll(courier).status == 200, "the URL as given still works")
            #expect(try await client.send("POST", URL(string: courier)!, body: Data()).status == 405)
        }
    }

    @Test func stoppingTheServerEndsAHeldPollAtOnce() async throws {
        let server = try CloudKitWebServicesServer(options: .init(courierHoldTime: .seconds(60)))
        do {
            let client = WireClient(baseURL: server.baseURL)
            let courier = try await client.registeredCourier()
            let start = ContinuousClock.now
            let held = Task { try await client.poll(courier, timeout: .seconds(90)) }
            try await client.createZones(["Ready"])  // a request after the poll's, so the poll is likely held
            await server.stop()
            _ = try? await held.value
            #expect(ContinuousClock.now - start < .seconds(30), "ended by the stop, not by the 60-second hold")
        } catch {
            await server.stop()
            throw error
        }
    }
}

extension WireClient {
    /// A push token made and registered, as its courier URL.
    func registeredCourier() async throws -> String {
        let created = try await post("tokens/create", ["apnsEnvironment": "development", "clientId": "test-client"])
        let token = try #require(created.json["apnsToken"] as? String)
        let registered = try await post(
            "tokens/register", ["apnsEnvironment": "development", "apnsToken": token, "clientId": "test-client"])
        #expect(registered.status == 200)
        return try #require(created.json["webcourierURL"] as? String)
    }

    /// One poll of a courier URL, exactly as given.
    func poll(_ courier: String, timeout: Duration = .seconds(20)) async throws -> WireResponse {
        try await send("GET", URL(string: courier)!, timeout: timeout)
    }
}

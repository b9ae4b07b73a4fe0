import FlatSync
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

// Tokens: the API token, web auth tokens rotated on every response (live-observed), strict tokens
// (as documented), the 421 sign-in flow with the emulator's sign-in page, and the paths the emulator
// refuses.

@Suite("CKWS emulator: authentication")
struct CloudKitEmulatorAuthTests {
    @Test func everyResponseCarriesANewTokenHoldingCharactersThatNeedEncoding() async throws {
        try await withEmulator { _, client in
            let success = try await client.get("zones/list")
            let failure = try await client.post("records/modify", ["operations": []])  // no zoneID: 400
            let refusedRoute = try await client.send(
                "GET", path: "/database/1/notacontainer/development/private/zones/list")
            #expect(success.status == 200)
            #expect(failure.status == 400)
            #expect(refusedRoute.status == 404)
            #expect(refusedRoute.json["serverErrorCode"] as? String == "BAD_REQUEST")
            let tokens = [success, failure, refusedRoute].compactMap(\.webAuthToken)
            #expect(tokens.count == 3)
            #expect(Set(tokens).count == 3)
            for token in tokens {
                #expect(token.contains("+") && token.contains("/") && token.contains("="))
            }
        }
    }

    @Test func oldTokensStayValidUnlessTokensAreStrict() async throws {
        try await withEmulator(options: .init(requireWebAuthToken: true)) { server, client in
            let first = try await signIn(server)
            let second = try #require(try await client.get("zones/list", webAuthToken: first).webAuthToken)
            #expect(try await client.get("zones/list", webAuthToken: second).status == 200)
            #expect(try await client.get("zones/list", webAuthToken: first).status == 200, "live-observed: still valid")
        }
        try await withEmulator(options: .init(requireWebAuthToken: true, strictTokens: true)) { server, client in
            let first = try await signIn(server)
            let second = try #require(try await client.get("zones/list", webAuthToken: first).webAuthToken)
            let stale = try await client.get("zones/list", webAuthToken: first)
            #expect(stale.status == 401)
            #expect(stale.json["serverErrorCode"] as? String == "AUTHENTICATION_FAILED")
            #expect(stale.webAuthToken != nil)
            #expect(try await client.get("zones/list", webAuthToken: second).status == 200, "the newest one works")
            #expect(try await server.backing.counters().requests == 2, "the refused request was not served")
        }
    }

    @Test func withoutATokenWhereOneIsRequiredTheAnswerIs421WithTheSignInPage() async throws {
        let callback = URL(string: "http://127.0.0.1:9/done?state=1")!
        try await withEmulator(options: .init(requireWebAuthToken: true, signInCallbackURL: callback)) {
            server, client in
            for response in [
                try await client.get("zones/list"), try await client.get("users/current", database: "public"),
            ] {
                #expect(response.status == 421)
                #expect(response.json["serverErrorCode"] as? String == "AUTHENTICATION_REQUIRED")
                #expect(Set(response.json.keys) == ["uuid", "serverErrorCode", "reason", "redirectURL"])
                let redirect = try #require(response.json["redirectURL"] as? String)
                #expect(redirect.hasPrefix(server.baseURL.absoluteString + "/_auth/signin?callback="))
                let page = try #require(URLComponents(string: redirect))
                #expect(page.queryItems?.first { $0.name == "callback" }?.value == callback.absoluteString)
                #expect(response.webAuthToken != nil)
                // That header's token signs nobody in.
                #expect(try await client.get("zones/list", webAuthToken: response.webAuthToken).status == 421)
            }
            // The sign-in page sends the browser back to the callback with a token.
            let signInPath = "/_auth/signin?callback=" + WireClient.escape(callback.absoluteString)
            let port = server.port
            let answer = try await offPool {
                let connection = try RawHTTPConnection(port: port)
                connection.send("GET \(signInPath) HTTP/1.1\r\n\r\n")
                return connection.readResponse()
            }
            #expect(answer?.status == 302)
            let location = try #require(answer?.header("Location"))
            #expect(location.hasPrefix("http://127.0.0.1:9/done?state=1&ckWebAuthToken="))
            let components = try #require(URLComponents(string: location))
            let token = try #require(components.queryItems?.first { $0.name == "ckWebAuthToken" }?.value)
            let user = try await client.get("users/current", database: "public", webAuthToken: token)
            #expect(user.status == 200)
            #expect(user.json["userRecordName"] as? String == CloudKitWebServicesServer.Options.defaultUserRecordName)
            #expect(try await client.get("zones/list", webAuthToken: token).status == 200)
        }
    }

    @Test func aTokenSentWithoutPercentEncodingIsNotRecognised() async throws {
        try await withEmulator(options: .init(requireWebAuthToken: true)) { server, client in
            let token = try await signIn(server)
            // `+` left as is reads as a space, as in a form: the token does not match.
            let raw = URL(string: client.url("zones/list").absoluteString + "&ckWebAuthToken=" + token)!
            let response = try await client.send("GET", raw)
            #expect(response.status == 421)
            #expect(try await client.get("zones/list", webAuthToken: token).status == 200)
        }
    }

    @Test func withoutRequiredTokensNoTokenIsNeeded() async throws {
        try await withEmulator { _, client in
            let user = try await client.get("users/current", database: "public")
            #expect(user.status == 200)
            #expect(Set(user.json.keys) == ["userRecordName"])
            #expect(try await client.get("zones/list").status == 200)
            // Apple documents users/current under public/ only; a client asking private/ is told so.
            let strayed = try await client.get("users/current", database: "private")
            #expect(strayed.status != 200)
            #expect(strayed.json["serverErrorCode"] as? String == "BAD_REQUEST")
        }
    }

    @Test func theAPITokenIsRequiredAndChecked() async throws {
        try await withEmulator(options: .init(apiToken: "right")) { server, client in
            var wrong = client
            wrong.apiToken = "wrong"
            var missing = client
            missing.apiToken = nil
            var right = client
            right.apiToken = "right"
            for response in [try await wrong.get("zones/list"), try await missing.get("zones/list")] {
                #expect(response.status == 401)
                #expect(response.json["serverErrorCode"] as? String == "AUTHENTICATION_FAILED")
                #expect(response.webAuthToken != nil)
            }
            #expect(try await right.get("zones/list").status == 200)
            #expect(try await server.backing.counters().requests == 1)
        }
    }

    @Test func pathsTheEmulatorDoesNotServe() async throws {
        try await withEmulator { _, client in
            var production = client
            production.environment = "production"
            #expect(try await production.get("zones/list").status == 200)
            var staging = client
            staging.environment = "staging"
            #expect(try await staging.get("zones/list").status == 404)
            #expect(try await client.get("records/modify").status == 405)
            #expect(try await client.post("zones/list", [String: Any]()).status == 200, "zones/list takes POST too")
            #expect(
                try await client.post("records/query", [String: Any]()).json["serverErrorCode"] as? String
                    == "BAD_REQUEST")
            #expect(try await client.get("zones/list", database: "public").status == 400)
            let tokensUnderDatabase = try await client.send(
                "POST", path: "/database/1/\(client.container)/development/private/tokens/create?ckAPIToken=x",
                body: Data("{}".utf8))
            #expect(tokensUnderDatabase.status == 405, "as observed live: tokens live under /device/")
            #expect(try await client.send("GET", path: "/nothing/here").status == 404)
        }
    }

    @Test func theRequestLogHasOneLinePerRequestAndNoTokens() async throws {
        let lines = Mutex<[String]>([])
        let options = CloudKitWebServicesServer.Options(
            requestLog: { line in lines.withLock { $0.append(line) } }, courierHoldTime: .seconds(1))
        try await withEmulator(options: options) { server, client in
            let token = try #require(try await client.get("zones/list").webAuthToken)
            _ = try await client.get("zones/list", webAuthToken: token)
            _ = try await client.post("records/modify", Data("nope".utf8), webAuthToken: token)
            let push = try await client.post("tokens/create", ["apnsEnvironment": "development"])
            let courier = try #require(push.json["webcourierURL"] as? String)
            try await server.backing.setFaultPlan(.failNext(1, .listZones, with: .networkFailure))
            await #expect(throws: (any Error).self) { _ = try await client.get("zones/list") }
            _ = try await client.poll(courier)
            let logged = lines.withLock { $0 }
            #expect(logged.count == 6)
            let path = "/database/1/\(client.container)/development/private/zones/list"
            #expect(logged[0].hasPrefix("GET \(path) 200 ") && logged[0].hasSuffix("ms"))
            #expect(logged[2].hasPrefix("POST /database/1/\(client.container)/development/private/records/modify 400 "))
            #expect(logged[4].hasPrefix("GET \(path) dropped "))
            #expect(logged[5].hasPrefix("GET /aps 200 "), "the courier's push token, in its query, is not logged")
            let pushToken = try #require(push.json["apnsToken"] as? String)
            for line in logged {
                #expect(!line.contains(token) && !line.contains("ckAPIToken") && !line.contains("?"))
                #expect(!line.contains(pushToken) && !line.contains("tok="))
            }
        }
    }

    /// Signs in through the emulator's sign-in page (no callback: the page shows the token).
    private func signIn(_ server: CloudKitWebServicesServer) async throws -> String {
        let response = try await WireClient(baseURL: server.baseURL).send("GET", path: "/_auth/signin")
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "text/plain; charset=utf-8")
        return String(decoding: response.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// The engine through CloudKit Web Services when the server misbehaves, when it speaks only the codes
/// CloudKit documents, and across restarts of the device.
@Suite struct SyncOverHTTPTests {
    /// What a misbehaving server (or a proxy in front of it) does to one request.
    enum Misbehaviour: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// A proxy's HTML error page.
        case htmlPage
        /// A 200 whose JSON stops halfway.
        case truncatedJSON
        /// A 500 with no body at all.
        case emptyServerError
        /// The server applies the request, then the connection drops in the middle of the response.
        case droppedMidResponse
        /// The server never answers; the client's three-second timeout ends the wait.
        case hangs

        var testDescription: String { rawValue }
    }

    /// Devices reach the emulator through this proxy, which misbehaves for the next request of a chosen
    /// operation and forwards everything else.
    final class SabotagingProxy: Sendable {
        let server: LoopbackHTTPServer
        let target: URL
        private let plan = Mutex<(operation: String, misbehaviour: Misbehaviour)?>(nil)

        init(inFrontOf target: URL) throws {
            self.target = target
            server = try LoopbackHTTPServer()
            server.start { [self] request in await self.handle(request) }
        }

        var baseURL: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

        /// The next request whose path ends in `operation` gets `misbehaviour`.
        func sabotageNext(_ operation: String, with misbehaviour: Misbehaviour) {
            plan.withLock { $0 = (operation, misbehaviour) }
        }

        func stop() async {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    self.server.stop()
                    continuation.resume()
                }
            }
        }

        private func handle(_ request: HTTPServerRequest) async -> HTTPServerReply {
            let sabotage = plan.withLock { plan -> Misbehaviour? in
                guard let current = plan, request.path.hasSuffix(current.operation) else { return nil }
                plan = nil
                return current.misbehaviour
            }
            switch sabotage {
            case .htmlPage:
                return .response(
                    HTTPServerResponse(
                        status: 502, headers: [("Content-Type", "text/html")],
                        body: Data("<html><body><h1>502 Bad Gateway</h1></body></html>".utf8)))
            case .truncatedJSON:
                return .response(HTTPServerResponse(status: 200, body: Data(#"{"records":[{"recordName":"rl-"#.utf8)))
            case .emptyServerError:
                return .response(HTTPServerResponse(status: 500))
            case .hangs:
                try? await Task.sleep(for: .seconds(30))
                return .response(HTTPServerResponse(status: 503))
            case .droppedMidResponse:
                _ = await forward(request)
                return .dropConnection(
                    partialBytes: Data("HTTP/1.1 200 OK\r\nContent-Length: 900\r\n\r\n{\"records\":[".utf8))
            case nil:
                return await forward(request)
            }
        }

        private func forward(_ request: HTTPServerRequest) async -> HTTPServerReply {
            let url = URL(string: target.absoluteString + request.path + (request.rawQuery.map { "?" + $0 } ?? ""))!
            do {
                let response = try await URLSessionExchange.shared.send(
                    HTTPExchangeRequest(
                        method: request.method, url: url, headers: ["Content-Type": "application/json"],
                        body: request.body.isEmpty ? nil : request.body, timeout: .seconds(20)))
                return .response(
                    HTTPServerResponse(
                        status: response.status, headers: response.headers.map { ($0.key, $0.value) },
                        body: response.body))
            } catch {
                return .response(HTTPServerResponse(status: 504))
            }
        }
    }

    @Test(arguments: Misbehaviour.allCases)
    func aMisbehavingServerLosesNothingAndTheNextSyncRecovers(_ misbehaviour: Misbehaviour) async throws {
        try await SyncHarness.run(via: .http) { harness in
            // The harness's own transport for B goes straight to the emulator; A's goes through the proxy.
            let emulator = try #require(
                (harness.transport("B") as? CloudKitWebServicesTransport)?.configuration.baseURL)
            let proxy = try SabotagingProxy(inFrontOf: emulator)
            do {
                let viaProxy = CloudKitWebServicesTransport(
                    configuration: .init(
                        containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "t",
                        tokenStore: InMemoryWebAuthTokenStore(token: harness.signInToken()),
                        baseURL: proxy.baseURL, requestTimeout: .seconds(3)))
                let a = try await harness.device("A", transport: viaProxy)
                let b = try await harness.device("B")
                proxy.sabotageNext("records/modify", with: misbehaviour)
                try await a.readingList.add("x")
                await a.waitUntilIdle()
                #expect(await a.localStore.pendingRecordCount() == 1, "kept: A cannot know what the server did")
                #expect(await a.readingList.contains("x"))
                let status = await a.status()
                #expect(status.retrying == [.readingList], "a typed, transient failure: retried, not dropped")

                let summary = try await a.syncNow()
                #expect(summary.isComplete, "\(summary.problems)")
                #expect(await a.localStore.pendingRecordCount() == 0)
                #expect(await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-x"])
                let saves = await harness.cloud.counters().recordsSaved
                #expect(saves == 1, "a change the server applied before the connection dropped is not written twice")
                _ = try await b.syncNow()
                #expect(await b.readingList.contains("x"))
                try await a.close()
                try await b.close()
            } catch {
                await proxy.stop()
                throw error
            }
            await proxy.stop()
        }
    }

    @Test(arguments: [SyncHarness.Route.http, .httpGuessedCodes])
    func anExpiredTokenResetsOnceWithOrWithoutTheGuessedCode(route: SyncHarness.Route) async throws {
        // Documented codes only: BAD_REQUEST on a fetch with a token; guessed codes: CHANGE_TOKEN_EXPIRED.
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            _ = try await b.syncNow()
            await harness.cloud.expireAllChangeTokens()
            try await a.readingList.add("y")
            await a.waitUntilIdle()
            let events = b.events()
            let summary = try await b.syncNow()
            #expect(summary.isComplete, "\(summary.problems)")
            #expect(Set(await b.readingList.entries().map(\.articleID)) == ["x", "y"])
            try await b.close()
            let resets = await collect(events).filter {
                if case .zoneReset(_, .tokenExpired) = $0 { return true }
                return false
            }
            #expect(!resets.isEmpty, "the BAD_REQUEST on a fetch with a token was taken as an expired token")
            try await a.close()
        }
    }

    /// The database's changes one zone a page: every changed zone is fetched, and a zone the user deleted,
    /// listed on the last page, is wiped (the emulator pages as CloudKit documents the loop: ckws.md).
    @Test func databaseChangesOverSeveralPagesReachEveryZone() async throws {
        try await SyncHarness.run(via: .http) { harness in
            await harness.cloud.setDatabaseChangesLimit(1)
            let a = try await harness.device("A") { $0.recordTypes = testRecordTypes }
            let b = try await harness.device("B") { $0.recordTypes = testRecordTypes }
            try await a.readingList.add("x")
            try await a.history.visit("x")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Soup"))
            #expect(try await a.syncNow().isComplete)
            let before = await harness.cloud.counters().requests(.fetchDatabaseChanges)
            #expect(try await b.syncNow().isComplete)
            #expect(await harness.cloud.counters().requests(.fetchDatabaseChanges) - before == 3, "a page a zone")
            #expect(await DeviceView(a) == DeviceView(b))
            #expect(await b.records(TestRecipe.self).value("r1")?.title == "Soup")

            // Recipes sorts after ReadingHistory and ReadingList, which change too: its deletion is on page 3.
            try await a.readingList.add("y")
            try await a.history.visit("y")
            #expect(try await a.syncNow().isComplete)
            try await harness.cloud.deleteZoneAsUser(TestRecipe.zone)
            let summary = try await b.syncNow()
            #expect(summary.resets.contains(SyncSummary.ZoneReset(zone: TestRecipe.zone, reason: .deletedByUser)))
            #expect(await b.records(TestRecipe.self).count() == 0)
            #expect(await b.readingList.contains("y"))
            try await a.close()
            try await b.close()
        }
    }

    /// The transport writes within its schema, `CloudSchema.flatSync` by default, and a context given it adds
    /// its stores' host types, so that the host need not declare them twice; a field the two declare as
    /// different types turns the context down, since records of one of them would be refused.
    @Test func aContextAddsItsTypesToTheTransportsSchemaUnlessTheyDisagree() async throws {
        try await withTemporaryDirectory { directory in
            // Never contacted: the check comes before any request.
            func transport(_ schema: CloudSchema?) -> CloudKitWebServicesTransport {
                CloudKitWebServicesTransport(
                    configuration: .init(
                        containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "t",
                        tokenStore: InMemoryWebAuthTokenStore(), baseURL: URL(string: "http://127.0.0.1:9")!,
                        schema: schema))
            }
            var configuration = SyncContext.Configuration(clock: TestClock())
            configuration.recordTypes = [TestNote.self]
            let device = directory.appendingPathComponent("A")
            var wrongType = CloudSchema.flatSync(adding: [TestNote.self])
            wrongType.recordTypes[TestNote.recordType]!["text"] = .int64
            let error = await #expect(throws: FlatSyncError.self) {
                _ = try await SyncContext.open(
                    directory: device, account: CloudAccount(id: "user", transport: transport(wrongType)),
                    configuration: configuration)
            }
            #expect(error?.code == .invalidArgument)
            #expect(error?.message.contains("the field text of TestNote as STRING") == true, "\(error?.message ?? "")")
            #expect(!FileManager.default.fileExists(atPath: device.path), "nothing was written")

            let plain = transport(.flatSync)
            #expect(plain.schema?.recordTypes[TestNote.recordType] == nil)
            let context = try await SyncContext.open(
                directory: device, account: CloudAccount(id: "user", transport: plain), configuration: configuration)
            #expect(plain.schema == .flatSync(adding: [TestNote.self]), "the context's types, added")
            let changing = await #expect(throws: FlatSyncError.self) {
                try await context.accountDidChange(to: CloudAccount(id: "other", transport: transport(wrongType)))
            }
            #expect(changing?.code == .invalidArgument)
            #expect(await context.status().account == "user", "the account did not change")
            let anything = transport(nil)
            try await context.accountDidChange(to: CloudAccount(id: "user", transport: anything))
            #expect(anything.schema == nil, "a transport that writes any record still does")
            try await context.close()
        }
    }

    /// A web auth token from the emulator's sign-in page, which hands it back as text.
    static func signInToken(on server: CloudKitWebServicesServer) async throws -> String {
        let page = try await URLSessionExchange.shared.send(
            HTTPExchangeRequest(
                method: "GET", url: server.baseURL.appendingPathComponent("_auth/signin"), timeout: .seconds(30)))
        return String(decoding: page.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs `body` with an emulator that takes only the newest web auth token of a session and none missing
    /// (the documented rule), the cloud behind it, and a device directory whose token store holds a token
    /// from the sign-in page; the server stops afterwards.
    static func withStrictServer(
        _ body: (CloudKitWebServicesServer, InMemoryCloud, URL) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let server = try CloudKitWebServicesServer(
                backing: cloud, options: .init(requireWebAuthToken: true, strictTokens: true))
            do {
                let device = directory.appendingPathComponent("A")
                try DirectoryWebAuthTokenStore(directory: device).saveToken(try await signInToken(on: server))
                try await body(server, cloud, device)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    /// A CloudKit Web Services transport to `server` that keeps its web auth token in `device`, and a
    /// context for it (buffered, on a test clock).
    static func openStrictDevice(
        _ device: URL, on server: CloudKitWebServicesServer
    ) async throws -> (CloudKitWebServicesTransport, SyncContext) {
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "t",
                tokenStore: DirectoryWebAuthTokenStore(directory: device), baseURL: server.baseURL))
        var configuration = SyncContext.Configuration(clock: TestClock())
        configuration.durability = .buffered
        let context = try await SyncContext.open(
            directory: device, account: CloudAccount(id: "user", transport: transport), configuration: configuration)
        return (transport, context)
    }

    /// Under the documented rule (each web auth token is good for one round trip: the emulator's strict
    /// tokens), a response lost in transit leaves the device holding a spent token. It pauses as not
    /// authenticated, keeps its change, and sends it once the user signs in again; the server, which had
    /// committed the change, holds it once.
    @Test func aSpentWebAuthTokenPausesSendingUntilTheUserSignsInAgain() async throws {
        try await Self.withStrictServer { server, cloud, device in
            let (transport, context) = try await Self.openStrictDevice(device, on: server)
            try await context.readingList.add("first")
            #expect(try await context.syncNow().isComplete)

            await cloud.setFaultPlan(.loseResponses(1))
            try await context.readingList.add("second")
            #expect(try await !context.syncNow().isComplete, "the response was lost")
            #expect(try await !context.syncNow().isComplete, "the token it holds is spent")
            #expect(await context.status().paused == .notAuthenticated)
            #expect(await context.status().pendingRecords == 1, "the change is kept")
            // The refusal (401) names no sign-in page; asking for the user finds it, as a host would.
            let refusal = await #expect(throws: CloudError.self) { _ = try await transport.currentUser() }
            #expect(refusal?.code == .notAuthenticated)
            #expect(refusal?.redirectURL?.path == "/_auth/signin", "\(String(describing: refusal))")

            try await transport.signIn(withWebAuthToken: try await Self.signInToken(on: server))
            try await context.accountDidChange(to: CloudAccount(id: "user", transport: transport))
            let summary = try await context.syncNow()
            #expect(summary.isComplete, "\(summary.problems)")
            #expect(await context.status().paused == nil)
            #expect(await cloud.records(in: .readingList).map(\.id.name) == ["rl-first", "rl-second"])
            try await context.close()
        }
    }

    @Test func theNewestWebAuthTokenSurvivesARestartOfTheDevice() async throws {
        // Only the newest token of a session is accepted, and a request without one is refused.
        try await Self.withStrictServer { server, cloud, device in
            let first = try await Self.openStrictDevice(device, on: server).1
            try await first.readingList.add("before")
            #expect(try await first.syncNow().isComplete)
            let saved = try #require(try DirectoryWebAuthTokenStore(directory: device).loadToken())
            try await first.close()

            // A new process: a new transport reads the token file. This sync works only if the last
            // rotation was saved: an older token, or none, is refused.
            let second = try await Self.openStrictDevice(device, on: server).1
            try await second.readingList.add("after")
            let summary = try await second.syncNow()
            #expect(summary.isComplete, "\(summary.problems)")
            #expect(try DirectoryWebAuthTokenStore(directory: device).loadToken() != saved, "rotated again")
            #expect(await cloud.records(in: .readingList).map(\.id.name) == ["rl-after", "rl-before"])
            try await second.close()
        }
    }
}

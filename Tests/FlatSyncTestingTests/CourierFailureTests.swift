import FlatSync
import FlatSyncCloudKit
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

// The long-poll source over real HTTP against a courier that misbehaves on cue: what a live courier might
// do that the emulator does not (answer garbage, forget a token, drop the connection). The source must
// fetch rather than loop, back off on its clock, and start over with a new token.

/// A stand-in for CloudKit's device endpoints and web courier on 127.0.0.1: `tokens/create` hands out
/// tokens `t1+/=`, `t2+/=`… with courier URLs `/aps?tok=t1%2B%2F%3D&ttl=43200` on this server,
/// `tokens/register` answers an empty 200, and polls are answered from a script, then held until the
/// server stops. Every request target is kept exactly as it arrived.
final class ScriptedCourier: Sendable {
    private let server: LoopbackHTTPServer
    private let script: Mutex<[HTTPServerReply]>
    private let targets = Mutex<[String]>([])
    private let tokens = Mutex(0)

    init(polls: [HTTPServerReply]) throws {
        server = try LoopbackHTTPServer()
        script = Mutex(polls)
        server.start { [self] request in await self.handle(request) }
    }

    var baseURL: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

    /// Every request as `METHOD path?query`, the query still escaped.
    var requests: [String] { targets.withLock { $0 } }

    /// The polls' targets.
    var polls: [String] { requests.filter { $0.hasPrefix("GET /aps") }.map { String($0.dropFirst(4)) } }

    var tokensCreated: Int { requests.filter { $0.contains("/tokens/create") }.count }

    func stop() async {
        let server = self.server
        _ = try? await offPool { server.stop() }
    }

    private func handle(_ request: HTTPServerRequest) async -> HTTPServerReply {
        targets.withLock { $0.append("\(request.method) \(request.path)" + (request.rawQuery.map { "?\($0)" } ?? "")) }
        if request.path.hasSuffix("/tokens/create") {
            let n = tokens.withLock {
                $0 += 1
                return $0
            }
            let body = #"{"apnsEnvironment":"development","apnsToken":"t\#(n)+/=","webcourierURL":"\#(baseURL.absoluteString)/aps?tok=t\#(n)%2B%2F%3D&ttl=43200"}"#
            return .response(HTTPServerResponse(status: 200, body: Data(body.utf8)))
        }
        if request.path.hasSuffix("/tokens/register") { return .response(HTTPServerResponse(status: 200)) }
        if let next = script.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { return next }
        try? await Task.sleep(for: .seconds(120))
        return .response(HTTPServerResponse(status: 200))
    }
}

@Suite("CKWS transport: a misbehaving courier")
struct CourierFailureTests {
    static func json(_ text: String) -> HTTPServerReply {
        .response(
            HTTPServerResponse(
                status: 200, headers: [("Content-Type", "application/json")], body: Data(text.utf8)))
    }

    static let notification = json(
        #"{"aps":{"content-available":1},"ck":{"ce":2,"cid":"iCloud.dev.flatsync.tests","nid":"n","ckuserid":"_u","fet":{"zid":"Notes","zoid":"_u","dbs":2,"sid":"s"}}}"#
    )

    /// A courier answering `polls`, and a source on `clock` reaching it; the caller stops the courier.
    func start(polls: [HTTPServerReply], clock: TestClock) throws -> (ScriptedCourier, LongPollNotificationSource) {
        let courier = try ScriptedCourier(polls: polls)
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "any",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: courier.baseURL))
        let source = LongPollNotificationSource(
            transport: transport, pollTimeout: .seconds(60),
            retryPolicy: RetryPolicy(initialDelay: .seconds(2), jitter: 0), clock: clock)
        return (courier, source)
    }

    @Test(.timeLimit(.minutes(1)))
    func garbageFromTheCourierIsAWholeFetchNotAnErrorLoop() async throws {
        let clock = TestClock()
        let (courier, source) = try start(
            polls: [Self.json("not json {"), Self.json(#"{"ck":5}"#), Self.json("[]"), Self.notification], clock: clock)
        do {
            var iterator = source.notifications().makeAsyncIterator()
            #expect(try await iterator.next() == .wholeDatabase(.gap))
            for _ in 0..<3 {
                let next = try await iterator.next()
                #expect(next == .wholeDatabase(.unrecognized))
            }
            #expect(try await iterator.next()?.fetch == .zones([ZoneID("Notes")]))
            #expect(courier.tokensCreated == 1, "the token is good: no new one")
            #expect(clock.now.offset == .zero, "no backoff")
            #expect(Array(courier.polls.prefix(4)) == Array(repeating: "/aps?tok=t1%2B%2F%3D&ttl=43200", count: 4))
        } catch {
            await courier.stop()
            throw error
        }
        await courier.stop()
    }

    @Test(.timeLimit(.minutes(1)), arguments: ["unknown token", "dropped connection", "server error"])
    func aFailedPollBacksOffThenPollsANewToken(failure: String) async throws {
        let reply: HTTPServerReply
        switch failure {
        case "unknown token": reply = .response(HTTPServerResponse(status: 404))
        case "server error": reply = .response(HTTPServerResponse(status: 502, body: Data("<html>".utf8)))
        default: reply = .dropConnection(partialBytes: Data("HTTP/1.1 200 OK\r\nContent-Length: 80\r\n\r\n{\"ck\"".utf8))
        }
        let clock = TestClock()
        let (courier, source) = try start(polls: [reply, Self.notification], clock: clock)
        do {
            var iterator = source.notifications().makeAsyncIterator()
            #expect(try await iterator.next() == .wholeDatabase(.gap))
            try await yieldUntil { clock.sleeperCount == 1 }
            #expect(courier.tokensCreated == 1, "nothing more until the backoff ends")
            clock.advance(by: .seconds(2))
            #expect(try await iterator.next() == .wholeDatabase(.gap), "the new token catches up first")
            #expect(try await iterator.next()?.fetch == .zones([ZoneID("Notes")]))
            #expect(courier.tokensCreated == 2)
            let polls = ["/aps?tok=t1%2B%2F%3D&ttl=43200", "/aps?tok=t2%2B%2F%3D&ttl=43200"]
            #expect(Array(courier.polls.prefix(2)) == polls, "(a third may be under way)")
        } catch {
            await courier.stop()
            throw error
        }
        await courier.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func theTokenRequestsGoUnderDevice() async throws {
        let (courier, source) = try start(polls: [], clock: TestClock())
        do {
            var iterator = source.notifications().makeAsyncIterator()
            _ = try await iterator.next()
            let paths = courier.requests.prefix(2).map { $0.split(separator: "?").first.map(String.init) ?? "" }
            #expect(
                paths == [
                    "POST /device/1/iCloud.dev.flatsync.tests/development/tokens/create",
                    "POST /device/1/iCloud.dev.flatsync.tests/development/tokens/register",
                ])
        } catch {
            await courier.stop()
            throw error
        }
        await courier.stop()
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// The long-poll source against a scripted server: what it sends (tokens under `/device/`, the courier URL
/// exactly as given) and what it does with every kind of answer. The same paths through real HTTP are in
/// `CloudKitEmulatorTransportTests` and `CourierFailureTests`.
@Suite("CKWS transport: long-poll notifications")
struct LongPollNotificationSourceTests {
    /// How the scripted courier answers one poll.
    enum Poll: Sendable {
        case respond(HTTPExchangeResponse)
        case fail(URLError.Code)
        /// Waits for `gate`, then answers.
        case after(Gate, HTTPExchangeResponse)
    }

    /// The courier URL of token `n`: the live form, with escapes in the token.
    static func courier(_ n: Int, ttl: Int = 43_200) -> String {
        "https://webcourier.sandbox.push.apple.com:443/aps?tok=T\(n)%2Bk%2F%3D&ttl=\(ttl)"
    }

    /// A scripted server: `tokens/create` hands out tokens `T1+k/=`, `T2+k/=`… with ``courier(_:ttl:)``;
    /// `tokens/register` answers `register`; polls are answered from `polls` in order, then hang until
    /// cancelled.
    static func server(
        polls: [Poll], register: HTTPExchangeResponse = HTTPExchangeResponse(status: 200), ttl: Int = 43_200,
        create: HTTPExchangeResponse? = nil
    ) -> ScriptedExchange {
        let remaining = Mutex(polls[...])
        let tokens = Mutex(0)
        return ScriptedExchange { request in
            switch request.operation {
            case "tokens/create":
                if let create { return create }
                let n = tokens.withLock {
                    $0 += 1
                    return $0
                }
                return .json(
                    #"{"apnsEnvironment":"development","apnsToken":"T\#(n)+k/=","webcourierURL":"\#(courier(n, ttl: ttl))"}"#
                )
            case "tokens/register":
                return register
            default:
                switch remaining.withLock({ $0.popFirst() }) {
                case .respond(let response)?: return response
                case .fail(let code)?: throw URLError(code)
                case .after(let gate, let response)?:
                    await gate.wait()
                    return response
                case nil:
                    try await Task.sleep(for: .seconds(3_600))
                    throw CancellationError()
                }
            }
        }
    }

    /// A record zone notification for `zone`, as the emulator (and, by Apple's parser, CloudKit) sends one.
    static func zoneNotification(_ zone: String) -> HTTPExchangeResponse {
        .json(
            #"{"aps":{"content-available":1},"ck":{"ce":2,"cid":"iCloud.com.example.news","nid":"n-1","ckuserid":"_u","fet":{"zid":"\#(zone)","zoid":"_u","dbs":2,"sid":"flatsync-\#(zone)"}}}"#
        )
    }

    static let keepalive = HTTPExchangeResponse(status: 200)

    /// The first `count` notifications of `source`.
    static func first(_ count: Int, of source: LongPollNotificationSource) async throws -> [CloudNotification] {
        var received: [CloudNotification] = []
        for try await notification in source.notifications() {
            received.append(notification)
            if received.count == count { break }
        }
        return received
    }

    static func source(_ exchange: ScriptedExchange, clock: TestClock = TestClock(), retry: RetryPolicy = .default)
        -> LongPollNotificationSource
    {
        LongPollNotificationSource(
            transport: makeTransport(exchange), pollTimeout: .seconds(40), retryPolicy: retry, clock: clock)
    }

    static let gap = CloudNotification.wholeDatabase(.gap)

    // MARK: - The path

    @Test func registersATokenUnderDeviceThenPollsItsCourierURLExactlyAsGiven() async throws {
        let exchange = Self.server(polls: [.respond(Self.zoneNotification("ReadingList"))])
        let source = Self.source(exchange)
        let received = try await Self.first(2, of: source)
        #expect(received.first == Self.gap, "a new token first catches up on what it was not told")
        #expect(received.last?.fetch == .zones([.readingList]))
        #expect(received.last?.reason == .recordZone)
        #expect(received.last?.subscriptionID == "flatsync-ReadingList")

        let requests = exchange.requests
        #expect(
            requests.prefix(2).map(\.url.path) == [
                "/device/1/iCloud.com.example.news/development/tokens/create",
                "/device/1/iCloud.com.example.news/development/tokens/register",
            ])
        #expect(requests[0].jsonBody == json(#"{"apnsEnvironment":"development","clientId":"\#(source.clientID)"}"#))
        #expect(
            requests[1].jsonBody
                == json(
                    #"{"apnsEnvironment":"development","apnsToken":"T1+k/=","clientId":"\#(source.clientID)"}"#))
        #expect(UUID(uuidString: source.clientID) != nil)
        let poll = try #require(requests.dropFirst(2).first)
        #expect(poll.method == "GET")
        #expect(poll.url.absoluteString == Self.courier(1), "not decoded, re-encoded, or added to")
        #expect(poll.headers.isEmpty && poll.body == nil)
        #expect(poll.timeout == .seconds(40))
    }

    @Test(arguments: ["", "{}", " \n"])
    func registerMayAnswerWithAnEmptyBodyOrAnEmptyObject(body: String) async throws {
        let exchange = Self.server(
            polls: [.respond(Self.zoneNotification("ReadingList"))],
            register: HTTPExchangeResponse(status: 200, body: Data(body.utf8)))
        let received = try await Self.first(2, of: Self.source(exchange))
        #expect(received == [Self.gap, CloudNotification(userInfo: Self.zoneNotificationObject())])
    }

    @Test func theClientIDStaysTheSameForEveryTokenOfASource() async throws {
        let exchange = Self.server(polls: [.respond(HTTPExchangeResponse(status: 404))])
        let clock = TestClock()
        let source = Self.source(exchange, clock: clock)
        let stream = source.notifications()
        var iterator = stream.makeAsyncIterator()
        _ = try await iterator.next()  // the first token
        try await yieldUntil { clock.sleeperCount == 1 }  // the 404's backoff
        clock.advanceToNextDeadline()
        _ = try await iterator.next()  // the second token
        let creates = exchange.requests.filter { $0.operation == "tokens/create" }
        #expect(creates.count == 2)
        let ids = creates.compactMap { ($0.jsonBody as? [String: Any])?["clientId"] as? String }
        #expect(ids == [source.clientID, source.clientID])
    }

    // MARK: - Answers

    @Test func aKeepaliveAsksForAWholeFetchAndPollsTheSameTokenAgainAtOnce() async throws {
        let exchange = Self.server(polls: [
            .respond(Self.keepalive), .respond(HTTPExchangeResponse(status: 204)),
            .respond(Self.zoneNotification("ReadingHistory")),
        ])
        let clock = TestClock()
        let received = try await Self.first(4, of: Self.source(exchange, clock: clock))
        #expect(received.map(\.fetch) == [.database, .database, .database, .zones([.readingHistory])])
        #expect(received.prefix(3).allSatisfy { $0.reason == .gap })
        #expect(exchange.requests.filter { $0.operation == "tokens/create" }.count == 1, "no new token")
        #expect(clock.now.offset == .zero, "nothing waited")
    }

    /// A courier holds a poll while nothing comes: empty answers that come back at once, again and again,
    /// are something else answering for it, and are waited out rather than polled (and fetched after) in a
    /// busy loop. A few in a row are polled again at once.
    @Test func emptyAnswersThatComeAtOnceAreWaitedOutAfterAFew() async throws {
        let exchange = Self.server(polls: Array(repeating: .respond(Self.keepalive), count: 6))
        let clock = TestClock()
        let source = Self.source(exchange, clock: clock, retry: RetryPolicy(initialDelay: .seconds(2), jitter: 0))
        var iterator = source.notifications().makeAsyncIterator()
        for _ in 0..<(1 + LongPollNotificationSource.quickKeepalivesAllowed + 1) {
            #expect(try await iterator.next() == Self.gap)  // the token's, then one per empty answer
        }
        try await yieldUntil { clock.sleeperCount == 1 }
        #expect(clock.nextDeadline?.offset == .seconds(2), "waited out after the allowed few")
        let polls = exchange.requests.filter { $0.url.path == "/aps" }.count
        #expect(polls == LongPollNotificationSource.quickKeepalivesAllowed + 1, "no poll while waiting")
        clock.advanceToNextDeadline()
        #expect(try await iterator.next() == Self.gap)
        try await yieldUntil { clock.sleeperCount == 1 }
        #expect(clock.nextDeadline.map { $0.offset - clock.now.offset } == .seconds(4), "and longer each time")
    }

    @Test func aPayloadThatIsNotANotificationAsksForAWholeFetchNotARetry() async throws {
        let garbage = ["not json", "[1,2]", #"{"aps":{}}"#, #"{"ck":{"fet":{"dbs":2}}}"#, #"{"ck":"x"}"#]
        let exchange = Self.server(
            polls: garbage.map { .respond(HTTPExchangeResponse(status: 200, body: Data($0.utf8))) }
                + [.respond(Self.zoneNotification("ReadingList"))])
        let clock = TestClock()
        let received = try await Self.first(garbage.count + 2, of: Self.source(exchange, clock: clock))
        #expect(received.dropFirst().prefix(garbage.count).allSatisfy { $0.fetch == .database })
        #expect(received.last?.fetch == .zones([.readingList]))
        #expect(exchange.requests.filter { $0.operation == "tokens/create" }.count == 1, "the token is kept")
        #expect(clock.now.offset == .zero, "no backoff: a notification was delivered, only not readable")
    }

    @Test(arguments: [404, 410, 500, 503])
    func aRefusedPollBacksOffOnTheClockThenMakesANewToken(status: Int) async throws {
        let exchange = Self.server(polls: [
            .respond(HTTPExchangeResponse(status: status)), .respond(Self.zoneNotification("ReadingList")),
        ])
        let clock = TestClock()
        let source = Self.source(exchange, clock: clock, retry: RetryPolicy(initialDelay: .seconds(5), jitter: 0))
        let stream = source.notifications()
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() == Self.gap)
        try await yieldUntil { clock.sleeperCount == 1 }
        #expect(clock.nextDeadline?.offset == .seconds(5))
        #expect(exchange.requests.filter { $0.operation == "tokens/create" }.count == 1, "nothing before the wait")
        clock.advanceToNextDeadline()
        #expect(try await iterator.next() == Self.gap, "the new token catches up")
        #expect(try await iterator.next()?.fetch == .zones([.readingList]))
        let polls = exchange.requests.filter { $0.url.path == "/aps" }.map(\.url.absoluteString)
        #expect(polls.prefix(2) == [Self.courier(1), Self.courier(2)], "(a third may be under way)")
    }

    @Test func failuresInARowWaitLongerEachTime() async throws {
        let exchange = Self.server(polls: [
            .fail(.networkConnectionLost), .respond(HTTPExchangeResponse(status: 503)), .fail(.cannotConnectToHost),
            .respond(Self.zoneNotification("ReadingList")),
        ])
        let clock = TestClock()
        let source = Self.source(exchange, clock: clock, retry: RetryPolicy(initialDelay: .seconds(1), jitter: 0))
        let stream = source.notifications()
        var iterator = stream.makeAsyncIterator()
        var waits: [Duration] = []
        _ = try await iterator.next()
        for _ in 0..<3 {
            try await yieldUntil { clock.sleeperCount == 1 }
            let start = clock.now
            clock.advanceToNextDeadline()
            waits.append(start.duration(to: clock.now))
            #expect(try await iterator.next() == Self.gap)
        }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(4)])
        #expect(try await iterator.next()?.fetch == .zones([.readingList]))
    }

    @Test func aPollThatReachesItsOwnTimeoutIsAKeepalive() async throws {
        // The courier's hold time is not known: if it holds longer than the client waits, the client's
        // timeout ends each poll, and the same token is polled again without a backoff.
        let exchange = Self.server(polls: [.fail(.timedOut), .respond(Self.zoneNotification("ReadingList"))])
        let clock = TestClock()
        let received = try await Self.first(3, of: Self.source(exchange, clock: clock))
        #expect(received.map(\.fetch) == [.database, .database, .zones([.readingList])])
        #expect(exchange.requests.filter { $0.operation == "tokens/create" }.count == 1)
        #expect(clock.now.offset == .zero)
    }

    @Test func aTokenIsMadeAgainBeforeItsTTLRunsOut() async throws {
        // `ttl` is read as the token's lifetime in seconds (uncertain: MistKit's reading of the live URL);
        // the token is replaced, between polls, once nine tenths of it have passed.
        let first = Gate()
        let second = Gate()
        let exchange = Self.server(polls: [.after(first, Self.keepalive), .after(second, Self.keepalive)], ttl: 100)
        let clock = TestClock()
        let stream = Self.source(exchange, clock: clock).notifications()
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() == Self.gap)
        clock.advance(by: .seconds(89))
        first.open()
        #expect(try await iterator.next() == Self.gap, "the keepalive")
        try await yieldUntil { exchange.requests.count == 4 }  // create, register, poll, poll again
        #expect(exchange.requests.filter { $0.operation == "tokens/create" }.count == 1, "89 s in: still good")
        clock.advance(by: .seconds(2))
        second.open()
        #expect(try await iterator.next() == Self.gap, "the keepalive")
        #expect(try await iterator.next() == Self.gap, "the new token")
        try await yieldUntil { exchange.requests.count == 7 }
        #expect(exchange.requests.filter { $0.operation == "tokens/create" }.count == 2)
        #expect(exchange.requests.last?.url.absoluteString == Self.courier(2, ttl: 100))
    }

    // MARK: - Ending

    @Test func nobodySignedInEndsTheStreamWithTheError() async throws {
        let exchange = Self.server(
            polls: [],
            create: .json(#"{"serverErrorCode":"AUTHENTICATION_REQUIRED","redirectURL":"https://x/"}"#, status: 421))
        await #expect {
            for try await _ in Self.source(exchange).notifications() {}
        } throws: { ($0 as? CloudError)?.code == .notAuthenticated }
    }

    @Test func aCourierRefusalIsNeverTakenForASignInFailure() async throws {
        // 401 and 421 from the courier mean the push token, not the user: a new token, not the end.
        let exchange = Self.server(polls: [
            .respond(.json(#"{"serverErrorCode":"AUTHENTICATION_REQUIRED"}"#, status: 421)),
            .respond(Self.zoneNotification("ReadingList")),
        ])
        let clock = TestClock()
        let source = Self.source(exchange, clock: clock)
        let stream = source.notifications()
        var iterator = stream.makeAsyncIterator()
        _ = try await iterator.next()
        try await yieldUntil { clock.sleeperCount == 1 }
        clock.advanceToNextDeadline()
        #expect(try await iterator.next() == Self.gap)
        #expect(try await iterator.next()?.fetch == .zones([.readingList]))
    }

    @Test func thePollTimeoutIsWholeSecondsOfAtLeastOne() {
        let transport = makeTransport(ScriptedExchange([]))
        #expect(
            LongPollNotificationSource(transport: transport, pollTimeout: .milliseconds(1_500)).pollTimeout
                == .seconds(2))
        #expect(
            LongPollNotificationSource(transport: transport, pollTimeout: .milliseconds(10)).pollTimeout == .seconds(1))
        #expect(LongPollNotificationSource(transport: transport).pollTimeout == .seconds(60))
    }

    static func zoneNotificationObject() -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: zoneNotification("ReadingList").body) as? [String: Any]) ?? [:]
    }
}

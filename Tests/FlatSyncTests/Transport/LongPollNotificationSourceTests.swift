import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

@Suite("CKWS transport: long-poll notifications")
struct LongPollNotificationSourceTests {
    /// A scripted server: `tokens/create` hands out courier URLs `…/_push/T1`, `T2`…; polls are answered
    /// from `polls` in order, then hang until cancelled.
    private static func server(polls: [HTTPExchangeResponse]) -> ScriptedExchange {
        let remaining = Mutex(polls[...])
        let tokens = Mutex(0)
        return ScriptedExchange { request in
            if request.operation == "tokens/create" {
                let n = tokens.withLock {
                    $0 += 1; return $0
                }
                return .json(
                    #"{"apnsEnvironment":"development","apnsToken":"T\#(n)","webcourierURL":"http://127.0.0.1:1/_push/T\#(n)"}"#
                )
            }
            if let next = remaining.withLock({ $0.popFirst() }) { return next }
            try await Task.sleep(for: .seconds(3_600))
            throw CancellationError()
        }
    }

    @Test func pollsYieldTheChangedZonesAndANewTokenReplacesAnUnknownOne() async throws {
        let exchange = Self.server(polls: [
            HTTPExchangeResponse(status: 204),
            .json(#"{"zoneIDs":[{"zoneName":"ReadingList"}]}"#),
            HTTPExchangeResponse(status: 404),
            .json(#"{"serverErrorCode":"TRY_AGAIN_LATER"}"#, status: 503),
            .json(#"{"zoneIDs":[{"zoneName":"ReadingHistory"},{"zoneName":"ReadingList"}]}"#),
        ])
        let source = LongPollNotificationSource(
            transport: makeTransport(exchange), pollTimeout: .seconds(2),
            retryPolicy: RetryPolicy(initialDelay: .zero, jitter: 0), clock: TestClock())
        var received: [[ZoneID]] = []
        for try await zones in source.notifications() {
            received.append(zones)
            if received.count == 2 { break }
        }
        #expect(received == [[.readingList], [.readingHistory, .readingList]])
        let paths = exchange.requests.map { $0.url.path }
        #expect(
            paths.filter { $0.hasSuffix("tokens/create") }
                == Array(repeating: "/device/1/iCloud.com.example.news/development/tokens/create", count: 2),
            "the token lives under /device/, and a 404 asks for a new one")
        let polls = exchange.requests.filter { $0.url.path.contains("/_push/") }
        // (A sixth poll may be under way when the loop stops listening.)
        #expect(polls.prefix(5).map(\.url.lastPathComponent) == ["T1", "T1", "T1", "T2", "T2"])
        #expect(polls.first?.query("timeout") == "2")
        #expect(polls.first?.query("ckWebAuthToken") == nil, "the courier URL carries no credentials")
    }

    @Test func nobodySignedInEndsTheStreamWithTheError() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"serverErrorCode":"AUTHENTICATION_REQUIRED","redirectURL":"https://x/"}"#, status: 421)
        ])
        let source = LongPollNotificationSource(transport: makeTransport(exchange), clock: TestClock())
        await #expect {
            for try await _ in source.notifications() {}
        } throws: { ($0 as? CloudError)?.code == .notAuthenticated }
    }

    @Test func anErrorBodyInA200PollIsThatError() async throws {
        // As for every other request: a 200 whose body names an error is that error (believed never to be sent).
        let exchange = Self.server(polls: [.json(#"{"serverErrorCode":"AUTHENTICATION_FAILED","zoneIDs":[]}"#)])
        let source = LongPollNotificationSource(transport: makeTransport(exchange), clock: TestClock())
        await #expect {
            for try await _ in source.notifications() {}
        } throws: { ($0 as? CloudError)?.code == .notAuthenticated }
    }
}

import FlatSyncTestSupport
import Foundation
import Synchronization
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

// The web auth token: adopted from every response, saved durably before the next request, forgotten when
// the server refuses it, never logged; and the requests that carry it go one at a time, cancellably.

@Suite("CKWS transport: web auth token")
struct CloudKitWebAuthTokenTests {
    @Test func everyRotatedTokenIsSavedBeforeTheNextRequestAndARestartUsesTheNewest() async throws {
        try await withTemporaryDirectory { directory in
            let store = DirectoryWebAuthTokenStore(directory: directory)
            try store.saveToken("first")
            let onDisk = Mutex<[String?]>([])
            let exchange = ScriptedExchange { request in
                // What the store holds when each request goes out.
                onDisk.withLock { $0.append(try? store.loadToken()) }
                let n = onDisk.withLock { $0.count }
                return .json(#"{"zones":[]}"#, token: "rotated+\(n)/=")
            }
            let transport = makeTransport(exchange, tokens: store)
            for _ in 0..<3 { _ = try await transport.listZones() }
            #expect(exchange.requests.map { $0.query("ckWebAuthToken") } == ["first", "rotated+1/=", "rotated+2/="])
            #expect(onDisk.withLock { $0 } == ["first", "rotated+1/=", "rotated+2/="], "saved before the next request")

            // A new process: a new transport over the same directory.
            let restarted = makeTransport(exchange, tokens: DirectoryWebAuthTokenStore(directory: directory))
            _ = try await restarted.listZones()
            #expect(exchange.requests.last?.query("ckWebAuthToken") == "rotated+3/=")
        }
    }

    @Test func aTokenOnAnErrorResponseAndUnderCloudKitJSsHeaderNameIsAdoptedToo() async throws {
        let store = InMemoryWebAuthTokenStore(token: "a")
        let exchange = ScriptedExchange([
            .json(#"{"serverErrorCode":"THROTTLED"}"#, status: 429, token: "b"),
            .json(#"{"zones":[]}"#, headers: ["x-apple-cloudkit-session": "c"]),
            .json(#"{"zones":[]}"#),
        ])
        let transport = makeTransport(exchange, tokens: store)
        _ = try? await transport.listZones()
        _ = try await transport.listZones()
        _ = try await transport.listZones()
        #expect(exchange.requests.map { $0.query("ckWebAuthToken") } == ["a", "b", "c"])
        #expect(store.loadToken() == "c")
    }

    @Test func aRefusedTokenIsForgottenAndTheErrorNamesWhereToSignIn() async throws {
        let store = InMemoryWebAuthTokenStore(token: "stale")
        let exchange = ScriptedExchange([
            .json(
                #"{"uuid":"1","serverErrorCode":"AUTHENTICATION_REQUIRED","reason":"sign in","redirectURL":"https://example.com/signin?x=1"}"#,
                status: 421, token: "ignored"),
            .json(#"{"zones":[]}"#),
        ])
        let transport = makeTransport(exchange, tokens: store)
        let error = await #expect(throws: CloudError.self) { _ = try await transport.listZones() }
        #expect(error?.code == .notAuthenticated)
        #expect(error?.redirectURL == URL(string: "https://example.com/signin?x=1"))
        #expect(store.loadToken() == nil)
        _ = try await transport.listZones()
        #expect(exchange.requests.last?.query("ckWebAuthToken") == nil)
    }

    /// HTTP's own 421, "Misdirected Request" (a reused HTTP/2 connection: brightdigit/MistKit #379), has no
    /// CloudKit body: the user is still signed in, so the token stays and the request is retried.
    @Test func aMisdirectedRequestKeepsTheWebAuthTokenAndIsRetried() async throws {
        let store = InMemoryWebAuthTokenStore(token: "good")
        let exchange = ScriptedExchange([
            HTTPExchangeResponse(
                status: 421, headers: ["Content-Type": "text/html"], body: Data("<h1>Misdirected Request</h1>".utf8)),
            .json(#"{"zones":[]}"#),
        ])
        let transport = makeTransport(exchange, tokens: store)
        let error = await #expect(throws: CloudError.self) { _ = try await transport.listZones() }
        #expect(error?.code == .networkFailure)
        #expect(CloudErrorPolicy.action(for: error!) == .waitForNetwork, "retried, not a sign-out")
        #expect(store.loadToken() == "good")
        _ = try await transport.listZones()
        #expect(exchange.requests.last?.query("ckWebAuthToken") == "good")
    }

    /// 401 `AUTHENTICATION_FAILED` also answers a wrong API token: the user's token stays, and the token
    /// the refusal carries is not adopted.
    @Test func aFailedAuthenticationKeepsTheWebAuthToken() async throws {
        let store = InMemoryWebAuthTokenStore(token: "good")
        let exchange = ScriptedExchange([
            .json(
                #"{"uuid":"1","serverErrorCode":"AUTHENTICATION_FAILED","reason":"bad API token"}"#, status: 401,
                token: "belongs-to-nobody"),
            .json(#"{"zones":[]}"#),
        ])
        let transport = makeTransport(exchange, tokens: store)
        let error = await #expect(throws: CloudError.self) { _ = try await transport.listZones() }
        #expect(error?.code == .notAuthenticated)
        #expect(store.loadToken() == "good")
        _ = try await transport.listZones()
        #expect(exchange.requests.last?.query("ckWebAuthToken") == "good")
    }

    /// A 401 names no sign-in page. Asked for the user, the transport asks again without the user's token,
    /// which CloudKit answers with the page (421, documented), and keeps the token; when even that request
    /// is refused (the API token is wrong), the 401 stands.
    @Test func aFailedAuthenticationStillFindsTheSignInPageForTheUser() async throws {
        let failed = #"{"uuid":"1","serverErrorCode":"AUTHENTICATION_FAILED","reason":"refused"}"#
        let required =
            #"{"uuid":"2","serverErrorCode":"AUTHENTICATION_REQUIRED","reason":"sign in","redirectURL":"https://example.com/in"}"#
        let store = InMemoryWebAuthTokenStore(token: "spent")
        let exchange = ScriptedExchange([
            .json(failed, status: 401), .json(required, status: 421, token: "of-nobody"),
            .json(failed, status: 401), .json(failed, status: 401),
        ])
        let transport = makeTransport(exchange, tokens: store)
        let error = await #expect(throws: CloudError.self) { _ = try await transport.currentUser() }
        #expect(error?.code == .notAuthenticated)
        #expect(error?.redirectURL == URL(string: "https://example.com/in"))
        #expect(exchange.requests.map { $0.query("ckWebAuthToken") } == ["spent", nil])
        #expect(store.loadToken() == "spent", "kept: neither forgotten for the 421 nor replaced by its token")

        let stands = await #expect(throws: CloudError.self) { _ = try await transport.currentUser() }
        #expect(stands?.code == .notAuthenticated)
        #expect(stands?.redirectURL == nil)
        #expect(stands?.message.contains("sign in again") == false, "the 401 as it came")
        #expect(exchange.requests.map { $0.query("ckWebAuthToken") } == ["spent", nil, "spent", nil])
        #expect(store.loadToken() == "spent")
    }

    /// Only a 401 for a token that is saved is worth asking again: a 403 is a permission signing in does not
    /// give, and without a token the request just made was the one without it.
    @Test(
        arguments: [("ACCESS_DENIED", 403, "spent"), ("AUTHENTICATION_FAILED", 401, nil)] as [(String, Int, String?)])
    func aRefusalSigningInCannotCureIsNotAskedAgain(code: String, status: Int, saved: String?) async throws {
        let store = InMemoryWebAuthTokenStore(token: saved)
        let exchange = ScriptedExchange([
            .json(#"{"uuid":"1","serverErrorCode":"\#(code)","reason":"refused"}"#, status: status),
            .json(
                #"{"uuid":"2","serverErrorCode":"AUTHENTICATION_REQUIRED","redirectURL":"https://example.com/in"}"#,
                status: 421),
        ])
        let transport = makeTransport(exchange, tokens: store)
        let error = await #expect(throws: CloudError.self) { _ = try await transport.currentUser() }
        #expect(error?.code == .notAuthenticated)
        #expect(error?.redirectURL == nil)
        #expect(exchange.requests.count == 1)
        #expect(store.loadToken() == saved)
    }

    @Test func signingInAndOutGoThroughTheStore() async throws {
        let store = InMemoryWebAuthTokenStore()
        let exchange = ScriptedExchange([.json(#"{"userRecordName":"_u"}"#), .json(#"{"zones":[]}"#)])
        let transport = makeTransport(exchange, tokens: store)
        try await transport.signIn(withWebAuthToken: "handed+back")
        #expect(store.loadToken() == "handed+back")
        _ = try await transport.currentUser()
        #expect(exchange.requests.last?.query("ckWebAuthToken") == "handed+back")
        try await transport.signOut()
        #expect(store.loadToken() == nil)
        _ = try await transport.listZones()
        #expect(exchange.requests.last?.query("ckWebAuthToken") == nil)
    }

    @Test func aTokenThatCannotBeSavedFailsTheNextRequestBeforeItIsSent() async throws {
        let store = FailingTokenStore()
        let exchange = ScriptedExchange([
            .json(#"{"zones":[]}"#), .json(#"{"zones":[]}"#, token: "new"), .json(#"{"zones":[]}"#),
        ])
        let transport = makeTransport(exchange, tokens: store)
        _ = try await transport.listZones()  // loads "old"
        store.failing.withLock { $0 = true }
        _ = try await transport.listZones()  // its answer is good; only the rotated token is not saved
        await #expect(throws: FlatSyncError.self) { _ = try await transport.listZones() }
        #expect(exchange.requests.count == 2, "nothing is sent with a token a restart would not find")
        store.failing.withLock { $0 = false }
        _ = try await transport.listZones()
        #expect(exchange.requests.last?.query("ckWebAuthToken") == "new")
        #expect(store.token.withLock { $0 } == "new")
    }

    // MARK: - The token file

    @Test func theTokenFileIsPrivateDurableAndSelfChecking() throws {
        try withTemporaryDirectory { directory in
            let store = DirectoryWebAuthTokenStore(directory: directory)
            #expect(try store.loadToken() == nil)
            try store.saveToken("t+1/=")
            #expect(try store.loadToken() == "t+1/=")
            let attributes = try FileManager.default.attributesOfItem(atPath: store.file.path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            #expect(leftovers == [DirectoryWebAuthTokenStore.fileName], "no temporary file is left")

            var bytes = try Data(contentsOf: store.file)
            bytes[bytes.count / 2] ^= 0x01
            try bytes.write(to: store.file)
            #expect(try store.loadToken() == nil, "a damaged token reads as signed out")
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            #expect(names.contains { $0.hasPrefix(DirectoryWebAuthTokenStore.fileName + ".corrupt-") }, "kept aside")

            try store.saveToken("again")
            try store.saveToken(nil)
            #expect(try store.loadToken() == nil)
            #expect(!FileManager.default.fileExists(atPath: store.file.path))
        }
    }

    // MARK: - One request at a time

    @Test func requestsGoOneAtATimeInOrder() async throws {
        let inFlight = Mutex((now: 0, most: 0))
        let exchange = ScriptedExchange { request in
            inFlight.withLock {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            await Task.yield()
            inFlight.withLock { $0.now -= 1 }
            return .json(#"{"zones":[]}"#)
        }
        let transport = makeTransport(exchange)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { _ = try await transport.listZones() } }
            try await group.waitForAll()
        }
        #expect(inFlight.withLock { $0.most } == 1)
        #expect(exchange.requests.count == 20)
    }

    @Test func cancellingTheCallerCancelsItsRequestAndFreesTheLine() async throws {
        let started = AsyncStream<Void>.makeStream()
        let exchange = ScriptedExchange { request in
            if request.operation == "zones/list" {
                started.continuation.yield()
                // Hangs until cancelled, like a server that never answers.
                try await Task.sleep(for: .seconds(3_600))
            }
            return .json(#"{"records":[]}"#)
        }
        let transport = makeTransport(exchange)
        let hanging = Task { try await transport.listZones() }
        var iterator = started.stream.makeAsyncIterator()
        await iterator.next()
        // A second caller waits in line behind the hanging request; cancelling the first lets it through.
        let waiting = Task { try await transport.lookupRecords([RecordID(zone: ZoneID("Z"), name: "a")]) }
        hanging.cancel()
        await #expect(throws: CancellationError.self) { _ = try await hanging.value }
        #expect(try await waiting.value.isEmpty)
    }
}

/// A token store whose saves fail while `failing` is set, as a full disk would make them.
private final class FailingTokenStore: WebAuthTokenStore {
    let token = Mutex<String?>("old")
    let failing = Mutex(false)

    func loadToken() -> String? { token.withLock { $0 } }

    func saveToken(_ newToken: String?) throws {
        if failing.withLock({ $0 }) { throw FlatSyncError(.ioFailed, "disk full") }
        token.withLock { $0 = newToken }
    }
}

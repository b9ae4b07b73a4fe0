import Dispatch
import FlatSync
import FlatSyncCloudKit
import Foundation

/// A CloudKit Web Services emulator on 127.0.0.1: serves a test cloud (``InMemoryCloud`` or
/// ``DirectoryCloud``) over HTTP in CKWS JSON, so
/// `CloudKitWebServicesTransport` can be tested, benchmarked and demonstrated without Apple's server.
///
/// It speaks the project's wire contract. Where CloudKit documents a behaviour, the emulator follows the
/// documentation; where it does not, the behaviour is the **emulator's** and is called so in these
/// comments. In short:
/// - **Documented CKWS**: the URLs `/database/1/{container}/{environment}/private/{operation}` for
///   `zones/list`, `zones/modify`, `changes/database`, `changes/zone`, `records/modify`,
///   `records/lookup`, `subscriptions/list`, `subscriptions/lookup`, `subscriptions/modify`,
///   `assets/upload` (and the POST of the bytes to the URL it answers, answered with `singleFile`), and
///   `…/public/users/current`; `ckAPIToken` and `ckWebAuthToken` in the query; record, field, zone,
///   subscription and error shapes; the 200-operation and 1 MB record limits; per-record errors inside a
///   200; the documented error codes and statuses (the statuses of the emulator's own refusals of an unknown
///   path or method excepted: see below); 421 with `redirectURL` when a sign-in is needed;
///   `tokens/create` answering `webcourierURL`, `tokens/register` requiring `apnsEnvironment` and
///   `apnsToken`.
/// - **Observed live**: a new web auth token in `X-Apple-CloudKit-Web-Auth-Token` on every response
///   (errors included), old tokens staying valid (unless ``Options-swift.struct/strictTokens``); push
///   tokens under `/device/1/…/tokens/create|register`, not `/database/`; the web courier: a
///   `webcourierURL` of the form `…/aps?tok=<escaped token>&ttl=43200` polled with GET exactly as given,
///   one APNs-style notification (`{"aps":…,"ck":…}`) per response, taken off the token's queue, an empty
///   200 when nothing came (after ``Options-swift.struct/courierHoldTime``); a zone's failure in `zones/modify` coming back as
///   that zone's entry inside a 200 (MistKit PR #443); creating a subscription ID that exists succeeding with
///   the existing one, and a duplicate of another subscription's content failing inside a 200 with
///   `INTERNAL_ERROR` "could not find subscription we just created" (seen for query subscriptions, assumed
///   for zone ones); an asset field read as `ASSETID` with `fileChecksum`, `size`, `wrappingKey`,
///   `referenceChecksum` and, in a fetch or lookup, a `downloadURL` with `${f}` for a file name that a plain
///   GET fetches, different for every fetch; a save refused for an asset description without an upload's
///   `receipt` (as every read returns it: MistKit).
/// - **Assets, emulator behaviour**: the link's host (the emulator's own `/_assets/…`, where CloudKit's is
///   another) and lifetime (until ``expireAssetLinks()``); 403 for an expired link and 404 for unknown bytes
///   (CloudKit's answers are not known); the words of the refusal of a receipt-less description; upload URLs
///   at `/_upload/{token}`, good for one upload, with no expiry (CloudKit documents 15 minutes); bytes kept
///   after the last record naming them is gone (CloudKit collects them lazily).
/// - **Emulator behaviour**: which documented code stands for a condition CloudKit has no code for (a
///   busy zone, a request over a limit, an expired token, a zone the user deleted; see
///   `CloudKitWireError`), and, only when asked (``Options-swift.struct/guessedErrorCodes``), four
///   undocumented codes and a `purged` flag, which are guesses; a production environment refusing saves
///   outside its schema in the words seen live (see ``CloudAdministration/setProductionSchema(_:)``); `syncToken` as base64 of the change token's bytes; `resultsLimit` clamped to 200;
///   `created`/`modified` times being the response's time; the reserved field `fsLastModifiedBy`
///   carrying `Record.lastModifiedBy`; zone subscriptions only (a query one is refused), dropped with
///   their zone (so a zone's deletion is not pushed: devices learn of it at their next whole fetch); the
///   courier's hold time (``Options-swift.struct/courierHoldTime``), its 404 for an
///   unknown token, its coalescing of undelivered notifications per subscription; the sign-in page at
///   `/_auth/signin`; the answers to a path, method or operation it does not serve (404, 405 or 400 with
///   `BAD_REQUEST`; for push tokens under `/database/` only the 405 was observed); the administration endpoints under `/_admin/` (see ``HTTPCloudAdministration``);
///   one fixed user per server (``Options-swift.struct/userRecordName``).
///
/// Only zones with a zone subscription notify, and only push tokens that were registered receive the
/// notifications; stopping the server forgets every push token (as a courier that lost them would), so a
/// device polling it makes a new one.
///
/// Every request to a CKWS database path is served through the backing store's
/// request path exactly once (as a direct call is served), so ``CloudCounters`` and ``FaultPlan`` behave as
/// with the backing store itself. Faults go on the wire as the real server's statuses and codes;
/// `networkUnavailable` and `networkFailure` faults, and lost responses (applied first), go on the wire
/// as a connection dropped midway through a response. Requests the emulator refuses before reaching the
/// store (malformed JSON, an unknown operation, a bad API token, a missing sign-in) are not counted.
///
/// ```swift
/// let server = try CloudKitWebServicesServer()          // a fresh InMemoryCloud on a free port
/// let transport = CloudKitWebServicesTransport(configuration: .init(
///     containerID: "iCloud.com.example", environment: .development, apiToken: "any",
///     tokenStore: store, baseURL: server.baseURL))
/// …
/// await server.stop()
/// ```
public final class CloudKitWebServicesServer: Sendable {
    /// The cloud the server serves, for administering it (faults, counters, what it holds) while it runs.
    public let backing: any CloudAdministration
    /// The options the server was started with.
    public let options: Options
    /// Where the server listens: `http://127.0.0.1:PORT`, without a trailing slash.
    public let baseURL: URL

    private let http: LoopbackHTTPServer
    private let emulator: CloudKitEmulator

    /// Starts serving `backing` on 127.0.0.1 (the port of `options`, or a free one): the devices that use
    /// the cloud directly and those that reach it over HTTP share it.
    ///
    /// - Throws: `CloudError.Code.internalError` when the port cannot be listened on (it
    ///   is in use, say).
    public convenience init(backing: InMemoryCloud, options: Options = Options()) throws(CloudError) {
        try self.init(serving: backing, options: options)
    }

    /// Starts serving `backing` on 127.0.0.1 (the port of `options`, or a free one): the directory is the
    /// state, so several processes may serve and use it at once.
    ///
    /// - Throws: `CloudError.Code.internalError` when the port cannot be listened on (it
    ///   is in use, say).
    public convenience init(backing: DirectoryCloud, options: Options = Options()) throws(CloudError) {
        try self.init(serving: backing, options: options)
    }

    /// Starts serving any test cloud that serves arbitrary requests.
    package init(serving backing: some CloudDatabaseServing, options: Options) throws(CloudError) {
        do {
            http = try LoopbackHTTPServer(port: options.port)
        } catch {
            throw CloudError(.internalError, "Could not listen on 127.0.0.1:\(options.port): \(error)")
        }
        self.backing = backing
        self.options = options
        self.baseURL = URL(string: "http://127.0.0.1:\(http.port)")!
        let emulator = CloudKitEmulator(backing: backing, options: options, baseURL: baseURL)
        self.emulator = emulator
        http.start { request in await emulator.handle(request) }
    }

    /// A web auth token for a new session of the server's user, as its sign-in page (`/_auth/signin`, the
    /// `redirectURL` of a `notAuthenticated` error) hands out: for a test that signs a transport in
    /// without fetching the page, `try await transport.signIn(withWebAuthToken: server.signInToken())`.
    public func signInToken() -> String {
        emulator.auth.signIn()
    }

    /// Makes every asset download link the server has given stop working, as CloudKit's signed links do after
    /// an undocumented while: a download through an old link is refused, and a record fetched again carries
    /// a fresh one.
    public func expireAssetLinks() {
        emulator.assetLinks.expireAll()
    }

    /// Starts a server, runs `body` with it, and stops it whether `body` returns or throws: every test
    /// that starts a server stops it, and ``stop()``, being async, cannot go in a `defer`.
    ///
    /// ```swift
    /// try await CloudKitWebServicesServer.withServer(options: .init(requireWebAuthToken: true)) { server in
    ///     let transport = CloudKitWebServicesTransport(configuration: .init(
    ///         containerID: "iCloud.com.example.app", environment: .development, apiToken: "any",
    ///         tokenStore: InMemoryWebAuthTokenStore(token: server.signInToken()), baseURL: server.baseURL))
    ///     _ = try await transport.currentUser()
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - backing: the cloud served (by default a fresh one; reach it through ``backing``).
    ///   - options: how the server behaves.
    ///   - isolation: the caller's actor, which `body` runs on (a `@MainActor` test's body may use the
    ///     main actor's state).
    ///   - body: the test, given the running server.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws, or `CloudError.Code.internalError` when no port can be listened on.
    public static func withServer<Result>(
        backing: InMemoryCloud = InMemoryCloud(), options: Options = Options(),
        isolation: isolated (any Actor)? = #isolation,
        _ body: (CloudKitWebServicesServer) async throws -> Result
    ) async throws -> Result {
        let server = try CloudKitWebServicesServer(backing: backing, options: options)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Starts serving a fresh, empty ``InMemoryCloud`` (reach it through ``backing``).
    public convenience init(options: Options = Options()) throws(CloudError) {
        try self.init(backing: InMemoryCloud(), options: options)
    }

    /// The port the server listens on.
    public var port: UInt16 { http.port }

    /// Stops the server: no new connections, every open connection closed, requests in flight (long
    /// polls included) cancelled; returns when every thread of the server has ended (or after ten
    /// seconds). Safe to call more than once. Dropping the last reference to the server also stops it,
    /// without waiting.
    public func stop() async {
        let http = self.http
        // The wait blocks a thread: do it on Dispatch's, not on the concurrency pool's.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                http.stop()
                continuation.resume()
            }
        }
    }
}

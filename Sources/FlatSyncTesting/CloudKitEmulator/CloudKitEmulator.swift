import FlatSync
import FlatSyncCloudKit
import Foundation
import Synchronization

/// What ``CloudKitWebServicesServer`` runs behind its HTTP server: routing, authentication, and the
/// shared pieces the endpoint files (`CloudKitEmulator+…`) use.
///
/// Paths:
/// - `/database/1/{container}/{environment}/private/{operation}`: the CKWS operations (see
///   `CloudKitEmulator+Zones.swift`, `CloudKitEmulator+Records.swift` and
///   `CloudKitEmulator+Subscriptions.swift`); `…/public/users/current`.
/// - `/device/1/{container}/{environment}/tokens/create|register`: push tokens (as observed live).
/// - `/aps?tok=…&ttl=…`: the web courier a push token's `webcourierURL` names (`CloudKitEmulator+Push.swift`).
/// - `/_assets/{checksum}/{file}`, `/_upload/{token}`: the download links and upload URLs of assets
///   (`CloudKitEmulator+Assets.swift`).
/// - `/_auth/signin`, `/_admin/…`: emulator-defined.
final class CloudKitEmulator: Sendable {
    let backing: any CloudDatabaseServing
    let options: CloudKitWebServicesServer.Options
    let baseURL: URL
    let auth: CloudKitWebAuth
    let push: CloudKitPushHub
    let assetLinks: AssetLinks
    /// The upload URLs handed out and not used yet, by token.
    let uploadTokens = Mutex(Set<String>())

    /// The bytes of a response cut off midway: a whole header block announcing a body of 1,024 bytes,
    /// then the first few of them.
    ///
    /// Not the status line and half a header, as first planned: Foundation on Linux (swift-corelibs
    /// `NativeProtocol.swift`, observed with Swift 6.3.1 and libcurl 7.88) stops the client process with
    /// "Transfer completed, but there's no response" when a connection closes inside the header block;
    /// cut off inside the body, the client gets a `URLError` instead. Either way bytes were written, so
    /// libcurl does not silently resend the request on a new connection. The crash is
    /// swiftlang/swift-corelibs-foundation#5285, fixed by #5286 (a `URLError.networkConnectionLost`
    /// instead), which the 6.3.1 toolchain here does not have: until a host's toolchain does, a server
    /// or proxy that drops a connection inside the headers stops a Linux host.
    static let partialResponse = Data(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: 1024\r\n\r\n{\"rec".utf8)
    /// The header that carries the rotated web auth token.
    static let webAuthTokenHeader = "X-Apple-CloudKit-Web-Auth-Token"
    /// The most operations (and records looked up) one request may carry, as CKWS documents.
    static let maximumOperations = 200
    /// The most records one `changes/zone` page returns, as CKWS documents.
    static let maximumResultsLimit = 200

    init(backing: any CloudDatabaseServing, options: CloudKitWebServicesServer.Options, baseURL: URL) {
        self.backing = backing
        self.options = options
        self.baseURL = baseURL
        self.assetLinks = AssetLinks(baseURL: baseURL)
        self.auth = CloudKitWebAuth(requireToken: options.requireWebAuthToken, strict: options.strictTokens)
        // The subscriptions live in the backing store, which other processes (and a server started again
        // on the same directory) share: read them whenever zones change. A store that cannot be read
        // announces nothing.
        self.push = CloudKitPushHub(userRecordName: options.userRecordName) {
            (try? await backing.subscriptions()) ?? []
        }
    }

    /// Answers one request, and logs it when the options ask for a log.
    func handle(_ request: HTTPServerRequest) async -> HTTPServerReply {
        let start = ContinuousClock.now
        let reply = await route(request)
        if let log = options.requestLog {
            let elapsed = ContinuousClock.now - start
            let milliseconds =
                Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15
            let status: String
            switch reply {
            case .response(let response): status = String(response.status)
            case .dropConnection: status = "dropped"
            }
            // The path without its query, so never a token (the courier's push token is in its query).
            log("\(request.method) \(request.path) \(status) \(Int(milliseconds.rounded()))ms")
        }
        return reply
    }

    private func route(_ request: HTTPServerRequest) async -> HTTPServerReply {
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map {
            $0.removingPercentEncoding ?? String($0)
        }
        switch segments.first {
        case "database": return await database(request, Array(segments.dropFirst()))
        case "device": return await device(request, Array(segments.dropFirst()))
        case "aps" where segments.count == 1: return await courierPoll(request)
        case "_admin": return await admin(request, segments.dropFirst().joined(separator: "/"))
        case "_assets": return await assetDownload(request, Array(segments.dropFirst()))
        case "_upload" where segments.count == 2: return await assetUpload(request, token: segments[1])
        case "_auth" where segments.count == 2 && segments[1] == "signin": return signInPage(request)
        default:
            return .response(
                Self.errorResponse(404, "NOT_FOUND", "There is nothing at \(request.path) on this emulator."))
        }
    }

    // MARK: - CKWS paths

    /// `/database/1/{container}/{environment}/{database}/{operation…}`.
    private func database(_ request: HTTPServerRequest, _ segments: [String]) async -> HTTPServerReply {
        let problem =
            segments.count >= 5
            ? routeProblem(segments) : "The path is not /database/1/{container}/{environment}/{database}/{operation}."
        if let problem {
            return withRotatedToken(.response(Self.errorResponse(404, "BAD_REQUEST", problem)), session: nil)
        }
        let database = segments[3]
        let operation = segments[4...].joined(separator: "/")
        guard let session = authenticate(request) else {
            return withRotatedToken(refusal(request), session: nil)
        }
        let reply: HTTPServerReply
        switch (database, operation) {
        case ("public", "users/current"):
            // Only where Apple documents it: a client that asks the private database is told it is unknown.
            reply =
                request.method == "GET"
                ? Self.ok(["userRecordName": .string(options.userRecordName)])
                : methodNotAllowed(request, allowed: "GET")
        case (_, "tokens/create"), (_, "tokens/register"):
            // As observed live: push tokens live under /device/, the documented /database/ path answers 405
            // (only the status was seen; the body's code is the emulator's).
            reply = .response(
                Self.errorResponse(405, "BAD_REQUEST", "Push tokens are made under /device/1/…, not /database/1/…."))
        case ("private", _):
            reply = await privateOperation(operation, request)
        default:
            reply = .response(
                Self.errorResponse(
                    400, "BAD_REQUEST",
                    "The emulator serves the private database (and users/current), not \(database)/\(operation)."))
        }
        return withRotatedToken(reply, session: session)
    }

    /// Why `{container}/{environment}/{database}` is not served, or nil.
    private func routeProblem(_ segments: [String]) -> String? {
        guard segments[0] == "1" else { return "Only version 1 of the API is served." }
        guard segments[1].hasPrefix("iCloud."), segments[1].count > "iCloud.".count else {
            return "The container \(segments[1]) does not exist (a container starts with iCloud.)."
        }
        guard segments[2] == "development" || segments[2] == "production" else {
            return "The environment must be development or production, not \(segments[2])."
        }
        guard ["public", "private", "shared"].contains(segments[3]) else {
            return "The database must be public, private or shared, not \(segments[3])."
        }
        return nil
    }

    private func privateOperation(_ operation: String, _ request: HTTPServerRequest) async -> HTTPServerReply {
        let methods: [String: [String]] = [
            "zones/list": ["GET", "POST"], "zones/modify": ["POST"], "changes/database": ["POST"],
            "changes/zone": ["POST"], "records/modify": ["POST"], "records/lookup": ["POST"],
            // GetSubscriptions.html documents a GET; lookup and modify are POSTs.
            "subscriptions/list": ["GET"], "subscriptions/lookup": ["POST"], "subscriptions/modify": ["POST"],
            "assets/upload": ["POST"], "assets/rereference": ["POST"],
        ]
        guard let allowed = methods[operation] else {
            return .response(
                Self.errorResponse(400, "BAD_REQUEST", "The emulator does not serve the operation \(operation)."))
        }
        guard allowed.contains(request.method) else {
            return methodNotAllowed(request, allowed: allowed.joined(separator: " or "))
        }
        // A body that is not a JSON object never reaches the database (not counted).
        let body: CloudKitJSON.Object
        do {
            body = request.method == "GET" ? [:] : try CloudKitJSON.object(from: request.body)
        } catch {
            return .response(Self.errorResponse(400, "BAD_REQUEST", error.reason))
        }
        switch operation {
        case "zones/list": return await listZones()
        case "zones/modify": return await modifyZones(body)
        case "changes/database": return await databaseChanges(body)
        case "changes/zone": return await zoneChanges(body)
        case "records/modify": return await modifyRecords(body)
        case "records/lookup": return await lookupRecords(body)
        case "subscriptions/list": return await listSubscriptions()
        case "subscriptions/lookup": return await lookupSubscriptions(body)
        case "assets/upload": return await uploadURLs(body)
        case "assets/rereference": return await rereferenceAssets(body)
        default: return await modifySubscriptions(body)
        }
    }

    /// `/device/1/{container}/{environment}/tokens/create|register`.
    private func device(_ request: HTTPServerRequest, _ segments: [String]) async -> HTTPServerReply {
        guard segments.count == 5, segments[0] == "1", segments[1].hasPrefix("iCloud."),
            segments[2] == "development" || segments[2] == "production", segments[3] == "tokens",
            segments[4] == "create" || segments[4] == "register"
        else {
            return withRotatedToken(
                .response(
                    Self.errorResponse(
                        404, "BAD_REQUEST",
                        "The path is not /device/1/{container}/{environment}/tokens/create|register.")),
                session: nil)
        }
        guard let session = authenticate(request) else {
            return withRotatedToken(refusal(request), session: nil)
        }
        guard request.method == "POST" else {
            return withRotatedToken(methodNotAllowed(request, allowed: "POST"), session: session)
        }
        let reply =
            segments[4] == "create"
            ? createPushToken(request, container: segments[1])
            : registerPushToken(request)
        return withRotatedToken(reply, session: session)
    }

    // MARK: - Authentication

    /// The session a CKWS request belongs to, or nil when its API token or web auth token is refused
    /// (``refusal(_:)`` says how).
    private func authenticate(_ request: HTTPServerRequest) -> Int? {
        guard apiTokenProblem(request) == nil else { return nil }
        if case .accepted(let session) = auth.check(request.queryValue("ckWebAuthToken")) { return session }
        return nil
    }

    private func apiTokenProblem(_ request: HTTPServerRequest) -> String? {
        guard let sent = request.queryValue("ckAPIToken"), !sent.isEmpty else {
            return "The request has no ckAPIToken; CloudKit Web Services requires one."
        }
        if let expected = options.apiToken, sent != expected {
            return "The API token is not valid for this container."
        }
        return nil
    }

    /// The answer to a request ``authenticate(_:)`` refused: 401 for a bad API token or a stale web auth
    /// token, 421 with the sign-in page's URL when a web auth token is needed. Apple documents both codes
    /// and that a token is good for one round trip, not which answers a spent token: 401 is emulator
    /// behaviour (a 421 would have the engine forget the token and ask the user to sign in, as it does).
    private func refusal(_ request: HTTPServerRequest) -> HTTPServerReply {
        if let problem = apiTokenProblem(request) {
            return .response(Self.errorResponse(401, "AUTHENTICATION_FAILED", problem))
        }
        switch auth.check(request.queryValue("ckWebAuthToken")) {
        case .stale:
            return .response(
                Self.errorResponse(
                    401, "AUTHENTICATION_FAILED",
                    "The web auth token was replaced by a newer one; each token is good for one round trip."))
        case .signInRequired, .accepted:
            return .response(
                Self.errorResponse(
                    421, "AUTHENTICATION_REQUIRED", "Sign in to use this container's private database.",
                    redirectURL: signInURL))
        }
    }

    /// The emulator's sign-in page, with the configured callback.
    var signInURL: URL {
        var text = baseURL.absoluteString + "/_auth/signin"
        if let callback = options.signInCallbackURL {
            text += "?callback=" + Self.percentEncoded(callback.absoluteString)
        }
        return URL(string: text)!
    }

    /// Adds the rotated web auth token to a CKWS response: the session's next token, or, for a refused
    /// request, a token that belongs to no session.
    ///
    /// A dropped connection carries none. Under strict tokens the session moves on all the same: Apple
    /// documents each token as good for one round trip (ckws.md), so the request spent the client's token
    /// and the client never saw the next one; it must sign in again. By default old tokens stay valid, as
    /// observed live (MistKit #462), and a drop changes nothing.
    func withRotatedToken(_ reply: HTTPServerReply, session: Int?) -> HTTPServerReply {
        guard case .response(var response) = reply else {
            if options.strictTokens, let session { _ = auth.rotate(session) }
            return reply
        }
        let token = session.map(auth.rotate) ?? CloudKitWebAuth.unregisteredToken()
        response.headers.append((Self.webAuthTokenHeader, token))
        return .response(response)
    }

    /// `GET /_auth/signin?callback=URL`: **emulator behaviour**, standing in for Apple's sign-in. Signs in
    /// at once and answers 302 to `URL?ckWebAuthToken=<token>`, or, without a callback, 200 with the token
    /// as text.
    private func signInPage(_ request: HTTPServerRequest) -> HTTPServerReply {
        guard request.method == "GET" else { return methodNotAllowed(request, allowed: "GET") }
        let token = auth.signIn()
        guard let callback = request.queryValue("callback"), !callback.isEmpty else {
            return .response(
                HTTPServerResponse(
                    status: 200, headers: [("Content-Type", "text/plain; charset=utf-8")],
                    body: Data((token + "\n").utf8)))
        }
        guard let url = URL(string: callback), url.scheme != nil else {
            return .response(Self.errorResponse(400, "BAD_REQUEST", "The callback is not a URL."))
        }
        let separator = url.query == nil ? "?" : "&"
        let location = url.absoluteString + separator + "ckWebAuthToken=" + Self.percentEncoded(token)
        return .response(
            HTTPServerResponse(
                status: 302, headers: [("Location", location), ("Content-Type", "text/plain; charset=utf-8")],
                body: Data("Signed in; continue at \(location)\n".utf8)))
    }

    // MARK: - Replies

    /// A 200 with a JSON body.
    static func ok(_ object: CloudKitJSON.Object) -> HTTPServerReply {
        .response(jsonResponse(200, object))
    }

    /// A 200 whose JSON body `write` writes, members in key order (for bodies of many records, which are
    /// not worth building as a tree first).
    static func ok(writing write: (inout JSONValue.Writer) -> Void) -> HTTPServerReply {
        var writer = JSONValue.Writer(capacity: 64 * 1_024)
        write(&writer)
        return .response(jsonResponse(200, body: writer.data))
    }

    static func jsonResponse(_ status: Int, _ object: CloudKitJSON.Object) -> HTTPServerResponse {
        jsonResponse(status, body: CloudKitJSON.data(CloudKitJSON.value(object)))
    }

    private static func jsonResponse(_ status: Int, body: Data) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: body)
    }

    /// A request-level error response, with `Retry-After` when `retryAfter` is set. The body's `retryAfter`
    /// is documented; whether CloudKit also sends the header is not known (emulator behaviour: the
    /// transport's golden tests read the body alone).
    static func errorResponse(
        _ status: Int, _ serverErrorCode: String, _ reason: String, retryAfter: Duration? = nil,
        redirectURL: URL? = nil
    ) -> HTTPServerResponse {
        var response = jsonResponse(
            status,
            CloudKitWireError.body(
                serverErrorCode: serverErrorCode, reason: reason, retryAfter: retryAfter, redirectURL: redirectURL))
        if let retryAfter {
            response.headers.append(("Retry-After", CloudKitWireError.retryAfterHeader(retryAfter)))
        }
        return response
    }

    /// A request-level error: its status and code from the wire table, or a dropped connection for the
    /// network codes (a fault plan's `networkUnavailable`/`networkFailure`, and a lost response).
    func reply(for error: CloudError) -> HTTPServerReply {
        if CloudKitWireError.dropsConnection(error.code) {
            return .dropConnection(partialBytes: Self.partialResponse)
        }
        let (status, code) = CloudKitWireError.wire(error.code, guessedCodes: options.guessedErrorCodes)
        return .response(
            Self.errorResponse(
                status, code, error.message, retryAfter: error.retryAfter,
                redirectURL: error.code == .notAuthenticated ? signInURL : nil))
    }

    func methodNotAllowed(_ request: HTTPServerRequest, allowed: String) -> HTTPServerReply {
        var response = Self.errorResponse(
            405, "BAD_REQUEST", "\(request.method) is not allowed here; use \(allowed).")
        response.headers.append(("Allow", allowed.replacingOccurrences(of: " or ", with: ", ")))
        return .response(response)
    }

    /// Serves a request through the backing store, with any failure as a `CloudError` (a cancelled
    /// request, when the server stops, is `serviceUnavailable`).
    func serve<Response: Sendable>(
        _ kind: RequestKind, records: [RecordID] = [],
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> Response
    ) async -> Result<Response, CloudError> {
        do {
            return .success(try await backing.serve(kind, records: records, body))
        } catch let error as CloudError {
            return .failure(error)
        } catch {
            return .failure(CloudError(.serviceUnavailable, "The server is stopping; the request was not served."))
        }
    }

    /// Percent-encodes all but RFC 3986's unreserved characters.
    static func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

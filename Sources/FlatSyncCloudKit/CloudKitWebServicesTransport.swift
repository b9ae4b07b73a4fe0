import FlatSync
import Foundation
import Synchronization

/// `CloudTransport` to a CloudKit container's private database over CloudKit Web Services: the real
/// server.
///
/// It speaks the documented JSON endpoints (`zones/list`, `zones/modify`, `changes/database`,
/// `changes/zone`, `records/modify`, `records/lookup`, `users/current`) through an ``HTTPExchange``
/// (``URLSessionExchange`` by default), authenticated with the container's API token and the user's
/// web auth token. CloudKit sends a new web auth token with every response; the transport saves each
/// one in its ``WebAuthTokenStore`` before it sends the next request, so requests go one at a time.
///
/// ```swift
/// let transport = CloudKitWebServicesTransport(
///     configuration: .init(
///         containerID: "iCloud.com.example.news",
///         environment: .production,
///         apiToken: apiToken,
///         tokenStore: DirectoryWebAuthTokenStore(directory: deviceDirectory)
///     )
/// )
/// let user = try await transport.currentUser()      // throws notAuthenticated with a sign-in URL
/// let context = try await SyncContext.open(
///     directory: deviceDirectory, account: CloudAccount(id: user.userRecordName, transport: transport))
/// ```
///
/// What CloudKit Web Services cannot express is done the way its documentation suggests, and costs
/// requests that `InMemoryCloud`-style servers do not need:
/// - A conflicted save or delete (`CONFLICT`) carries no server record: the transport looks the records
///   up in one follow-up `records/lookup` per request and reports
///   `CloudError.Code.serverRecordChanged` with what it found.
/// - A delete under `DeletePolicy.ifServerRecordUnchanged` without a change tag has no CKWS form
///   (`delete` needs the tag): the transport looks the record up first; absent counts as deleted,
///   present as a conflict.
/// - `records/modify` and `records/lookup` name one zone each: a call spanning zones sends one request
///   per zone, so `atomically` holds per zone, as it does in CloudKit.
/// - Timestamps travel as whole milliseconds (CKWS `TIMESTAMP`); see `Date.roundedToMilliseconds`.
/// - At most ``maximumOperationsPerRequest`` (200) saves plus deletes per call, the documented limit.
///
/// Error mapping is one table, documented on the internal `CloudKitErrorMapping` and in the article "Meeting CloudKit".
/// Requests the transport can tell are malformed (empty names, a record named twice, too many
/// operations) fail with `CloudError.Code.invalidArguments` or
/// `CloudError.Code.limitExceeded` before anything is sent: an empty record name would
/// make CloudKit invent one, and an empty zone name would mean its default zone.
public actor CloudKitWebServicesTransport: CloudTransport {
    /// Where and how to reach the container.
    public struct Configuration: Sendable {
        /// A container's environment.
        public enum Environment: String, Sendable, Hashable, CaseIterable {
            /// The development environment, whose schema changes as records are saved.
            case development
            /// The production environment, whose schema is fixed.
            case production
        }

        /// The server: Apple's `https://api.apple-cloudkit.com` by default, or a local emulator.
        public var baseURL: URL
        /// The container, such as `iCloud.com.example.news`.
        public var containerID: String
        /// The container's environment.
        public var environment: Environment
        /// The API token made in CloudKit Dashboard (API Access → API Tokens).
        public var apiToken: String
        /// Where the user's web auth token is kept.
        public var tokenStore: any WebAuthTokenStore
        /// How long one request may take before it fails with
        /// `CloudError.Code.networkFailure`. Whole seconds, at least one (Foundation on
        /// Linux truncates anything finer).
        public var requestTimeout: Duration
        /// The HTTP client.
        public var http: any HTTPExchange
        /// The HTTP client for asset uploads and downloads, which go to another host (see
        /// ``CloudKitWebServicesTransport/downloadAsset(_:)``); nil uses ``URLSessionExchange/assets`` when
        /// ``http`` is ``URLSessionExchange/shared``, else ``http`` itself.
        public var assetHTTP: (any HTTPExchange)?
        /// How long one asset's upload or download may take (an asset may hold up to 15 MB).
        public var assetTransferTimeout: Duration = .seconds(300)
        /// The schema the transport writes within, to begin with: each `SyncContext` given the transport
        /// adds its stores' record types to it (see ``CloudKitWebServicesTransport/prepareToWrite(_:)``),
        /// so the default, `CloudSchema.flatSync` (FlatSync's own stores), needs nothing for a host's own
        /// types. A save of a record type it does not declare, or of a value of another type than its
        /// field's, fails with `CloudError.Code.invalidArguments` before anything is sent, and list fields go
        /// out with their declared type also when empty. A field it does not declare came from the server
        /// (another client wrote it): an update leaves it to the server, and a create or a replace sends it
        /// back as it came. `nil` writes any record; a field a context declares still goes out with its
        /// declared type when its value fits (an encrypted one marked `isEncrypted`, an empty list with its
        /// element type), and any other as its value's kind says (an empty list as a `STRING_LIST`).
        public var schema: CloudSchema?

        /// Apple's CloudKit Web Services host.
        public static let appleBaseURL = URL(string: "https://api.apple-cloudkit.com")!

        /// A configuration; the defaults reach Apple's server with `URLSession` and a 30-second timeout.
        public init(
            containerID: String,
            environment: Environment,
            apiToken: String,
            tokenStore: any WebAuthTokenStore,
            baseURL: URL = Configuration.appleBaseURL,
            requestTimeout: Duration = .seconds(30),
            http: any HTTPExchange = URLSessionExchange.shared,
            schema: CloudSchema? = .flatSync
        ) {
            self.schema = schema
            self.baseURL = baseURL
            self.containerID = containerID
            self.environment = environment
            self.apiToken = apiToken
            self.tokenStore = tokenStore
            self.requestTimeout = requestTimeout
            self.http = http
        }
    }

    /// The signed-in user, as `users/current` names them.
    public struct User: Sendable, Hashable {
        /// The user's record name in this container: stable for the user, different between containers.
        /// A change means the account changed.
        public var userRecordName: String
        /// The user's first name, when the user shared it.
        public var firstName: String?
        /// The user's last name, when the user shared it.
        public var lastName: String?
    }

    /// The most saves plus deletes one `records/modify` request may carry: 200, as documented.
    public nonisolated let maximumOperationsPerRequest = 200
    /// The most records one `changes/zone` page returns: 200, as documented.
    public static let maximumResultsLimit = 200

    /// The configuration the transport was made with.
    public nonisolated let configuration: Configuration

    /// The types the transport knows: ``Configuration/schema`` and the record types of every context given
    /// the transport. They limit what it writes unless ``Configuration/schema`` was nil; then they only give a
    /// declared field its type (an encrypted one marked, an empty list typed). Behind a lock rather than the
    /// actor: a context declares its types synchronously, when it is given the transport.
    private nonisolated let known: Mutex<KnownTypes>

    private struct KnownTypes {
        var types: CloudSchema
        var limit: Bool
    }

    /// The schema the transport writes within now: ``Configuration/schema`` and the record types of every
    /// context it was given to; nil when it writes any record.
    public nonisolated var schema: CloudSchema? {
        known.withLock { $0.limit ? $0.types : nil }
    }

    /// What a save is written by: ``schema`` as its limit, or when that is nil, the types contexts declared.
    nonisolated var writingSchema: (limit: CloudSchema?, declared: CloudSchema?) {
        let known = known.withLock { $0 }
        return known.limit ? (known.types, nil) : (nil, known.types)
    }

    private let gate = RequestGate()
    private var token: TokenState = .notLoaded
    /// A rotated token that could not be saved yet; saved (or the request fails) before the next request.
    private var tokenNeedsSaving = false
    /// The web auth token the last request was refused with, when that was a 401 (see ``currentUser()``).
    private var tokenRefusedWith401: String?
    private enum TokenState {
        case notLoaded
        case loaded(String?)
    }

    /// A transport for `configuration`. Nothing is sent until the first call.
    public init(configuration: Configuration) {
        self.configuration = configuration
        known = Mutex(
            KnownTypes(types: configuration.schema ?? CloudSchema(recordTypes: [:]), limit: configuration.schema != nil)
        )
    }

    /// Adds `schema`'s record types and fields to the ones the transport writes (``schema``); throws when
    /// it declares a field the transport already knows as another type, since records of one of the two
    /// would be refused, or when it or ``Configuration/schema`` declares a type CloudKit has not (a list of
    /// lists, an encrypted reference), since every save of the field would be. A transport that writes any record (``schema`` nil) goes on writing any, but sends the
    /// fields `schema` declares with their declared types. A context calls it when it is given the transport,
    /// with its stores' schema (`CloudSchema.flatSync(adding:)` its registered types).
    ///
    /// - Throws: `FlatSyncError.Code.invalidArgument`, naming the field.
    public nonisolated func prepareToWrite(_ schema: CloudSchema) throws(FlatSyncError) {
        // The configuration's schema is checked here rather than in `init`, which does not throw: no context
        // can write through a transport whose every save of such a field would be refused.
        if let problem = configuration.schema?.firstDeclarationProblem ?? schema.firstDeclarationProblem {
            throw FlatSyncError(
                .invalidArgument,
                "The CloudKit Web Services transport was given a schema declaring \(problem). Declare a type "
                    + "CloudKit has.")
        }
        let conflict: String? = known.withLock { known in
            if known.limit, let conflict = schema.firstConflict(with: known.types) { return conflict }
            known.types = known.types.adding(schema)
            return nil
        }
        guard let conflict else { return }
        throw FlatSyncError(
            .invalidArgument,
            "The CloudKit Web Services transport already writes \(conflict) differently from the context's stores: "
                + "records of one of them would be refused. Give the transport a schema that agrees "
                + "(Configuration(…, schema:)), or none.")
    }

    // MARK: - Signing in

    /// The signed-in user (`users/current`).
    ///
    /// When the server refuses a request that carried the saved web auth token with `AUTHENTICATION_FAILED`
    /// (401), which names no sign-in page and may concern the API token as much as the user's (so the
    /// transport keeps the token), `users/current` is asked once more without the user's token: CloudKit
    /// answers that with the sign-in page (421, documented). The saved token stays until the user signs in
    /// again.
    ///
    /// - Throws: `CloudError.Code.notAuthenticated` when nobody is signed in, with
    ///   `CloudError.redirectURL` set to the page where the user signs in; the web auth token that page
    ///   hands back goes to ``signIn(withWebAuthToken:)``. Without `redirectURL` when even a request without
    ///   the user's token is refused: the API token or the container is wrong.
    public func currentUser() async throws -> User {
        let reply: ResponseBody
        do {
            reply = try await send(.currentUser, method: "GET", database: "public", body: nil)
        } catch let refusal as CloudError where refusal.code == .notAuthenticated && refusal.redirectURL == nil {
            throw try await signInPage(after: refusal)
        }
        let wire = try decode(CloudKitWire.CurrentUser.self, reply, .currentUser)
        guard let name = wire.userRecordName, !name.isEmpty else {
            throw CloudKitErrorMapping.unexpectedResponse(.currentUser, reply.data, problem: "no userRecordName")
        }
        return User(userRecordName: name, firstName: wire.firstName, lastName: wire.lastName)
    }

    /// `refusal` with the sign-in page the server names for a request without the user's token, when
    /// `refusal` was a 401 for the token saved now (not a 403, which signing in would not cure, nor a token
    /// replaced since); `refusal` itself otherwise, or when the server names no page.
    private func signInPage(after refusal: CloudError) async throws -> CloudError {
        guard case .loaded(let saved?) = token, saved == tokenRefusedWith401 else { return refusal }
        do {
            _ = try await send(.currentUser, method: "GET", database: "public", body: nil, anonymously: true)
        } catch let answer as CloudError where answer.code == .notAuthenticated {
            if let page = answer.redirectURL {
                return CloudError(
                    .notAuthenticated, "\(refusal.message) (the server refused the saved sign-in; sign in again)",
                    serverErrorCode: refusal.serverErrorCode, redirectURL: page)
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {}
        return refusal
    }

    /// Adopts the web auth token the sign-in page handed back, saving it in the token store.
    public func signIn(withWebAuthToken webAuthToken: String) async throws {
        try await gate.enter()
        defer { gate.leave() }
        try await configuration.tokenStore.saveToken(webAuthToken)
        token = .loaded(webAuthToken)
        tokenNeedsSaving = false
    }

    /// Forgets the web auth token, here and in the token store.
    public func signOut() async throws {
        try await gate.enter()
        defer { gate.leave() }
        try await configuration.tokenStore.saveToken(nil)
        token = .loaded(nil)
        tokenNeedsSaving = false
    }

    // MARK: - Requests

    /// The URL of an operation: `…/database/1/{container}/{environment}/{database}/{operation}` with the
    /// tokens in the query, percent-encoded by hand (`URLQueryItem` leaves `+` alone, which the server
    /// reads as a space).
    func url(for operation: CloudKitErrorMapping.Operation, database: String, webAuthToken: String?) -> URL {
        let root = operation == .createPushToken || operation == .registerPushToken ? "device" : "database"
        var path = configuration.baseURL.absoluteString
        while path.hasSuffix("/") { path.removeLast() }
        path += "/\(root)/1/\(Self.escape(configuration.containerID))/\(configuration.environment.rawValue)"
        if root == "database" { path += "/\(database)" }
        path += "/\(operation.rawValue)?ckAPIToken=\(Self.escape(configuration.apiToken))"
        if let webAuthToken { path += "&ckWebAuthToken=\(Self.escape(webAuthToken))" }
        return URL(string: path)!
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func escape(_ value: String) -> String {
        var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }

    /// The body of a 200, read by ``decode(_:_:_:)`` in one pass that also looks for an error body (reading
    /// each response twice, once for that check, was a tenth of a sync's time through the emulator).
    struct ResponseBody {
        var data: Data
        /// Whether the request sent a change token (an error body's meaning depends on it).
        var sentChangeToken = false
    }

    /// Sends one request and returns the body of its 200 response; any other answer is thrown as the
    /// `CloudError` the mapping table gives. Requests go one at a time, each with the newest token; one sent
    /// `anonymously` goes without it and leaves the saved token as it is, whatever the answer.
    func send(
        _ operation: CloudKitErrorMapping.Operation, method: String = "POST", database: String = "private",
        body: Data?, sentChangeToken: Bool = false, anonymously: Bool = false
    ) async throws -> ResponseBody {
        try await gate.enter()
        defer { gate.leave() }
        try Task.checkCancellation()
        let webAuthToken = anonymously ? nil : try await currentToken()
        let request = HTTPExchangeRequest(
            method: method, url: url(for: operation, database: database, webAuthToken: webAuthToken),
            headers: body == nil ? [:] : ["Content-Type": "application/json; charset=utf-8"],
            body: body, timeout: configuration.requestTimeout)
        let response: HTTPExchangeResponse
        do {
            response = try await configuration.http.send(request)
        } catch {
            throw CloudKitErrorMapping.error(forTransportFailure: error, operation: operation)
        }
        if !anonymously { tokenRefusedWith401 = response.status == 401 ? webAuthToken : nil }
        switch anonymously ? nil : response.status {
        case nil:
            break
        case 421:
            // AUTHENTICATION_REQUIRED: the user's token is no good; forget it, so the host asks the user to
            // sign in again. Only when the body says so: a 421 without one is HTTP's "Misdirected Request"
            // (RFC 9110 §15.5.20: a connection reused for a host it cannot serve), not a sign-out.
            if CloudKitWire.ErrorFields.of(body: response.body)?.serverErrorCode == "AUTHENTICATION_REQUIRED" {
                await forgetToken()
            }
        case 401:
            // AUTHENTICATION_FAILED: something about the request was refused — a wrong API token or key, say
            // (a bad server-to-server signature gets this 401: developer.apple.com/forums/thread/777574) — not
            // necessarily the user's token. Keep it, and do not adopt whatever token came with the refusal;
            // `currentUser()` still finds the sign-in page.
            break
        default:
            await adoptRotatedToken(from: response)
        }
        guard response.status == 200 else {
            throw CloudKitErrorMapping.error(for: response, operation: operation, sentChangeToken: sentChangeToken)
        }
        return ResponseBody(data: response.body, sentChangeToken: sentChangeToken)
    }

    /// Encodes a request body; a value JSON cannot carry is the caller's mistake.
    nonisolated func encode(_ body: some JSONWritable) throws(CloudError) -> Data {
        var writer = JSONValue.Writer()
        do {
            try body.write(to: &writer)
        } catch {
            throw CloudError(.invalidArguments, "The request cannot be sent: \(error.description). Nothing was sent.")
        }
        return writer.data
    }

    /// Decodes a 200's body as `type`, or throws `CloudError.Code.unexpectedServerResponse`. An error body
    /// in a 200 (believed never to happen, handled in case it does) is thrown as the error it names.
    nonisolated func decode<T: JSONReadable>(
        _ type: T.Type, _ body: ResponseBody, _ operation: CloudKitErrorMapping.Operation
    ) throws(CloudError) -> T {
        let read: CloudKitWire.Body<T>
        do {
            read = try CloudKitWire.readBody(T.self, from: body.data)
        } catch let error as JSONValue.ParseError {
            throw CloudKitErrorMapping.unexpectedResponse(
                operation, body.data, problem: "not JSON (\(error.description))")
        } catch {
            throw CloudKitErrorMapping.unexpectedResponse(operation, body.data, problem: "\(error)")
        }
        switch read {
        case .answer(let answer):
            return answer
        case .error(let fields):
            throw CloudKitErrorMapping.error(
                fields, status: nil, operation: operation, sentChangeToken: body.sentChangeToken)
        }
    }

    // MARK: - The web auth token

    /// The token to send, loading it on first use and saving a rotated one that could not be saved yet.
    private func currentToken() async throws -> String? {
        switch token {
        case .notLoaded:
            let loaded = try await configuration.tokenStore.loadToken()
            token = .loaded(loaded)
            return loaded
        case .loaded(let current):
            if tokenNeedsSaving {
                // Sending with a token that a restart would not find is what this store is for; fail instead.
                try await configuration.tokenStore.saveToken(current)
                tokenNeedsSaving = false
            }
            return current
        }
    }

    /// Adopts the token a response carries (CloudKit sends a new one with every response; CloudKit JS reads
    /// `X-Apple-CloudKit-Session` too) and saves it before the next request.
    private func adoptRotatedToken(from response: HTTPExchangeResponse) async {
        guard
            let rotated =
                (response.header("X-Apple-CloudKit-Web-Auth-Token")
                ?? response.header("X-Apple-CloudKit-Session"))?.trimmingCharacters(in: .whitespaces),
            !rotated.isEmpty
        else { return }
        if case .loaded(let current) = token, current == rotated { return }
        token = .loaded(rotated)
        do {
            try await configuration.tokenStore.saveToken(rotated)
            tokenNeedsSaving = false
        } catch {
            // The response is good; the next request saves the token first or fails.
            tokenNeedsSaving = true
        }
    }

    private func forgetToken() async {
        token = .loaded(nil)
        do {
            try await configuration.tokenStore.saveToken(nil)
            tokenNeedsSaving = false
        } catch {
            tokenNeedsSaving = true
        }
    }
}

import Foundation

extension CloudKitWebServicesServer {
    /// How a ``CloudKitWebServicesServer`` listens, authenticates and words its errors.
    public struct Options: Sendable {
        /// The port on 127.0.0.1; 0 (the default) picks a free one.
        public var port: UInt16
        /// The API token requests must carry in `ckAPIToken`; `nil` accepts any non-empty one. A missing
        /// or wrong token gets 401 `AUTHENTICATION_FAILED` (CKWS requires the parameter).
        public var apiToken: String?
        /// When true, a private-database request or `users/current` without a web auth token the server
        /// issued gets 421 `AUTHENTICATION_REQUIRED` with a `redirectURL` to the emulator's sign-in page
        /// (`/_auth/signin`, emulator behaviour). When false (the default), no token is needed.
        public var requireWebAuthToken: Bool
        /// When true, only the newest web auth token of a session is valid, as Apple documents; an older
        /// one gets 401 `AUTHENTICATION_FAILED`. A request whose connection is dropped spends its token
        /// too, so a client that loses a response must sign in again. When false (the default), old
        /// tokens stay valid, as observed on the live server.
        public var strictTokens: Bool
        /// When true, the emulator also sends four error codes that CloudKit does not document and no one has
        /// seen it send — `ZONE_BUSY`, `LIMIT_EXCEEDED`, `CHANGE_TOKEN_EXPIRED`, `USER_DELETED_ZONE` — and a
        /// `purged` flag on zones the user deleted. They are **guesses**, for testing a client against them
        /// too. When false (the default), only documented codes go out: a busy zone as 503
        /// `TRY_AGAIN_LATER`, a request over a limit and an unusable change token as 400 `BAD_REQUEST`, a zone
        /// the user deleted as 404 `ZONE_NOT_FOUND`.
        public var guessedErrorCodes: Bool
        /// The user every request acts as, as `users/current` names them (emulator behaviour: one user per
        /// server). The default is the same for every emulator, so a restarted server is the same account.
        public var userRecordName: String
        /// Where the sign-in page sends the new token (`callback` of the `redirectURL`, as the sign-in
        /// callback of an API token in CloudKit Dashboard); `nil`: the page shows the token instead.
        ///
        /// The page, `GET /_auth/signin` (the `redirectURL` of a `notAuthenticated` error), is emulator
        /// behaviour standing in for Apple's sign-in: it signs in at once and answers 302 to
        /// `callback?ckWebAuthToken=<token>`, or, without a callback, 200 with the token as plain text and a
        /// newline. Hand that token to the transport's `signIn(withWebAuthToken:)`.
        public var signInCallbackURL: URL?
        /// Called once per request with one line: method, path without the query, status (or
        /// `dropped`), milliseconds. Never a token. For `cloud serve -v`.
        public var requestLog: (@Sendable (String) -> Void)?
        /// How long the web courier holds a poll for which no notification waits before it answers with an
        /// empty 200 (a keepalive). The live courier's hold time is not known; the default is 25 seconds.
        /// Tests use short ones.
        public var courierHoldTime: Duration

        /// The user of every emulator unless told otherwise.
        public static let defaultUserRecordName = "_6d2f1b7c0e9a4f3d8b5a2c1e7f4d9a60"

        /// Options; the defaults serve any client without signing in.
        public init(
            port: UInt16 = 0,
            apiToken: String? = nil,
            requireWebAuthToken: Bool = false,
            strictTokens: Bool = false,
            guessedErrorCodes: Bool = false,
            userRecordName: String = Options.defaultUserRecordName,
            signInCallbackURL: URL? = nil,
            requestLog: (@Sendable (String) -> Void)? = nil,
            courierHoldTime: Duration = .seconds(25)
        ) {
            self.port = port
            self.apiToken = apiToken
            self.requireWebAuthToken = requireWebAuthToken
            self.strictTokens = strictTokens
            self.guessedErrorCodes = guessedErrorCodes
            self.userRecordName = userRecordName
            self.signInCallbackURL = signInCallbackURL
            self.requestLog = requestLog
            self.courierHoldTime = courierHoldTime
        }
    }
}

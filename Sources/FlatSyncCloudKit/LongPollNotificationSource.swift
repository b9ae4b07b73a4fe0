import FlatSync
import Foundation

/// `CloudNotificationSource` that receives CloudKit's pushes the way CloudKit JS does in a browser: through
/// a web courier long poll.
///
/// The path, as observed against Apple's server (MistKit #379, #382, PR #381, and its
/// `WEB_COURIER_SPIKE.md`):
/// 1. `POST /device/1/{container}/{environment}/tokens/create` with `{"apnsEnvironment", "clientId"}`
///    answers `{"apnsEnvironment", "apnsToken", "webcourierURL"}` (the documented `/database/…` path
///    answers 405).
/// 2. `POST …/tokens/register` with `{"apnsEnvironment", "apnsToken", "clientId"}` makes the token receive
///    the user's pushes; it answers with an empty body or `{}`.
/// 3. `GET <webcourierURL>`, exactly as given (in development
///    `https://webcourier.sandbox.push.apple.com:443/aps?tok=…&ttl=43200`; nothing added, nothing decoded
///    or re-encoded, since the token may hold escapes such as `%2B`), answers with one JSON notification per response, or an empty body when nothing came in
///    time (a keepalive); then it is polled again. Each poll takes one notification off the token's queue.
///
/// Every notification is read by `CloudNotification(userInfo:)`; one that cannot be read asks for a
/// whole-database fetch. Pushes coalesce and can be missed, so the source also yields
/// `CloudNotification.wholeDatabase(_:)` after each keepalive, after every token it registers (the first
/// one, and every new one after a failure), so a gap is always caught up by a fetch.
///
/// A failure (the courier answers other than 2xx, the connection fails, `tokens/create` fails) waits for
/// ``retryPolicy``'s backoff on ``clock`` and starts over with a new token; the backoff grows with each
/// failure in a row, so no failure loops without waiting. Only a sign-in failure
/// (`CloudError.Code.notAuthenticated` from `tokens/create` or `tokens/register`) ends the stream.
///
/// Not known, and handled so that any answer works:
/// - How long the courier holds a poll before it answers empty. A poll that reaches ``pollTimeout``
///   first counts as a keepalive (the same token is polled again), so a hold longer than the timeout
///   only costs a poll per timeout.
/// - What the courier answers for a token it no longer knows or that expired: any status but 2xx makes a
///   new token.
/// - What `ttl` means exactly: read as the token's lifetime in seconds (43200 = 12 hours, as MistKit reads
///   it), the source makes a new token when nine tenths of it have passed.
public struct LongPollNotificationSource: CloudNotificationSource {
    /// The transport whose container and web auth token the push tokens are made for.
    public let transport: CloudKitWebServicesTransport
    /// How long one poll may wait for the courier's answer before it counts as a keepalive: whole
    /// seconds, at least one (Foundation on Linux truncates anything finer). The courier's own hold time
    /// is not known; the default, 60 seconds, is meant to be longer.
    public var pollTimeout: Duration
    /// How long to wait after failures before starting over with a new token.
    public var retryPolicy: RetryPolicy
    /// The clock backoff waits and token lifetimes are measured on.
    public var clock: any Clock<Duration>
    /// The `apnsEnvironment` sent with the tokens: by default the container's environment.
    public var apnsEnvironment: CloudKitWebServicesTransport.Configuration.Environment
    /// The `clientId` sent with every token request, as CloudKit JS sends one: a UUID made with the source
    /// and kept for its lifetime.
    public let clientID: String
    /// The HTTP client of the courier polls. By default the transport's, except that
    /// `URLSessionExchange.shared` is replaced by a session of the courier's own: a poll held for its whole
    /// hold time need not occupy the API's connection, and an HTTP/2 connection reused for another host is
    /// what "421 Misdirected Request" answers (RFC 9110 §15.5.20).
    public var courierHTTP: any HTTPExchange

    /// A source for `transport`'s container.
    public init(
        transport: CloudKitWebServicesTransport, pollTimeout: Duration = .seconds(60),
        retryPolicy: RetryPolicy = .default, clock: any Clock<Duration> = ContinuousClock(),
        apnsEnvironment: CloudKitWebServicesTransport.Configuration.Environment? = nil,
        courierHTTP: (any HTTPExchange)? = nil
    ) {
        self.transport = transport
        self.pollTimeout = .seconds(Int64(URLSessionExchange.wholeSeconds(pollTimeout)))
        self.retryPolicy = retryPolicy
        self.clock = clock
        self.apnsEnvironment = apnsEnvironment ?? transport.configuration.environment
        self.clientID = UUID().uuidString
        let http = transport.configuration.http
        let isShared = (http as? URLSessionExchange) === URLSessionExchange.shared
        self.courierHTTP = courierHTTP ?? (isShared ? URLSessionExchange.courier : http)
    }

    /// An empty answer that comes back sooner than this was not held by a courier.
    static let minimumHold = Duration.seconds(1)
    /// How many such answers in a row are polled again at once before the source waits between polls.
    static let quickKeepalivesAllowed = 3

    /// The notifications of the user's container, polled from its web courier until the stream is dropped:
    /// one element per push, and a whole-database fetch after every token registered and every gap in which
    /// a push may have been lost.
    public func notifications() -> AsyncThrowingStream<CloudNotification, any Error> {
        let (stream, continuation) = AsyncThrowingStream<CloudNotification, any Error>.makeStream()
        let task = Task { [self] in
            do {
                try await poll(into: continuation)
                continuation.finish()
            } catch is CancellationError {
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// A registered push token's courier, and when to replace it.
    private struct Courier {
        var url: URL
        /// When nine tenths of the token's `ttl` have passed (on the engine clock), if it gave one.
        var renewAt: Duration?
    }

    /// Polls until cancelled, or until nobody is signed in.
    private func poll(into continuation: AsyncThrowingStream<CloudNotification, any Error>.Continuation)
        async throws
    {
        // Through a local: the property itself is not opened as the generic argument.
        let clock: any Clock<Duration> = self.clock
        let time = EngineClock(clock)
        var courier: Courier?
        var failures = 0
        // Empty answers in a row that came back at once: a courier holds a poll, so they mean something in
        // between (a proxy, say) answers for it; past a few, they are waited out like failures, so that
        // neither the polls nor the fetch after each become a busy loop.
        var quickKeepalives = 0
        var random = SystemRandomNumberGenerator()
        while true {
            try Task.checkCancellation()
            do {
                if courier == nil || courier!.renewAt.map({ time.now() >= $0 }) == true {
                    let made = try await transport.registeredCourier(
                        apnsEnvironment: apnsEnvironment.rawValue, clientID: clientID)
                    courier = Courier(url: made.url, renewAt: made.lifetime.map { time.now() + $0 * 9 / 10 })
                    // Nothing made before this token existed was pushed to it.
                    continuation.yield(.wholeDatabase(.gap))
                }
                // Real time, not the engine's clock: how long the courier held the poll.
                let started = ContinuousClock.now
                switch try await transport.pollCourier(courier!.url, timeout: pollTimeout, through: courierHTTP) {
                case .notification(let notification):
                    failures = 0
                    quickKeepalives = 0
                    continuation.yield(notification)
                case .keepalive:
                    failures = 0
                    continuation.yield(.wholeDatabase(.gap))
                    quickKeepalives = ContinuousClock.now - started < Self.minimumHold ? quickKeepalives + 1 : 0
                    if quickKeepalives > Self.quickKeepalivesAllowed {
                        let delay = retryPolicy.delay(
                            afterFailures: quickKeepalives - Self.quickKeepalivesAllowed, retryAfter: nil,
                            random: Double.random(in: 0..<1, using: &random))
                        try await clock.sleep(for: delay)
                    }
                }
            } catch let error as CloudError where error.code == .notAuthenticated {
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                failures += 1
                courier = nil
                let delay = retryPolicy.delay(
                    afterFailures: failures, retryAfter: (error as? CloudError)?.retryAfter,
                    random: Double.random(in: 0..<1, using: &random))
                try await clock.sleep(for: delay)
            }
        }
    }
}

extension CloudKitWebServicesTransport {
    /// What one poll of a web courier said.
    enum CourierAnswer: Equatable {
        /// One notification.
        case notification(CloudNotification)
        /// Nothing in time: an empty body, or the poll's own timeout.
        case keepalive
    }

    /// A new push token, registered, with its courier URL and lifetime (`tokens/create`, then
    /// `tokens/register`, both under `/device/`).
    func registeredCourier(apnsEnvironment: String, clientID: String) async throws
        -> (url: URL, lifetime: Duration?)
    {
        let body = try encode(CloudKitWire.TokensCreateRequest(apnsEnvironment: apnsEnvironment, clientID: clientID))
        let reply = try await send(.createPushToken, body: body)
        let response = try decode(CloudKitWire.TokensCreateResponse.self, reply, .createPushToken)
        guard let token = response.apnsToken, !token.isEmpty else {
            throw CloudKitErrorMapping.unexpectedResponse(.createPushToken, reply.data, problem: "no apnsToken")
        }
        // Used exactly as given: `URL(string:)` keeps the text, escapes and all.
        guard let text = response.webcourierURL, let url = URL(string: text), url.scheme != nil, url.host != nil
        else {
            throw CloudKitErrorMapping.unexpectedResponse(
                .createPushToken, reply.data, problem: "no usable webcourierURL")
        }
        let register = try encode(
            CloudKitWire.TokensRegisterRequest(
                apnsEnvironment: response.apnsEnvironment ?? apnsEnvironment, apnsToken: token, clientID: clientID))
        let registered = try await send(.registerPushToken, body: register)
        // No answer is documented; `{}` and an empty body have both been seen from clients' servers.
        if !registered.data.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            _ = try decode(CloudKitWire.AnyAnswer.self, registered, .registerPushToken)
        }
        return (url, Self.lifetime(ofCourier: url))
    }

    /// The `ttl` a courier URL carries, in seconds, read without touching the URL itself.
    static func lifetime(ofCourier url: URL) -> Duration? {
        guard
            let ttl = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?
                .first(where: { $0.name == "ttl" })?.value.flatMap({ Int64($0) }), ttl > 0
        else { return nil }
        return .seconds(ttl)
    }

    /// One long poll of `url`, sent exactly as given (a GET with no headers, no query added), waiting up to
    /// `timeout`. It carries no CloudKit tokens and does not wait behind other requests: the courier URL
    /// itself names the push token.
    ///
    /// - Throws: a `CloudError` for any status but 2xx (never `notAuthenticated`: the courier is not
    ///   CloudKit Web Services, and its refusals mean the push token, not the user) and for a failed
    ///   connection; `CancellationError` when cancelled.
    nonisolated func pollCourier(_ url: URL, timeout: Duration, through http: any HTTPExchange) async throws
        -> CourierAnswer
    {
        let request = HTTPExchangeRequest(method: "GET", url: url, timeout: timeout)
        let response: HTTPExchangeResponse
        do {
            response = try await http.send(request)
        } catch let error as URLError where error.code == .timedOut {
            return .keepalive
        } catch {
            throw CloudKitErrorMapping.error(forTransportFailure: error, operation: .pollWebCourier)
        }
        guard (200..<300).contains(response.status) else {
            throw CloudError(
                .serviceUnavailable,
                "The web courier answered HTTP \(response.status); a new push token will be made.",
                retryAfter: response.header("Retry-After").flatMap { Int64($0) }.map { .seconds($0) })
        }
        if response.body.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) { return .keepalive }
        guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
            return .notification(.wholeDatabase(.unrecognized))
        }
        return .notification(CloudNotification(userInfo: object))
    }
}

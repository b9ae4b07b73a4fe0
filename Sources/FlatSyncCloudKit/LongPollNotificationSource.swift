import FlatSync
import Foundation

/// `CloudNotificationSource` that long-polls a web courier URL, the way CloudKit JS waits for pushes
/// in a browser.
///
/// It asks the container for a push token (`tokens/create`, which answers with a `webcourierURL`), then
/// polls that URL: each poll waits up to ``pollTimeout`` for a change and answers with the zones that
/// changed. Failures are retried with exponential backoff on the injected clock; a poll URL the server
/// no longer knows is replaced by a new token.
///
/// **Emulator only, for now.** Apple documents `tokens/create` and that `webcourierURL` is a long-poll
/// URL, but not what a poll returns; this source speaks the format of `CloudKitWebServicesServer` (in
/// `FlatSyncTesting`): `GET <webcourierURL>?timeout=S` → `200 {"zoneIDs":[{"zoneName":…}]}`, or `204`
/// when nothing changed in time, or `404` for an unknown token.
public struct LongPollNotificationSource: CloudNotificationSource {
    /// The transport whose container and web auth token the push token is made for.
    public let transport: CloudKitWebServicesTransport
    /// How long one poll waits for a change; the server caps it (the emulator at 60 s).
    public var pollTimeout: Duration
    /// How long to wait after failures before polling again.
    public var retryPolicy: RetryPolicy
    /// The clock retries wait on.
    public var clock: any Clock<Duration>

    /// A source for `transport`'s container.
    public init(
        transport: CloudKitWebServicesTransport, pollTimeout: Duration = .seconds(25),
        retryPolicy: RetryPolicy = .default, clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.transport = transport
        self.pollTimeout = pollTimeout
        self.retryPolicy = retryPolicy
        self.clock = clock
    }

    public func notifications() -> AsyncThrowingStream<[ZoneID], any Error> {
        let (stream, continuation) = AsyncThrowingStream<[ZoneID], any Error>.makeStream()
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

    /// Polls until cancelled, or until nobody is signed in.
    private func poll(into continuation: AsyncThrowingStream<[ZoneID], any Error>.Continuation) async throws {
        var courier: URL?
        var failures = 0
        var random = SystemRandomNumberGenerator()
        while true {
            try Task.checkCancellation()
            do {
                if courier == nil { courier = try await transport.webCourierURL() }
                switch try await transport.pollWebCourier(courier!, timeout: pollTimeout) {
                case .changed(let zones):
                    failures = 0
                    if !zones.isEmpty { continuation.yield(zones) }
                case .nothingYet:
                    failures = 0
                case .unknownToken:
                    courier = nil
                }
            } catch let error as CloudError where error.code == .notAuthenticated {
                throw error
            } catch let error as CloudError {
                failures += 1
                let delay = retryPolicy.delay(
                    afterFailures: failures, retryAfter: error.retryAfter,
                    random: Double.random(in: 0..<1, using: &random))
                try await clock.sleep(for: delay)
            }
        }
    }
}

extension CloudKitWebServicesTransport {
    /// What one poll of a web courier URL said.
    enum CourierPoll: Equatable {
        case changed([ZoneID])
        case nothingYet
        case unknownToken
    }

    /// A new push token's long-poll URL (`tokens/create`, under `/device/`: the `/database/` path the
    /// documentation gives answers 405 on the live server).
    func webCourierURL() async throws -> URL {
        let body = try encode(CloudKitWire.TokensCreateRequest(apnsEnvironment: configuration.environment.rawValue))
        let reply = try await send(.createPushToken, body: body)
        let response = try decode(CloudKitWire.TokensCreateResponse.self, reply, .createPushToken)
        guard let text = response.webcourierURL, let url = URL(string: text) else {
            throw CloudKitErrorMapping.unexpectedResponse(.createPushToken, reply.data, problem: "no webcourierURL")
        }
        return url
    }

    /// One long poll of `url`, waiting up to `timeout` for a change. It carries no tokens and does not wait
    /// behind other requests: the courier URL itself identifies the push token.
    func pollWebCourier(_ url: URL, timeout: Duration) async throws -> CourierPoll {
        let seconds = max(1, Int(URLSessionExchange.wholeSeconds(timeout)))
        var pollURL = url
        if var components = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            let items = components.queryItems ?? []
            components.queryItems = items + [URLQueryItem(name: "timeout", value: "\(seconds)")]
            pollURL = components.url ?? url
        }
        let request = HTTPExchangeRequest(method: "GET", url: pollURL, timeout: timeout + .seconds(10))
        let response: HTTPExchangeResponse
        do {
            response = try await configuration.http.send(request)
        } catch {
            throw CloudKitErrorMapping.error(forTransportFailure: error, operation: .pollWebCourier)
        }
        switch response.status {
        case 204: return .nothingYet
        case 404: return .unknownToken
        case 200:
            let poll = try decode(CloudKitWire.CourierPoll.self, ResponseBody(data: response.body), .pollWebCourier)
            return .changed(poll.zoneIDs.map { ZoneID($0.zoneName) })
        default:
            throw CloudKitErrorMapping.error(for: response, operation: .pollWebCourier, sentChangeToken: false)
        }
    }
}

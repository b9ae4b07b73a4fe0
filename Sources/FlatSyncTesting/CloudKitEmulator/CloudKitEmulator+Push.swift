import FlatSync
import FlatSyncCloudKit
import Foundation

// tokens/create, tokens/register and the `/_push/{token}` long poll.

extension CloudKitEmulator {
    /// The longest a poll may wait, and how long it waits when the poll does not say.
    static let maximumPollSeconds = 60.0
    static let defaultPollSeconds = 25.0

    /// `tokens/create` `{"apnsEnvironment"}` → `{"apnsEnvironment","apnsToken","webcourierURL"}`. The
    /// courier URL is the emulator's long poll for the new token.
    func createPushToken(_ request: HTTPServerRequest, environment: String) -> HTTPServerReply {
        let apnsEnvironment: String
        do throws(CloudKitJSON.Problem) {
            let body = try CloudKitJSON.object(from: request.body)
            apnsEnvironment = try CloudKitJSON.optionalString(body["apnsEnvironment"], "apnsEnvironment") ?? environment
        } catch {
            return .response(Self.errorResponse(400, "BAD_REQUEST", error.reason))
        }
        guard apnsEnvironment == "development" || apnsEnvironment == "production" else {
            return .response(
                Self.errorResponse(400, "BAD_REQUEST", "apnsEnvironment must be development or production."))
        }
        let token = push.createToken()
        return Self.ok([
            "apnsEnvironment": .string(apnsEnvironment), "apnsToken": .string(token),
            "webcourierURL": .string(baseURL.absoluteString + "/_push/" + token),
        ])
    }

    /// `tokens/register` `{"apnsToken","apnsEnvironment"}` → `{}`: the token receives notifications from
    /// now on (emulator behaviour: any token may be registered, not only those it made).
    func registerPushToken(_ request: HTTPServerRequest) -> HTTPServerReply {
        do throws(CloudKitJSON.Problem) {
            let body = try CloudKitJSON.object(from: request.body)
            let token = try CloudKitJSON.string(body["apnsToken"], "apnsToken")
            guard !token.isEmpty, !token.contains("/") else {
                throw CloudKitJSON.Problem("apnsToken must not be empty or contain /.")
            }
            push.register(token)
        } catch {
            return .response(Self.errorResponse(400, "BAD_REQUEST", error.reason))
        }
        return Self.ok([:])
    }

    /// `GET /_push/{token}?timeout=S` (**emulator-defined**; the web courier's format is not documented):
    /// 200 `{"zoneIDs":[{"zoneName":…}]}` as soon as a zone changed since the token's last answered poll,
    /// else 204 after `timeout` seconds (default 25, at most 60); 404 `NOT_FOUND` for a token the emulator
    /// does not know. A poll ends early when the server stops.
    func pushPoll(_ request: HTTPServerRequest, _ segments: [String]) async -> HTTPServerReply {
        guard segments.count == 1, !segments[0].isEmpty else {
            return .response(Self.errorResponse(404, "NOT_FOUND", "The path is not /_push/{token}."))
        }
        guard request.method == "GET" else { return methodNotAllowed(request, allowed: "GET") }
        var seconds = Self.defaultPollSeconds
        if let text = request.queryValue("timeout") {
            guard let value = Double(text), value.isFinite, value >= 0 else {
                return .response(
                    Self.errorResponse(400, "BAD_REQUEST", "timeout must be a number of seconds, 0 or more."))
            }
            seconds = min(value, Self.maximumPollSeconds)
        }
        switch await push.poll(segments[0], timeout: .milliseconds(Int64(seconds * 1_000))) {
        case .changed(let zones):
            return Self.ok(["zoneIDs": .array(zones.map { ["zoneName": .string($0)] })])
        case .nothing:
            return .response(HTTPServerResponse(status: 204))
        case .unknownToken:
            return .response(Self.errorResponse(404, "NOT_FOUND", "The push token is unknown to this server."))
        }
    }
}

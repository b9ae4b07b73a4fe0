import FlatSync
import FlatSyncCloudKit
import Foundation

// tokens/create, tokens/register (under /device/, as observed live) and the web courier at /aps. See
// CloudKitPushHub for what is imitated from where.

extension CloudKitEmulator {
    /// `tokens/create` `{"apnsEnvironment", "clientId"}` → `{"apnsEnvironment", "apnsToken", "webcourierURL"}`
    /// (documented, CreateTokens.html). The courier URL is this server's `/aps?tok=…&ttl=43200`.
    ///
    /// `apnsEnvironment` is the one documented key, and the live server needs it in `tokens/create` as in
    /// `tokens/register` (MistKit #379, PR #381; ckws.md): missing is a 400 here. A `clientId`, which
    /// CloudKit JS sends, is accepted and not needed.
    func createPushToken(_ request: HTTPServerRequest, container: String) -> HTTPServerReply {
        let apnsEnvironment: String
        do throws(CloudKitJSON.Problem) {
            let body = try CloudKitJSON.object(from: request.body)
            apnsEnvironment = try CloudKitJSON.string(body["apnsEnvironment"], "apnsEnvironment")
            _ = try CloudKitJSON.optionalString(body["clientId"], "clientId")
        } catch {
            return .response(Self.errorResponse(400, "BAD_REQUEST", error.reason))
        }
        guard Self.apnsEnvironments.contains(apnsEnvironment) else {
            return .response(
                Self.errorResponse(400, "BAD_REQUEST", "apnsEnvironment must be development or production."))
        }
        let (token, query) = push.createToken(container: container, environment: apnsEnvironment)
        return Self.ok([
            "apnsEnvironment": .string(apnsEnvironment), "apnsToken": .string(token),
            "webcourierURL": .string(baseURL.absoluteString + Self.courierPath + "?" + query),
        ])
    }

    /// `tokens/register` `{"apnsEnvironment", "apnsToken", "clientId"}` → `{}`: the token receives the
    /// user's notifications from now on. Apple lists `apnsEnvironment` and `apnsToken` as required
    /// (RegisterTokens.html), and the live server failed without `apnsEnvironment` (MistKit #379): either
    /// missing is a 400 here. No answer is documented; this one is `{}`.
    func registerPushToken(_ request: HTTPServerRequest) -> HTTPServerReply {
        do throws(CloudKitJSON.Problem) {
            let body = try CloudKitJSON.object(from: request.body)
            let environment = try CloudKitJSON.string(body["apnsEnvironment"], "apnsEnvironment")
            guard Self.apnsEnvironments.contains(environment) else {
                throw CloudKitJSON.Problem("apnsEnvironment must be development or production.")
            }
            let token = try CloudKitJSON.string(body["apnsToken"], "apnsToken")
            guard !token.isEmpty else { throw CloudKitJSON.Problem("apnsToken must not be empty.") }
            _ = try CloudKitJSON.optionalString(body["clientId"], "clientId")
            push.register(token)
        } catch {
            return .response(Self.errorResponse(400, "BAD_REQUEST", error.reason))
        }
        return Self.ok([:])
    }

    /// `GET /aps?tok=…&ttl=…`, the web courier: 200 with one notification's JSON, or 200 with an empty body
    /// after the hold time (``CloudKitWebServicesServer/Options-swift.struct/courierHoldTime``) when none
    /// came. The token is found by the query exactly as it was handed out, still escaped. A query naming no
    /// token gets 404 with an empty body (**emulator behaviour**: what the courier answers for an unknown or
    /// expired token is not known, only that it is not a 2xx, MistKit #379).
    func courierPoll(_ request: HTTPServerRequest) async -> HTTPServerReply {
        guard request.method == "GET" else { return methodNotAllowed(request, allowed: "GET") }
        switch await push.poll(query: request.rawQuery ?? "", hold: options.courierHoldTime) {
        case .notification(let body):
            return .response(
                HTTPServerResponse(
                    status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: body))
        case .keepalive:
            return .response(HTTPServerResponse(status: 200))
        case .unknownToken:
            return .response(HTTPServerResponse(status: 404))
        }
    }

    /// The courier's path, as on the live courier.
    static let courierPath = "/aps"
    private static let apnsEnvironments: Set<String> = ["development", "production"]
}

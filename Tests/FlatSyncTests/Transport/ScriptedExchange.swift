import Foundation
import Synchronization

@testable import FlatSync
@testable import FlatSyncCloudKit

/// An ``HTTPExchange`` that answers from a script instead of a server, and records every request, so a
/// test can check what the transport sent and feed it exactly the answer it needs.
final class ScriptedExchange: HTTPExchange {
    typealias Responder = @Sendable (HTTPExchangeRequest) async throws -> HTTPExchangeResponse

    private let responder: Responder
    private let sent = Mutex<[HTTPExchangeRequest]>([])

    init(_ responder: @escaping Responder) {
        self.responder = responder
    }

    /// Answers each request with the next of `responses`, in order (a test that sends more fails loudly).
    convenience init(_ responses: [HTTPExchangeResponse]) {
        let queue = Mutex(responses[...])
        self.init { request in
            guard let next = queue.withLock({ $0.popFirst() }) else {
                throw ScriptExhausted(request: "\(request.method) \(request.url.path)")
            }
            return next
        }
    }

    var requests: [HTTPExchangeRequest] { sent.withLock { $0 } }

    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        sent.withLock { $0.append(request) }
        return try await responder(request)
    }

    struct ScriptExhausted: Error {
        var request: String
    }
}

extension HTTPExchangeResponse {
    /// A response whose body is `json` (UTF-8), with the rotated-token header when `token` is given.
    static func json(_ json: String, status: Int = 200, token: String? = nil, headers: [String: String] = [:])
        -> HTTPExchangeResponse
    {
        var headers = headers
        headers["Content-Type"] = "application/json; charset=utf-8"
        if let token { headers["X-Apple-CloudKit-Web-Auth-Token"] = token }
        return HTTPExchangeResponse(status: status, headers: headers, body: Data(json.utf8))
    }
}

extension HTTPExchangeRequest {
    /// The body parsed as JSON, for comparing with a golden value.
    var jsonBody: NSObject? {
        body.flatMap { try? JSONSerialization.jsonObject(with: $0) as? NSObject }
    }

    /// The operation at the end of the path: `records/modify`.
    var operation: String {
        url.pathComponents.suffix(2).joined(separator: "/")
    }

    /// A query item's value, percent-decoded.
    func query(_ name: String) -> String? {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == name }?.value
    }
}

/// `text` parsed as JSON, for comparing with what a request carried.
func json(_ text: String) -> NSObject {
    // A golden value that is not JSON is a broken test, not a case to handle.
    try! JSONSerialization.jsonObject(with: Data(text.utf8)) as! NSObject
}

/// A transport to a fictional container, answering through `exchange`, with tokens in memory; records of
/// any type (no schema) unless `schema` says.
func makeTransport(
    _ exchange: ScriptedExchange, tokens: any WebAuthTokenStore = InMemoryWebAuthTokenStore(token: "web+token/1="),
    timeout: Duration = .seconds(30), schema: CloudSchema? = nil
) -> CloudKitWebServicesTransport {
    CloudKitWebServicesTransport(
        configuration: .init(
            containerID: "iCloud.com.example.news", environment: .development, apiToken: "api+key/0=",
            tokenStore: tokens, requestTimeout: timeout, http: exchange, schema: schema))
}

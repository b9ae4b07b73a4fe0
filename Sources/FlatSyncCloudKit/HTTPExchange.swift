import FlatSync
import Foundation

/// Sends one HTTP request and returns the server's response: the seam between
/// ``CloudKitWebServicesTransport`` and the network.
///
/// ``URLSessionExchange`` is the real one. Tests (or a host with its own HTTP stack) supply another: a
/// scripted exchange that answers with recorded CloudKit responses exercises the transport without a
/// server.
///
/// An implementation returns every response the server sent, whatever its status: a 503 is a response,
/// not an error. It throws only when no complete response arrived: a `URLError` (no connection, timeout,
/// connection lost midway), or `CancellationError` when the calling task was cancelled.
public protocol HTTPExchange: Sendable {
    /// Sends `request` and waits for the whole response.
    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse
}

/// An HTTP request as ``CloudKitWebServicesTransport`` builds it.
public struct HTTPExchangeRequest: Sendable, Hashable {
    /// `GET` or `POST`.
    public var method: String
    /// The full URL, with its query already percent-encoded.
    public var url: URL
    /// Header fields to send, by name.
    public var headers: [String: String]
    /// The body, or `nil` for none.
    public var body: Data?
    /// How long to wait for the whole response before giving up with a timeout.
    public var timeout: Duration

    /// A request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: Duration) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A complete HTTP response.
public struct HTTPExchangeResponse: Sendable, Hashable {
    /// The status code, such as 200 or 503.
    public var status: Int
    /// Header fields by name; look them up with ``header(_:)``, which ignores case.
    public var headers: [String: String]
    /// The body (empty when there was none).
    public var body: Data

    /// A response.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the header field `name`, compared without regard to case.
    public func header(_ name: String) -> String? {
        if let exact = headers[name] { return exact }
        let lowered = name.lowercased()
        return headers.first { $0.key.lowercased() == lowered }?.value
    }
}

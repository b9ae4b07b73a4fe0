import Foundation

/// One HTTP/1.1 request as ``LoopbackHTTPServer`` read it off a connection.
package struct HTTPServerRequest: Sendable {
    /// The method, such as `GET` or `POST`, as sent (methods are case-sensitive).
    package var method: String
    /// The request target's path, still percent-encoded, without the query.
    package var path: String
    /// The query after `?`, still percent-encoded; `nil` when the target has no `?`.
    package var rawQuery: String?
    /// The query's items in order, names and values percent-decoded (`+` read as a space, as in forms).
    package var queryItems: [(name: String, value: String)]
    /// Header fields by lowercased name; a field sent several times has its values joined with `, `.
    package var headers: [String: String]
    /// The body: exactly `Content-Length` bytes (empty without one).
    package var body: Data
    /// True unless the client asked to close the connection after this request (`Connection: close`,
    /// or HTTP/1.0 without `Connection: keep-alive`).
    package var keepAlive: Bool

    /// A request; the server builds them.
    package init(
        method: String, path: String, rawQuery: String? = nil, queryItems: [(name: String, value: String)] = [],
        headers: [String: String] = [:], body: Data = Data(), keepAlive: Bool = true
    ) {
        self.method = method
        self.path = path
        self.rawQuery = rawQuery
        self.queryItems = queryItems
        self.headers = headers
        self.body = body
        self.keepAlive = keepAlive
    }

    /// The value of the header field `name`, whatever its case.
    package func header(_ name: String) -> String? {
        headers[name.lowercased()]
    }

    /// The decoded value of the first query item named `name`.
    package func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}

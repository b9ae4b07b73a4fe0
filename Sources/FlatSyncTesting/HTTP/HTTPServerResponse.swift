import Foundation

/// A complete HTTP response for ``LoopbackHTTPServer`` to send.
///
/// The server adds `Content-Length` (exact, always; none for 204, which has no body) and `Connection`
/// itself and ignores those fields here.
package struct HTTPServerResponse: Sendable {
    /// The status code, such as 200.
    package var status: Int
    /// Header fields in the order to send them.
    package var headers: [(name: String, value: String)]
    /// The body.
    package var body: Data

    /// A response.
    package init(status: Int, headers: [(name: String, value: String)] = [], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header field named `name`, whatever its case.
    package func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }

    /// The response's bytes on the wire: status line, header fields, the framing fields, body.
    func serialized(closing: Bool) -> Data {
        var head = "HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\n"
        for (name, value) in headers {
            let lowered = name.lowercased()
            guard lowered != "content-length", lowered != "connection", lowered != "transfer-encoding" else {
                continue
            }
            head += "\(name): \(value)\r\n"
        }
        if status != 204 {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += closing ? "Connection: close\r\n" : "Connection: keep-alive\r\n"
        head += "\r\n"
        var bytes = Data(head.utf8)
        if status != 204 { bytes.append(body) }
        return bytes
    }

    /// The standard reason phrase for `status`.
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 200: return "OK"
        case 204: return "No Content"
        case 302: return "Found"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 409: return "Conflict"
        case 412: return "Precondition Failed"
        case 413: return "Payload Too Large"
        case 421: return "Misdirected Request"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status \(status)"
        }
    }
}

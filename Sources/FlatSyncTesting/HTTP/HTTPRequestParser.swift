import Foundation

/// Reads HTTP/1.1 requests out of the bytes of one connection, however the bytes were split between
/// reads: a header block up to the empty line, then exactly `Content-Length` body bytes. Pure, so the
/// tests can feed it byte by byte.
///
/// Refused (``Step/failure(_:)``; the server answers 400 and closes): a malformed request line or header
/// field, a header block over ``maximumHeaderBytes``, a body over ``maximumBodyBytes``, a body framed
/// with `Transfer-Encoding` (chunked), a bad `Content-Length`, bad percent-encoding in the query.
struct HTTPRequestParser {
    /// The largest header block accepted: 64 KiB.
    static let maximumHeaderBytes = 64 * 1024
    /// The largest body accepted: 64 MiB.
    static let maximumBodyBytes = 64 * 1024 * 1024

    /// What the bytes so far hold.
    enum Step {
        /// A whole request (its bytes are consumed).
        case request(HTTPServerRequest)
        /// More bytes are needed. `sendContinue` is true once, when the head of a request that sent
        /// `Expect: 100-continue` has arrived and its body has not.
        case needMoreData(sendContinue: Bool)
        /// The bytes are not an acceptable request; the reason is a sentence for the client.
        case failure(String)
    }

    private var buffer: [UInt8] = []
    /// Where the search for the end of the header block resumes, so byte-by-byte input stays linear.
    private var scanStart = 0
    /// The head of the request whose body is still arriving.
    private var pending: HTTPServerRequest?
    private var pendingLength = 0
    private var pendingExpectsContinue = false

    /// Adds bytes read from the connection.
    mutating func append(_ bytes: some Collection<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// True when no bytes of a next request have arrived.
    var isEmpty: Bool { buffer.isEmpty && pending == nil }

    /// The next request, or what is missing.
    mutating func next() -> Step {
        if pending == nil {
            // Empty lines before a request line are ignored (RFC 9112 §2.2).
            while buffer.count >= 2, buffer[0] == 13, buffer[1] == 10 {
                buffer.removeFirst(2)
                scanStart = 0
            }
            guard let end = headerEnd() else {
                if buffer.count > Self.maximumHeaderBytes {
                    return .failure("The request's header block is larger than 64 KiB.")
                }
                return .needMoreData(sendContinue: false)
            }
            guard end <= Self.maximumHeaderBytes else {
                return .failure("The request's header block is larger than 64 KiB.")
            }
            let head = Array(buffer[0..<end])
            buffer.removeFirst(end + 4)
            scanStart = 0
            switch Self.parseHead(head) {
            case .success(let parsed):
                pending = parsed.request
                pendingLength = parsed.contentLength
                pendingExpectsContinue = parsed.expectsContinue
            case .failure(let problem):
                return .failure(problem.reason)
            }
        }
        guard buffer.count >= pendingLength else {
            let sendContinue = pendingExpectsContinue
            pendingExpectsContinue = false
            return .needMoreData(sendContinue: sendContinue)
        }
        var request = pending!
        request.body = Data(buffer[0..<pendingLength])
        buffer.removeFirst(pendingLength)
        pending = nil
        pendingLength = 0
        pendingExpectsContinue = false
        return .request(request)
    }

    /// The offset of the `\r\n\r\n` that ends the header block, if it has arrived.
    private mutating func headerEnd() -> Int? {
        var index = max(0, scanStart - 3)
        while index + 3 < buffer.count {
            if buffer[index] == 13, buffer[index + 1] == 10, buffer[index + 2] == 13, buffer[index + 3] == 10 {
                return index
            }
            index += 1
        }
        scanStart = buffer.count
        return nil
    }

    // MARK: - The head

    private struct Problem: Error {
        var reason: String
    }

    private struct Head {
        var request: HTTPServerRequest
        var contentLength: Int
        var expectsContinue: Bool
    }

    private static func parseHead(_ bytes: [UInt8]) -> Result<Head, Problem> {
        if bytes.contains(0) {
            return .failure(Problem(reason: "The request's head contains a NUL byte."))
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let lines = text.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3 else {
            return .failure(Problem(reason: "The request line is not `METHOD target HTTP/1.1`."))
        }
        let method = String(requestLine[0])
        let target = String(requestLine[1])
        let version = String(requestLine[2])
        guard !method.isEmpty, method.unicodeScalars.allSatisfy(isTokenCharacter) else {
            return .failure(Problem(reason: "The request method is not a valid token."))
        }
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .failure(Problem(reason: "Only HTTP/1.1 and HTTP/1.0 are served, not \(version)."))
        }
        guard target.hasPrefix("/"), !target.unicodeScalars.contains(where: { $0.value <= 32 || $0.value == 127 })
        else {
            return .failure(Problem(reason: "The request target must be a path starting with /."))
        }

        var headers: [String: String] = [:]
        var contentLengths: Set<String> = []
        for line in lines.dropFirst() {
            if line.hasPrefix(" ") || line.hasPrefix("\t") {
                return .failure(Problem(reason: "Folded header lines are not accepted."))
            }
            guard let colon = line.firstIndex(of: ":") else {
                return .failure(Problem(reason: "A header line has no colon."))
            }
            let name = line[..<colon]
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(isTokenCharacter) else {
                return .failure(Problem(reason: "A header field name is empty or not a token."))
            }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: CharacterSet(charactersIn: " \t"))
            let key = name.lowercased()
            if key == "content-length" { contentLengths.insert(value) }
            if let existing = headers[key] {
                headers[key] = existing + ", " + value
            } else {
                headers[key] = value
            }
        }

        if headers["transfer-encoding"] != nil {
            return .failure(
                Problem(
                    reason: "Request bodies with Transfer-Encoding (chunked) are not accepted; send Content-Length.")
            )
        }
        var contentLength = 0
        if !contentLengths.isEmpty {
            // The same value sent twice is harmless; different values are a smuggling attempt.
            guard contentLengths.count == 1, let value = contentLengths.first, !value.isEmpty,
                value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 })
            else {
                return .failure(Problem(reason: "The Content-Length is not one decimal number."))
            }
            guard value.count <= 12, let length = Int(value), length <= maximumBodyBytes else {
                return .failure(Problem(reason: "The request body is larger than 64 MiB."))
            }
            contentLength = length
        }

        let connection =
            headers["connection"]?.lowercased()
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []
        let keepAlive = version == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")

        let path: String
        var rawQuery: String?
        let withoutFragment = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        if let question = withoutFragment.firstIndex(of: "?") {
            path = String(withoutFragment[..<question])
            rawQuery = String(withoutFragment[withoutFragment.index(after: question)...])
        } else {
            path = String(withoutFragment)
        }
        guard let queryItems = rawQuery.map(decodeQuery) ?? [] else {
            return .failure(Problem(reason: "The query's percent-encoding is malformed."))
        }
        let request = HTTPServerRequest(
            method: method, path: path, rawQuery: rawQuery, queryItems: queryItems, headers: headers,
            keepAlive: keepAlive
        )
        let expectsContinue = headers["expect"]?.lowercased() == "100-continue"
        return .success(Head(request: request, contentLength: contentLength, expectsContinue: expectsContinue))
    }

    /// The query's items, `+` read as a space and percent escapes decoded; `nil` for a bad escape.
    static func decodeQuery(_ query: String) -> [(name: String, value: String)]? {
        var items: [(name: String, value: String)] = []
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = decodeComponent(parts[0]) else { return nil }
            guard let value = parts.count > 1 ? decodeComponent(parts[1]) : "" else { return nil }
            items.append((name, value))
        }
        return items
    }

    private static func decodeComponent(_ component: Substring) -> String? {
        let spaced = component.replacingOccurrences(of: "+", with: " ")
        guard spaced.contains("%") else { return spaced }
        return spaced.removingPercentEncoding
    }

    /// RFC 9110's `tchar`.
    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9": return true
        case "!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~": return true
        default: return false
        }
    }
}

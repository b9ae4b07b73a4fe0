#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation

/// A client TCP connection to 127.0.0.1 over plain POSIX sockets, for tests where the exact bytes
/// matter (requests split at odd places, malformed requests, connections dropped midway).
///
/// Its calls block, so tests make them through ``offPool(_:)``: a blocked read must never hold one of
/// the few threads of the concurrency pool, which the server's handlers need to answer it.
final class RawHTTPConnection: @unchecked Sendable {
    // @unchecked: the descriptor is used by one test at a time, never concurrently.
    private let descriptor: Int32
    private var buffered: [UInt8] = []

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// A response as read off the wire.
    struct Response {
        var status: Int
        var statusLine: String
        var headers: [String: String]
        var body: Data

        func header(_ name: String) -> String? { headers[name.lowercased()] }

        /// The body as a JSON object.
        var json: [String: Any]? { try? JSONSerialization.jsonObject(with: body) as? [String: Any] }
    }

    /// Connects to 127.0.0.1:`port`; reads give up after `timeoutSeconds` (an upper bound, never a wait).
    init(port: UInt16, timeoutSeconds: Int = 20) throws {
        // The socket is made and connected before `self` exists: a class initializer that throws once every
        // property is set still runs `deinit`, which would close the descriptor a second time — by then
        // perhaps another test's file or socket, written to by whoever opened that number next.
        descriptor = try Self.connectedSocket(port: port, timeoutSeconds: timeoutSeconds)
    }

    /// A socket connected to 127.0.0.1:`port`, with its receive timeout set; closed again when it fails.
    private static func connectedSocket(port: UInt16, timeoutSeconds: Int) throws -> Int32 {
        #if canImport(Darwin)
            let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
            var yes: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Self.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            close(descriptor)
            throw Failure(description: "connect: errno \(code)")
        }
        var timeout = timeval()
        timeout.tv_sec = .init(timeoutSeconds)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    private static func connect(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
        #if canImport(Darwin)
            Darwin.connect(descriptor, address, length)
        #elseif canImport(Musl)
            Musl.connect(descriptor, address, length)
        #else
            Glibc.connect(descriptor, address, length)
        #endif
    }

    private static func systemSend(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int
    {
        #if canImport(Darwin)
            Darwin.send(descriptor, bytes, count, flags)
        #elseif canImport(Musl)
            Musl.send(descriptor, bytes, count, flags)
        #else
            Glibc.send(descriptor, bytes, count, flags)
        #endif
    }

    deinit {
        close(descriptor)
    }

    /// Sends bytes; false when the connection is gone.
    @discardableResult
    func send(_ bytes: some Collection<UInt8>) -> Bool {
        let array = Array(bytes)
        var offset = 0
        #if canImport(Darwin)
            let flags: Int32 = 0
        #else
            let flags = Int32(MSG_NOSIGNAL)
        #endif
        while offset < array.count {
            let sent = array.withUnsafeBytes {
                Self.systemSend(descriptor, $0.baseAddress! + offset, array.count - offset, flags)
            }
            if sent < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += sent
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Closes the sending side: the server reads end of stream.
    func shutdownWrite() {
        shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Closes the connection now.
    func closeNow() {
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Reads more bytes into the buffer; false at end of stream, failure or timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            buffered.append(contentsOf: chunk[0..<count])
            return true
        }
    }

    /// Reads one response (status line, headers, `Content-Length` body); nil when the connection ended
    /// before a whole response arrived.
    func readResponse() -> Response? {
        let separator: [UInt8] = [13, 10, 13, 10]
        var end: Int?
        while end == nil {
            if let found = Self.find(separator, in: buffered) {
                end = found
            } else if !fill() {
                return nil
            }
        }
        let head = String(decoding: buffered[0..<end!], as: UTF8.self)
        buffered.removeFirst(end! + 4)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        while buffered.count < length {
            guard fill() else { return nil }
        }
        let body = Data(buffered[0..<length])
        buffered.removeFirst(length)
        return Response(status: status, statusLine: statusLine, headers: headers, body: body)
    }

    /// Everything until the server closes the connection (or the timeout).
    func readUntilClosed() -> Data {
        while fill() {}
        defer { buffered = [] }
        return Data(buffered)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count)
        where haystack[index..<index + needle.count].elementsEqual(needle) {
            return index
        }
        return nil
    }
}

/// Runs blocking work on a thread of its own and waits for it without holding a thread of the
/// concurrency pool. (Not Dispatch's global queue: on Linux it does not add threads when its threads
/// block, so two dozen blocked clients would run a few at a time.)
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(with: Result { try work() })
        }.start()
    }
}

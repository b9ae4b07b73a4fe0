#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The few socket calls ``LoopbackHTTPServer`` makes, with the differences between Linux and Darwin
/// (socket type constants, `MSG_NOSIGNAL` versus `SO_NOSIGPIPE`, `sin_len`) kept here.
package enum POSIXSocket {
    /// A failed socket call: which one and its `errno`.
    package struct Failure: Error, CustomStringConvertible {
        /// The call that failed, such as `bind(127.0.0.1:80)`.
        package var call: String
        /// Its `errno`.
        package var code: Int32

        package var description: String { "\(call) failed: \(String(cString: strerror(code))) (errno \(code))" }
    }

    #if canImport(Darwin)
        private static let streamType = SOCK_STREAM
        private static let sendFlags: Int32 = 0
    #else
        private static let streamType = Int32(SOCK_STREAM.rawValue)
        // Writing to a peer that has gone raises SIGPIPE, which kills the process, unless the send says not to.
        private static let sendFlags = Int32(MSG_NOSIGNAL)
    #endif

    /// A TCP socket listening on 127.0.0.1 at `port` (0: any free port), with `SO_REUSEADDR`, close-on-exec
    /// and non-blocking accepts. Returns the descriptor and the port it got.
    static func listenOnLoopback(port: UInt16) throws(Failure) -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(AF_INET, streamType, 0)
        guard descriptor >= 0 else { throw Failure(call: "socket", code: errno) }
        do throws(Failure) {
            try setCloseOnExec(descriptor)
            var yes: Int32 = 1
            guard setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size)) == 0
            else { throw Failure(call: "setsockopt(SO_REUSEADDR)", code: errno) }
            var address = loopbackAddress(port: port)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else { throw Failure(call: "bind(127.0.0.1:\(port))", code: errno) }
            guard listen(descriptor, 128) == 0 else { throw Failure(call: "listen", code: errno) }
            // Accepts happen after poll says a connection waits; non-blocking, a connection that went away
            // in between gives EAGAIN instead of blocking the accept thread.
            let flags = fcntl(descriptor, F_GETFL)
            guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
                throw Failure(call: "fcntl(O_NONBLOCK)", code: errno)
            }
            let (_, boundPort) = try localAddress(descriptor)
            return (descriptor, boundPort)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// The IPv4 address and port a socket is bound to (`getsockname`).
    static func localAddress(_ descriptor: Int32) throws(Failure) -> (address: String, port: UInt16) {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard result == 0 else { throw Failure(call: "getsockname", code: errno) }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var inAddress = address.sin_addr
        inet_ntop(AF_INET, &inAddress, &text, socklen_t(text.count))
        let name = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (name, UInt16(bigEndian: address.sin_port))
    }

    /// `sockaddr_in` for 127.0.0.1:`port`.
    static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
            address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Accepts a waiting connection, set up for serving: close-on-exec, no SIGPIPE on Darwin, an idle
    /// timeout for reads. `nil` when none is waiting (or it went away); throws on other failures.
    static func accept(from listener: Int32, idleTimeoutSeconds: Int) throws(Failure) -> Int32? {
        #if canImport(Darwin)
            let descriptor = Darwin.accept(listener, nil, nil)
        #elseif canImport(Musl)
            let descriptor = Musl.accept(listener, nil, nil)
        #else
            let descriptor = Glibc.accept(listener, nil, nil)
        #endif
        guard descriptor >= 0 else {
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK || code == EINTR || code == ECONNABORTED || code == EPROTO {
                return nil
            }
            throw Failure(call: "accept", code: code)
        }
        // Accepted sockets inherit O_NONBLOCK on some systems; connections use blocking reads on their thread.
        let flags = fcntl(descriptor, F_GETFL)
        if flags >= 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
        try? setCloseOnExec(descriptor)
        #if canImport(Darwin)
            var yes: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
        #endif
        setReceiveTimeout(descriptor, seconds: idleTimeoutSeconds)
        return descriptor
    }

    /// Makes reads on `descriptor` fail with EAGAIN after `seconds` without data.
    static func setReceiveTimeout(_ descriptor: Int32, seconds: Int) {
        var timeout = timeval()
        timeout.tv_sec = .init(seconds)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    static func setCloseOnExec(_ descriptor: Int32) throws(Failure) {
        let flags = fcntl(descriptor, F_GETFD)
        guard flags >= 0, fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) == 0 else {
            throw Failure(call: "fcntl(FD_CLOEXEC)", code: errno)
        }
    }

    /// Writes all of `bytes`; false when the peer is gone or the socket failed. Never raises SIGPIPE.
    static func writeAll(_ descriptor: Int32, _ bytes: some Collection<UInt8>) -> Bool {
        let array = Array(bytes)
        var offset = 0
        while offset < array.count {
            let written = array.withUnsafeBytes { buffer in
                send(descriptor, buffer.baseAddress! + offset, buffer.count - offset, sendFlags)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// Reads what has arrived into `buffer`: the count, 0 at end of stream, -1 on failure or idle timeout.
    static func read(_ descriptor: Int32, into buffer: inout [UInt8]) -> Int {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress!, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            return count
        }
    }

    /// Shuts both directions down: wakes a thread blocked in `recv` or `accept` on Linux, and tells the
    /// peer the connection is over. The descriptor stays open until ``closeDescriptor(_:)``.
    static func shutdownBoth(_ descriptor: Int32) {
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
    }

    /// Stops sending (the peer reads end of stream) but keeps reading.
    static func shutdownWrite(_ descriptor: Int32) {
        _ = shutdown(descriptor, Int32(SHUT_WR))
    }

    static func closeDescriptor(_ descriptor: Int32) {
        _ = close(descriptor)
    }

    /// A pipe whose write end wakes the accept thread's `poll`; both ends close-on-exec.
    static func makeWakePipe() throws(Failure) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw Failure(call: "pipe", code: errno) }
        try? setCloseOnExec(ends[0])
        try? setCloseOnExec(ends[1])
        return (ends[0], ends[1])
    }

    /// Blocks until `listener` has a connection waiting (true) or `wake` became readable (false).
    static func waitForConnection(_ listener: Int32, orWake wake: Int32) -> Bool {
        var descriptors = [
            pollfd(fd: listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&descriptors, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return false
            }
            if descriptors[1].revents != 0 { return false }
            if descriptors[0].revents & Int16(POLLIN) != 0 { return true }
            // An error or hang-up on the listener (it was shut down): stop accepting.
            if descriptors[0].revents != 0 { return false }
        }
    }

    /// Signals the accept thread through the wake pipe.
    static func wake(_ descriptor: Int32) {
        var byte: UInt8 = 1
        _ = write(descriptor, &byte, 1)
    }
}

import Dispatch
import Foundation
import Synchronization

/// A small HTTP/1.1 server on 127.0.0.1 over POSIX sockets, for tests and the demo's emulator.
///
/// One accept thread, plus one dedicated `Thread` per connection, never a thread of the Swift concurrency
/// pool: reads block their connection's thread only. Each request is handed to the async handler in a
/// `Task`; the connection's thread waits for it on a semaphore, then writes the reply. Connections stay
/// open for further requests (keep-alive) until the client closes them or sends `Connection: close`.
///
/// Malformed requests (see ``HTTPRequestParser``) are answered with 400 and a CloudKit-style error body
/// (`{"uuid","serverErrorCode":"BAD_REQUEST","reason"}`) without reaching the handler, and the connection
/// is closed. The server never changes the process's signal handling: a write to a peer that has gone
/// fails quietly (`MSG_NOSIGNAL` on Linux, `SO_NOSIGPIPE` on Darwin).
///
/// ```swift
/// let server = try LoopbackHTTPServer()           // 127.0.0.1, a free port
/// server.start { request in .response(HTTPServerResponse(status: 200, body: Data("hi".utf8))) }
/// print(server.port)
/// server.stop()                                    // ends every connection and handler, then returns
/// ```
package final class LoopbackHTTPServer: Sendable {
    /// Answers one request. Runs in a `Task`; cancelled when the server stops.
    package typealias Handler = @Sendable (HTTPServerRequest) async -> HTTPServerReply

    /// The port the server listens on, on 127.0.0.1.
    package let port: UInt16

    private let core: Core

    /// Binds 127.0.0.1:`port` (0: a free port, read back with `getsockname`) and listens; connections
    /// wait in the backlog until ``start(_:)``.
    ///
    /// - Parameter idleTimeoutSeconds: how long a connection may stay silent, between or within requests,
    ///   before the server closes it.
    package init(port: UInt16 = 0, idleTimeoutSeconds: Int = 300) throws(POSIXSocket.Failure) {
        let (descriptor, boundPort) = try POSIXSocket.listenOnLoopback(port: port)
        let wake: (read: Int32, write: Int32)
        do throws(POSIXSocket.Failure) {
            wake = try POSIXSocket.makeWakePipe()
        } catch {
            POSIXSocket.closeDescriptor(descriptor)
            throw error
        }
        self.port = boundPort
        self.core = Core(listener: descriptor, wake: wake, idleTimeoutSeconds: idleTimeoutSeconds)
    }

    deinit {
        // Threads hold the core, not this object, so dropping the server stops it (without waiting).
        core.beginStopping()
    }

    /// Starts accepting connections and serving their requests with `handler`. Later calls do nothing.
    package func start(_ handler: @escaping Handler) {
        core.start(handler)
    }

    /// Stops the server: stops accepting (shutting the listening socket down, which wakes a blocked
    /// accept), shuts every open connection down, cancels the handlers still running, then waits until
    /// every thread of the server has ended, at most `timeout`. Safe to call more than once.
    ///
    /// Blocks the calling thread; from async code, call it off the concurrency pool.
    ///
    /// - Returns: true when every thread ended within `timeout`.
    @discardableResult
    package func stop(timeout: Duration = .seconds(10)) -> Bool {
        core.beginStopping()
        return core.waitUntilStopped(timeout: timeout)
    }

    /// The address the listening socket is bound to, as `getsockname` reports it: `127.0.0.1`.
    package var boundAddress: String? { core.boundAddress }

    /// How many connections are open now.
    package var openConnections: Int { core.openConnections }

    /// Waits until no connection is open, at most `timeout`; true if none is. Blocks the calling thread.
    package func waitUntilNoConnections(timeout: Duration) -> Bool {
        core.waitUntilNoConnections(timeout: timeout)
    }
}

extension LoopbackHTTPServer {
    /// The state the threads share. Threads hold this, never the ``LoopbackHTTPServer``.
    fileprivate final class Core: Sendable {
        private struct State {
            var started = false
            var stopping = false
            var listenerClosed = false
            var nextConnection = 0
            /// Open connections' descriptors; a connection's thread removes its own before closing it,
            /// so shutting one down from `beginStopping` never reaches a reused descriptor.
            var connections: [Int: Int32] = [:]
            /// Handler tasks running, by connection.
            var handlers: [Int: Task<Void, Never>] = [:]
        }

        private let listener: Int32
        private let wake: (read: Int32, write: Int32)
        private let idleTimeoutSeconds: Int
        private let state = Mutex(State())
        /// Entered by every thread of the server while it runs.
        private let threads = DispatchGroup()
        /// Entered by every connection thread while it runs.
        private let connectionThreads = DispatchGroup()

        init(listener: Int32, wake: (read: Int32, write: Int32), idleTimeoutSeconds: Int) {
            self.listener = listener
            self.wake = wake
            self.idleTimeoutSeconds = idleTimeoutSeconds
        }

        deinit {
            // Every thread has ended (they hold the core); close what they did not.
            if !state.withLock({ $0.listenerClosed }) { POSIXSocket.closeDescriptor(listener) }
            POSIXSocket.closeDescriptor(wake.read)
            POSIXSocket.closeDescriptor(wake.write)
        }

        var openConnections: Int { state.withLock { $0.connections.count } }

        var boundAddress: String? {
            state.withLock { state in state.listenerClosed ? nil : try? POSIXSocket.localAddress(listener).address }
        }

        func start(_ handler: @escaping Handler) {
            let shouldStart = state.withLock { state -> Bool in
                guard !state.started, !state.stopping else { return false }
                state.started = true
                return true
            }
            guard shouldStart else { return }
            threads.enter()
            let thread = Thread { [self] in
                acceptLoop(handler)
                threads.leave()
            }
            thread.name = "LoopbackHTTPServer accept"
            thread.start()
        }

        func beginStopping() {
            let handlers = state.withLock { state -> [Task<Void, Never>]? in
                guard !state.stopping else { return nil }
                state.stopping = true
                // Under the lock: the accept thread closes the listener under it too, and a closed
                // descriptor's number may already belong to someone else's socket.
                if !state.listenerClosed {
                    // Shut the listener down first: on Linux that alone wakes a blocked accept (close does not).
                    POSIXSocket.shutdownBoth(listener)
                    if !state.started {
                        state.listenerClosed = true
                        POSIXSocket.closeDescriptor(listener)
                    }
                }
                return Array(state.handlers.values)
            }
            guard let handlers else { return }
            // The pipe stays open until the core goes away, so this cannot reach a reused descriptor.
            POSIXSocket.wake(wake.write)
            // Connections are closed by their own threads, which remove them from `connections` first.
            state.withLock { state in
                for descriptor in state.connections.values { POSIXSocket.shutdownBoth(descriptor) }
            }
            for handler in handlers { handler.cancel() }
        }

        func waitUntilStopped(timeout: Duration) -> Bool {
            threads.wait(timeout: .now() + Self.dispatchInterval(timeout)) == .success
        }

        func waitUntilNoConnections(timeout: Duration) -> Bool {
            connectionThreads.wait(timeout: .now() + Self.dispatchInterval(timeout)) == .success
        }

        private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
            let (seconds, attoseconds) = duration.components
            return .nanoseconds(Int(min(seconds, 86_400 * 365)) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        }

        // MARK: - Accepting

        private func acceptLoop(_ handler: @escaping Handler) {
            defer {
                state.withLock { state in
                    if !state.listenerClosed {
                        state.listenerClosed = true
                        POSIXSocket.closeDescriptor(listener)
                    }
                }
            }
            while POSIXSocket.waitForConnection(listener, orWake: wake.read) {
                let accepted: Int32?
                do {
                    accepted = try POSIXSocket.accept(from: listener, idleTimeoutSeconds: idleTimeoutSeconds)
                } catch {
                    // Out of descriptors, say: stop accepting for a moment rather than spin.
                    if state.withLock({ $0.stopping }) { return }
                    Thread.sleep(forTimeInterval: 0.05)
                    continue
                }
                guard let descriptor = accepted else { continue }
                let id = state.withLock { state -> Int? in
                    guard !state.stopping else { return nil }
                    state.nextConnection += 1
                    state.connections[state.nextConnection] = descriptor
                    return state.nextConnection
                }
                guard let id else {
                    POSIXSocket.shutdownBoth(descriptor)
                    POSIXSocket.closeDescriptor(descriptor)
                    return
                }
                threads.enter()
                connectionThreads.enter()
                let thread = Thread { [self] in
                    serve(connection: id, descriptor: descriptor, handler: handler)
                    connectionThreads.leave()
                    threads.leave()
                }
                thread.name = "LoopbackHTTPServer connection \(id)"
                thread.start()
            }
        }

        // MARK: - Serving one connection

        private func serve(connection id: Int, descriptor: Int32, handler: @escaping Handler) {
            defer {
                state.withLock { _ = $0.connections.removeValue(forKey: id) }
                POSIXSocket.closeDescriptor(descriptor)
            }
            var parser = HTTPRequestParser()
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            while true {
                switch parser.next() {
                case .request(let request):
                    guard let reply = run(handler, on: request, connection: id) else {
                        return  // stopping
                    }
                    switch reply {
                    case .response(let response):
                        // The client asked to close, the handler did (`Connection: close`), or the server stops.
                        let closing =
                            !request.keepAlive || response.header("Connection")?.lowercased() == "close"
                            || state.withLock { $0.stopping }
                        guard POSIXSocket.writeAll(descriptor, response.serialized(closing: closing)) else { return }
                        if closing {
                            lingeringClose(descriptor)
                            return
                        }
                    case .dropConnection(let partialBytes):
                        _ = POSIXSocket.writeAll(descriptor, partialBytes)
                        POSIXSocket.shutdownBoth(descriptor)
                        return
                    }
                    continue
                case .failure(let reason):
                    _ = POSIXSocket.writeAll(descriptor, Self.badRequest(reason).serialized(closing: true))
                    lingeringClose(descriptor)
                    return
                case .needMoreData(let sendContinue):
                    if sendContinue {
                        guard POSIXSocket.writeAll(descriptor, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else {
                            return
                        }
                    }
                }
                let count = POSIXSocket.read(descriptor, into: &buffer)
                guard count > 0 else { return }  // end of stream (a request cut short is dropped), or failure
                parser.append(buffer[0..<count])
            }
        }

        /// Runs the handler in a task the server can cancel, and waits for its reply; nil when stopping.
        private func run(_ handler: @escaping Handler, on request: HTTPServerRequest, connection id: Int)
            -> HTTPServerReply?
        {
            let reply = Mutex<HTTPServerReply?>(nil)
            let done = DispatchSemaphore(value: 0)
            // High priority: a server shares its process's concurrency pool with its clients (in tests, with
            // every other test); a request waiting behind their work would look like a hung server.
            let task = Task(priority: .high) {
                let answer = await handler(request)
                reply.withLock { $0 = answer }
                done.signal()
            }
            let stopping = state.withLock { state -> Bool in
                state.handlers[id] = task
                return state.stopping
            }
            if stopping { task.cancel() }
            // Blocking here is fine: this is the connection's own thread, not one of the concurrency pool.
            done.wait()
            state.withLock { _ = $0.handlers.removeValue(forKey: id) }
            return state.withLock({ $0.stopping }) ? nil : reply.withLock { $0 }
        }

        /// Closes after an error without losing the response: stop sending, then read and discard what the
        /// client still sends (briefly), so the kernel does not answer unread data with a reset that could
        /// destroy the response before the client reads it.
        private func lingeringClose(_ descriptor: Int32) {
            POSIXSocket.shutdownWrite(descriptor)
            POSIXSocket.setReceiveTimeout(descriptor, seconds: 1)
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var discarded = 0
            while discarded < 1 << 20, !state.withLock({ $0.stopping }) {
                let count = POSIXSocket.read(descriptor, into: &buffer)
                guard count > 0 else { return }
                discarded += count
            }
        }

        /// The 400 for a request the parser refused, with a CloudKit-style error body.
        static func badRequest(_ reason: String) -> HTTPServerResponse {
            let object: [String: Any] = [
                "uuid": UUID().uuidString.lowercased(), "serverErrorCode": "BAD_REQUEST", "reason": reason,
            ]
            let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
            return HTTPServerResponse(
                status: 400, headers: [("Content-Type", "application/json; charset=utf-8")], body: body)
        }
    }
}

import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@Suite("Loopback HTTP server")
struct LoopbackHTTPServerTests {
    // MARK: - Parsing over a real socket

    @Test func requestSentByteByByteIsReadWhole() async throws {
        try await withHTTPServer(echo) { server in
            let response = try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                let request =
                    "POST /a/b?x=1%2B2&y=a+b&z=%2F%3D HTTP/1.1\r\nHost: 127.0.0.1:\(server.port)\r\n"
                    + "X-Odd-Header:  value: with colon \r\nContent-Length: 5\r\n\r\nhello"
                for byte in request.utf8 { connection.send([byte]) }
                return connection.readResponse()
            }
            let echoed = try #require(response?.json)
            #expect(response?.status == 200)
            #expect(echoed["method"] as? String == "POST")
            #expect(echoed["path"] as? String == "/a/b")
            #expect(echoed["rawQuery"] as? String == "x=1%2B2&y=a+b&z=%2F%3D")
            #expect(echoed["query"] as? [String] == ["x=1+2", "y=a b", "z=/="])
            #expect(echoed["host"] as? String == "127.0.0.1:\(server.port)", "split at the first colon only")
            #expect(echoed["odd"] as? String == "value: with colon")
            #expect(echoed["body"] as? String == "hello")
        }
    }

    @Test func pipelinedAndKeptAliveRequestsShareOneConnection() async throws {
        try await withHTTPServer(echo) { server in
            let bodies = try await offPool { () -> [String?] in
                let connection = try RawHTTPConnection(port: server.port)
                // Two requests in one write, then a third after reading their answers.
                connection.send(
                    "POST /one HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST /two HTTP/1.1\r\ncontent-length: 2\r\n\r\nde"
                )
                let first = connection.readResponse()
                let second = connection.readResponse()
                connection.send("GET /three HTTP/1.1\r\n\r\n")
                let third = connection.readResponse()
                // Status and path, or the body as text: a failure shows what came back.
                return [first, second, third].map { response -> String? in
                    guard let response else { return nil }
                    let path = response.json?["path"] as? String ?? String(decoding: response.body, as: UTF8.self)
                    return "\(response.status) \(path)"
                }
            }
            #expect(bodies == ["200 /one", "200 /two", "200 /three"])
            #expect(server.openConnections <= 1)
        }
    }

    @Test func bodySplitAcrossReadsIsReassembled() async throws {
        try await withHTTPServer(echo) { server in
            let response = try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("POST /split HTTP/1.1\r\nContent-Length: 10\r\n\r\n012")
                connection.send("3456")
                connection.send("789")
                return connection.readResponse()
            }
            #expect(response?.json?["body"] as? String == "0123456789")
        }
    }

    @Test func connectionCloseIsHonoured() async throws {
        try await withHTTPServer(echo) { server in
            let (response, rest) = try await offPool { () -> (RawHTTPConnection.Response?, Data) in
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("GET /bye HTTP/1.1\r\nConnection: close\r\n\r\n")
                return (connection.readResponse(), connection.readUntilClosed())
            }
            #expect(response?.header("Connection") == "close")
            #expect(response?.header("Content-Length") == String(response?.body.count ?? -1))
            #expect(rest.isEmpty, "the server closed the connection after the response")
        }
    }

    @Test func manyClientsAreServedAtOnce() async throws {
        let clients = 24
        let barrier = Barrier(parties: clients)
        try await withHTTPServer({ request in
            // Every handler waits until all clients are in: only concurrent serving gets past this.
            let allArrived = await barrier.arriveAndWait(timeout: .seconds(20))
            return .response(HTTPServerResponse(status: allArrived ? 200 : 503, body: Data(request.path.utf8)))
        }) { server in
            let statuses = try await withThrowingTaskGroup(of: Int?.self) { group in
                for index in 0..<clients {
                    group.addTask {
                        try await offPool {
                            let connection = try RawHTTPConnection(port: server.port)
                            connection.send("GET /client/\(index) HTTP/1.1\r\n\r\n")
                            return connection.readResponse()?.status
                        }
                    }
                }
                var statuses: [Int?] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.count == clients)
            #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")
        }
    }

    @Test func listensOnLoopbackOnly() async throws {
        try await withHTTPServer(echo) { server in
            #expect(server.boundAddress == "127.0.0.1")
            #expect(server.port != 0)
        }
    }

    // MARK: - Refusals

    @Test(arguments: [
        ("GARBAGE\r\n\r\n", "request line"),
        ("GET /x HTTP/2.0\r\n\r\n", "HTTP/1.1"),
        ("GET x HTTP/1.1\r\n\r\n", "path"),
        ("GET /x HTTP/1.1\r\nNo colon here\r\n\r\n", "colon"),
        ("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "Transfer-Encoding"),
        ("POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", "Content-Length"),
        ("POST /x HTTP/1.1\r\nContent-Length: 67108865\r\n\r\n", "64 MiB"),
        ("GET /x?a=%zz HTTP/1.1\r\n\r\n", "percent"),
    ])
    func malformedRequestsGet400WithACloudKitErrorBodyAndAClose(request: String, reasonMentions: String) async throws {
        try await withHTTPServer(echo) { server in
            let (response, rest) = try await offPool { () -> (RawHTTPConnection.Response?, Data) in
                let connection = try RawHTTPConnection(port: server.port)
                connection.send(request)
                return (connection.readResponse(), connection.readUntilClosed())
            }
            let body = try #require(response?.json)
            #expect(response?.status == 400)
            #expect(response?.header("Content-Type") == "application/json; charset=utf-8")
            #expect(body["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect((body["uuid"] as? String)?.isEmpty == false)
            #expect((body["reason"] as? String)?.contains(reasonMentions) == true, "\(body)")
            #expect(Set(body.keys) == ["uuid", "serverErrorCode", "reason"])
            #expect(response?.header("Connection") == "close")
            #expect(rest.isEmpty)
        }
    }

    @Test func headerBlockOver64KiBGets400() async throws {
        try await withHTTPServer(echo) { server in
            let response = try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                var request = "GET /big HTTP/1.1\r\n"
                for index in 0..<700 { request += "X-Filler-\(index): " + String(repeating: "x", count: 100) + "\r\n" }
                connection.send(request + "\r\n")
                return connection.readResponse()
            }
            #expect(response?.status == 400)
            #expect((response?.json?["reason"] as? String)?.contains("64 KiB") == true)
        }
    }

    // MARK: - Peers that go away

    @Test func clientLeavingMidRequestEndsItsConnectionOnly() async throws {
        try await withHTTPServer(echo) { server in
            try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("POST /half HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly some")
                connection.closeNow()
            }
            let idle = try await offPool { server.waitUntilNoConnections(timeout: .seconds(20)) }
            #expect(idle, "the connection's thread ended")
            #expect(server.openConnections == 0)
            let response = try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("GET /after HTTP/1.1\r\n\r\n")
                return connection.readResponse()
            }
            #expect(response?.status == 200)
        }
    }

    @Test func writingToAPeerThatClosedDoesNotKillTheProcess() async throws {
        let clientGone = Gate()
        try await withHTTPServer({ request in
            await clientGone.wait()
            // Big enough that the write cannot fit in the socket buffers of a closed peer.
            return .response(HTTPServerResponse(status: 200, body: Data(count: 8 << 20)))
        }) { server in
            try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("GET /gone HTTP/1.1\r\n\r\n")
                connection.closeNow()
            }
            await clientGone.open()
            let idle = try await offPool { server.waitUntilNoConnections(timeout: .seconds(20)) }
            #expect(idle)
            // Still alive and serving: SIGPIPE would have ended the test process.
            await clientGone.open()
            let response = try await offPool {
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("GET /after HTTP/1.1\r\n\r\n")
                return connection.readResponse()
            }
            #expect(response?.status == 200)
            #expect(response?.body.count == 8 << 20)
        }
    }

    @Test func droppedConnectionWritesThePartialBytesThenCloses() async throws {
        try await withHTTPServer({ _ in .dropConnection(partialBytes: Data("HTTP/1.1 200 OK\r\nContent-Ty".utf8)) }) {
            server in
            let received = try await offPool { () -> Data in
                let connection = try RawHTTPConnection(port: server.port)
                connection.send("POST /lost HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
                return connection.readUntilClosed()
            }
            #expect(String(decoding: received, as: UTF8.self) == "HTTP/1.1 200 OK\r\nContent-Ty")
        }
    }

    // MARK: - Stopping

    @Test func stopWakesTheBlockedAcceptAndEndsEveryThread() async throws {
        let server = try LoopbackHTTPServer()
        server.start(echo)
        let stopped = try await offPool { server.stop(timeout: .seconds(20)) }
        #expect(stopped)
        #expect(try await offPool { server.stop(timeout: .seconds(20)) }, "stopping twice is harmless")
        #expect(server.boundAddress == nil, "the listening socket is closed")
    }

    @Test func stopEndsLongRunningHandlersAndTheirConnections() async throws {
        let started = Gate()
        let server = try LoopbackHTTPServer()
        server.start { _ in
            await started.open()
            // A long poll: only cancellation ends it early.
            try? await Task.sleep(for: .seconds(3_600))
            return .response(HTTPServerResponse(status: 204))
        }
        let clients = (0..<3).map { _ in
            Task {
                try await offPool { () -> Data in
                    let connection = try RawHTTPConnection(port: server.port)
                    connection.send("GET /poll HTTP/1.1\r\n\r\n")
                    return connection.readUntilClosed()
                }
            }
        }
        await started.wait()
        let stopped = try await offPool { server.stop(timeout: .seconds(20)) }
        #expect(stopped, "every connection thread ended, long polls included")
        for client in clients {
            let received = try await client.value
            #expect(!String(decoding: received, as: UTF8.self).hasPrefix("HTTP/1.1 204"), "cut off, not answered")
        }
    }

    @Test func droppingTheServerStopsIt() async throws {
        var server: LoopbackHTTPServer? = try LoopbackHTTPServer()
        server?.start(echo)
        let port = try #require(server?.port)
        server = nil
        // The listener is shut down at once; a new connection is refused or closed unanswered.
        let answer = try await offPool { () -> RawHTTPConnection.Response? in
            guard let connection = try? RawHTTPConnection(port: port, timeoutSeconds: 5) else { return nil }
            connection.send("GET /x HTTP/1.1\r\n\r\n")
            return connection.readResponse()
        }
        #expect(answer == nil)
    }
}

// MARK: - Helpers

/// Answers with a JSON description of the request.
private let echo: LoopbackHTTPServer.Handler = { request in
    let object: [String: Any] = [
        "method": request.method, "path": request.path, "rawQuery": request.rawQuery ?? NSNull(),
        "query": request.queryItems.map { "\($0.name)=\($0.value)" },
        "host": request.header("HOST") ?? NSNull(), "odd": request.header("x-odd-header") ?? NSNull(),
        "body": String(decoding: request.body, as: UTF8.self),
    ]
    let body = (try? JSONSerialization.data(withJSONObject: object)) ?? Data()
    return .response(HTTPServerResponse(status: 200, headers: [("Content-Type", "application/json")], body: body))
}

/// Runs `body` with a started server, and stops it afterwards whatever `body` did.
func withHTTPServer(
    _ handler: @escaping LoopbackHTTPServer.Handler, _ body: (LoopbackHTTPServer) async throws -> Void
) async throws {
    let server = try LoopbackHTTPServer()
    server.start(handler)
    do {
        try await body(server)
    } catch {
        _ = try? await offPool { server.stop() }
        throw error
    }
    let stopped = try await offPool { server.stop() }
    #expect(stopped, "the server's threads ended")
}

/// Opens once; everyone waiting, and everyone who comes later, passes.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }
}

/// Lets its parties through together once all of them arrived (or, as an upper bound, after a timeout).
actor Barrier {
    private let parties: Int
    private var arrived = 0
    private var waiters: [CheckedContinuation<Bool, Never>] = []

    init(parties: Int) { self.parties = parties }

    func arriveAndWait(timeout: Duration) async -> Bool {
        arrived += 1
        if arrived >= parties {
            for waiter in waiters { waiter.resume(returning: true) }
            waiters = []
            return true
        }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            await self?.releaseAll()
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiters.append($0) }
    }

    private func releaseAll() {
        for waiter in waiters { waiter.resume(returning: false) }
        waiters = []
    }
}

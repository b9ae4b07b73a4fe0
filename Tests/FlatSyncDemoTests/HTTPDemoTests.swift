import FlatSync
import FlatSyncCloudKit
import FlatSyncTestSupport
import Foundation
import Testing

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#endif

/// The demo over HTTP, as the README's three-terminal walkthrough runs it: a real `cloud serve` process
/// and devices as separate `flatsync-demo` processes syncing through it.
@Suite struct HTTPDemoTests {
    /// Starts `cloud serve` on `directory` and returns it with its URL.
    private func serve(_ directory: URL, _ extra: [String] = []) async throws -> (BackgroundDemo, String) {
        let server = try BackgroundDemo(["cloud", "serve", "--cloud", directory.path] + extra)
        let line = await server.line { $0.hasPrefix("serving ") }
        guard let url = servedURL(line) else {
            await server.stop()
            throw DemoTestFailure("cloud serve printed no URL:\n\(server.transcript)")
        }
        return (server, url)
    }

    private func run(_ arguments: [String], device: URL, cloud: String) async throws -> DemoProcess.Result {
        try await DemoProcess.run(arguments + ["--device", device.path, "--cloud", cloud])
    }

    @Test func twoDevicesSyncThroughCloudServeAcrossAKilledAndRestartedServer() async throws {
        try await withTemporaryDirectory { root in
            let cloud = root.appendingPathComponent("cloud")
            let a = root.appendingPathComponent("a")
            let b = root.appendingPathComponent("b")
            // On a port no other test can be given while this one's server is down (see `freePort()`).
            var (server, url) = try await serve(cloud, ["--port", "\(try freePort())"])
            do {
                #expect(
                    try await run(["save", "ecb-holds-rates", "--title", "ECB"], device: a, cloud: url).status == 0)
                let first = try await run(["sync", "--json"], device: a, cloud: url)
                #expect(first.status == 0, "\(first)")
                #expect(
                    FileManager.default.fileExists(atPath: a.appendingPathComponent("cloudkit-web-auth-token").path),
                    "the rotated web auth token is kept in the device directory")
                #expect(try await run(["sync"], device: b, cloud: url).status == 0)
                let listed = try await run(["list", "--json"], device: b, cloud: url)
                #expect(listed.stdout.contains("ecb-holds-rates"))

                // The server dies (SIGKILL) between syncs: A's change waits, nothing is lost.
                await server.stop()
                #expect(try await run(["like", "ecb-holds-rates"], device: a, cloud: url).status == 0)
                let offline = try await run(["sync"], device: a, cloud: url)
                #expect(offline.status == 1, "\(offline)")
                #expect(offline.stderr.contains("nothing is lost"), "\(offline)")
                let pending = try await run(["pending", "--json"], device: a, cloud: url)
                #expect(pending.stdout.contains(#""records":1"#), "\(pending)")

                // Started again on the same port and directory: the devices carry on.
                let port = String(url.split(separator: ":").last!)
                (server, url) = try await serve(cloud, ["--port", port])
                #expect(try await run(["sync"], device: a, cloud: url).status == 0)
                #expect(try await run(["sync"], device: b, cloud: url).status == 0)
                let history = try await run(["history", "--json"], device: b, cloud: url)
                #expect(history.stdout.contains(#""liked":true"#), "\(history)")

                // The cloud commands work on the URL (the emulator's administration endpoint) and the
                // directory alike, and agree.
                let overHTTP = try await DemoProcess.run(["cloud", "stats", "--json", "--cloud", url])
                let onDisk = try await DemoProcess.run(["cloud", "stats", "--json", "--cloud", cloud.path])
                #expect(overHTTP.status == 0 && overHTTP.stdout == onDisk.stdout, "\(overHTTP)\n\(onDisk)")
                #expect(
                    try await DemoProcess.run(["cloud", "expire-tokens", "--cloud", url]).status == 0)
                let reset = try await run(["sync", "--json"], device: b, cloud: url)
                #expect(reset.stdout.contains("tokenExpired"), "\(reset)")

                // Ctrl-C stops the server cleanly.
                server.signal(SIGINT)
                #expect(await server.waitForExit() == 0, "\(server.transcript)")
                #expect(await server.line { $0.hasPrefix("stopped") } != nil)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    @Test func watchOnBPrintsTheChangeASyncedWithoutTyping() async throws {
        try await withTemporaryDirectory { root in
            let a = root.appendingPathComponent("a")
            let b = root.appendingPathComponent("b")
            // A short hold: keepalives (and the quiet fetches after them) come every two seconds.
            let (server, url) = try await serve(root.appendingPathComponent("cloud"), ["--courier-hold", "2"])
            let watcher = try BackgroundDemo(["watch", "--device", b.path, "--cloud", url])
            do {
                #expect(await watcher.line { $0.hasPrefix("watching ") } != nil, "\(watcher.transcript)")
                #expect(try await run(["save", "night-trains"], device: a, cloud: url).status == 0)
                #expect(try await run(["sync"], device: a, cloud: url).status == 0)
                // Pushed through the zone subscription the devices made, or, if A synced before B's push token
                // was registered, fetched by the catch-up that follows the registration.
                let arrived = await watcher.line { $0.contains("ReadingList changed: fetched 1, deleted 0, sent 0 (") }
                #expect(arrived != nil, "\(watcher.transcript)")
                #expect(
                    !watcher.transcript.contains("changed: fetched 0, deleted 0"),
                    "fetches that found nothing stay quiet: \(watcher.transcript)")
                // watch holds the device only while it syncs: other commands work meanwhile.
                let listed = try await run(["list", "--json"], device: b, cloud: url)
                #expect(listed.status == 0 && listed.stdout.contains("night-trains"), "\(listed)")
                watcher.signal(SIGINT)
                #expect(await watcher.waitForExit() == 0, "\(watcher.transcript)")
            } catch {
                await watcher.stop()
                await server.stop()
                throw error
            }
            await watcher.stop()
            await server.stop()
        }
    }

    @Test func cloudLoginTakesThePastedTokenAndTheDeviceThenSyncs() async throws {
        try await withTemporaryDirectory { root in
            let device = root.appendingPathComponent("a")
            let (server, url) = try await serve(root.appendingPathComponent("cloud"), ["--require-sign-in"])
            do {
                let refused = try await run(["sync"], device: device, cloud: url)
                #expect(refused.status == 1)
                #expect(refused.stderr.contains("cloud login"), "\(refused)")

                let login = try BackgroundDemo(["cloud", "login", "--device", device.path, "--cloud", url])
                let page = try #require(await login.line { $0.contains("/_auth/signin") }, "\(login.transcript)")
                let signIn = try await URLSessionExchange.shared.send(
                    HTTPExchangeRequest(
                        method: "GET", url: URL(string: page.trimmingCharacters(in: .whitespaces))!,
                        timeout: .seconds(30)))
                login.type(String(decoding: signIn.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
                #expect(await login.waitForExit() == 0, "\(login.transcript)")
                #expect(await login.line { $0.hasPrefix("signed in as ") } != nil)

                #expect(try await run(["save", "x"], device: device, cloud: url).status == 0)
                let synced = try await run(["sync"], device: device, cloud: url)
                #expect(synced.status == 0, "\(synced)")
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }

    @Test func cloudLoginTakesTheTokenOnItsLocalhostCallback() async throws {
        try await withTemporaryDirectory { root in
            let device = root.appendingPathComponent("a")
            let callbackPort = try freePort()
            let callback = "http://127.0.0.1:\(callbackPort)/"
            let (server, url) = try await serve(
                root.appendingPathComponent("cloud"), ["--require-sign-in", "--sign-in-callback", callback])
            do {
                let login = try BackgroundDemo([
                    "cloud", "login", "--device", device.path, "--cloud", url, "--callback-port", "\(callbackPort)",
                    "--json",
                ])
                let page = try #require(await login.line { $0.contains("/_auth/signin") }, "\(login.transcript)")
                // The browser's part: open the page, which redirects to the callback with the token.
                let landed = try await URLSessionExchange.shared.send(
                    HTTPExchangeRequest(
                        method: "GET", url: URL(string: page.trimmingCharacters(in: .whitespaces))!,
                        timeout: .seconds(30)))
                #expect(landed.status == 200)
                #expect(await login.waitForExit() == 0, "\(login.transcript)")
                #expect(await login.line { $0.contains(#""signedIn":true"#) } != nil, "\(login.transcript)")
                #expect(try await run(["sync"], device: device, cloud: url).status == 0)
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
    }
}

struct DemoTestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A port on 127.0.0.1 that nothing is bound to now, below the ports the kernel hands out by itself
/// (Linux's ephemeral range starts at 32768, Darwin's at 49152).
///
/// A test that frees a port and binds it again later (a server killed and restarted on the same port, a
/// callback port chosen before the process that listens on it starts) must not lose it meanwhile to the
/// other tests running in parallel: a port the kernel picked for a client connection or a `bind` to port
/// 0 could be picked again for theirs, one below that range never is.
func freePort() throws -> UInt16 {
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<200 {
        let port = UInt16.random(in: 20_000..<32_768, using: &generator)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { break }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        if bound { return port }
    }
    throw DemoTestFailure("no free port below 32768: \(String(cString: strerror(errno)))")
}

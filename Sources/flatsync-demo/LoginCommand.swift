import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Synchronization

/// `cloud login`: CloudKit Web Services' documented sign-in for one device. Ask `users/current`; when the
/// server answers 421 with a sign-in URL, print it and wait for the web auth token the sign-in hands back
/// (pasted on standard input); store it in the device directory, and check it with `users/current` again.
struct LoginCommand {
    let device: URL
    let connection: CloudConnection
    let callbackPort: UInt16?
    let output: Output

    /// `{"userRecordName": String, "signedIn": Bool}`: `signedIn` is false when the device already was.
    struct Report: Encodable {
        var userRecordName: String
        var signedIn: Bool
    }

    func run() async throws -> Demo.ExitStatus {
        guard case .service(let endpoint) = connection.location else {
            preconditionFailure("the parser lets cloud login take a URL cloud only")
        }
        // Holding the device directory (and creating it on first use) while its token changes.
        let store = try await DeviceDirectory.open { () throws -> LocalStore in
            try LocalStore(
                directory: device, options: LocalStore.Options(durability: .fsync, recordTypes: ArticleNote.registered))
        }
        do {
            let status = try await signIn(endpoint: endpoint)
            try await store.close()
            return status
        } catch {
            try? await store.close()
            throw error
        }
    }

    private func signIn(endpoint: URL) async throws -> Demo.ExitStatus {
        let transport = try connection.serviceTransport(endpoint: endpoint, device: device)
        let signInPage: URL
        do {
            let user = try await transport.currentUser()
            try output.emit(Report(userRecordName: user.userRecordName, signedIn: false)) {
                "already signed in as \(user.userRecordName); nothing to do"
            }
            return .success
        } catch let error as CloudError where error.code == .notAuthenticated {
            guard let url = error.redirectURL else {
                throw DemoFailure(
                    "\(endpoint.absoluteString) refused the sign-in (\(error.message)) and named no sign-in page; "
                        + "check the API token and container")
            }
            signInPage = url
        }
        output.console.error("open this page to sign in:\n  \(signInPage.absoluteString)")
        if let callbackPort {
            output.console.error(
                "waiting for the token at http://127.0.0.1:\(callbackPort)/ (the API token's sign-in callback), "
                    + "or paste it here and press return:")
        } else {
            output.console.error("then paste the web auth token it hands back, and press return:")
        }
        guard let token = try await TokenArrival.wait(callbackPort: callbackPort), !token.isEmpty else {
            throw DemoFailure("no web auth token was given; run cloud login again")
        }
        try await transport.signIn(withWebAuthToken: token)
        let user: CloudKitWebServicesTransport.User
        do {
            user = try await transport.currentUser()
        } catch let error as CloudError where error.code == .notAuthenticated {
            throw DemoFailure("the server did not accept that web auth token (\(error.message)); run cloud login again")
        }
        try output.emit(Report(userRecordName: user.userRecordName, signedIn: true)) {
            "signed in as \(user.userRecordName); the token is kept in \(device.path)"
        }
        return .success
    }

}

/// The web auth token coming back from the sign-in page: pasted on standard input, or (with a callback
/// port) delivered to `http://127.0.0.1:PORT/?ckWebAuthToken=…`, whichever comes first.
enum TokenArrival {
    static func wait(callbackPort: UInt16?) async throws -> String? {
        let first = Mutex<CheckedContinuation<String?, Never>?>(nil)
        let arrived = Mutex<String??>(nil)
        // Whoever comes first resumes the wait; a token that comes before the wait starts is kept for it.
        @Sendable func deliver(_ token: String?) {
            let isFirst = arrived.withLock { arrived -> Bool in
                guard arrived == nil else { return false }
                arrived = .some(token)
                return true
            }
            if isFirst { first.withLock { $0.take() }?.resume(returning: token) }
        }
        var server: LoopbackHTTPServer?
        if let callbackPort {
            do {
                server = try LoopbackHTTPServer(port: callbackPort)
            } catch {
                throw DemoFailure("could not listen for the sign-in callback on 127.0.0.1:\(callbackPort): \(error)")
            }
            server?.start { request in
                guard let token = request.queryValue("ckWebAuthToken"), !token.isEmpty else {
                    return .response(
                        HTTPServerResponse(status: 400, body: Data("No ckWebAuthToken in this request.\n".utf8)))
                }
                deliver(token)
                // Closing the connection after this page lets the command stop the listener once it is sent.
                return .response(
                    HTTPServerResponse(
                        status: 200, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Connection", "close")],
                        body: Data("Signed in to FlatSync's demo; you can close this page.\n".utf8)))
            }
        }
        // Standard input is read on a thread of its own: a read that never ends must not hold anything else.
        Thread.detachNewThread {
            deliver(Swift.readLine()?.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let token = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            let already = arrived.withLock { arrived -> String?? in
                if arrived == nil { first.withLock { $0 = continuation } }
                return arrived
            }
            if let already { continuation.resume(returning: already) }
        }
        if let server {
            let stopping = server
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    // Let the browser get its page before the listener goes away.
                    _ = stopping.waitUntilNoConnections(timeout: .seconds(5))
                    stopping.stop()
                    continuation.resume()
                }
            }
        }
        return token
    }
}

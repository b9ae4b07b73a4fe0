import FlatSync
import Foundation

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
            try LocalStore(directory: device, options: LocalStore.Options(durability: .fsync))
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
        output.console.error("then paste the web auth token it hands back, and press return:")
        guard let token = await Self.readLine(), !token.isEmpty else {
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

    /// One line of standard input, trimmed, read off the concurrency pool; `nil` at end of input.
    private static func readLine() async -> String? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Swift.readLine()?.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
    }
}

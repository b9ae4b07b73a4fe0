import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Testing

@MainActor final class MainActorModel {
    var seen: [String] = []
}

/// `withServer` from a main-actor test that touches its own state in the body, as an app's model tests do.
@MainActor @Suite struct Review51WithServerMainActorTests {
@Test func withServerFromTheMainActor() async throws {
    let model = MainActorModel()
    let url = try await CloudKitWebServicesServer.withServer { server in
        model.seen.append(server.baseURL.absoluteString)
        return server.baseURL
    }
    #expect(model.seen == [url.absoluteString])
}
}

/// The doc comment's sample, verbatim.
@Test func withServerDocSample() async throws {
    try await CloudKitWebServicesServer.withServer(options: .init(requireWebAuthToken: true)) { server in
        let transport = CloudKitWebServicesTransport(configuration: .init(
            containerID: "iCloud.com.example.app", environment: .development, apiToken: "any",
            tokenStore: InMemoryWebAuthTokenStore(token: server.signInToken()), baseURL: server.baseURL))
        _ = try await transport.currentUser()
    }
}

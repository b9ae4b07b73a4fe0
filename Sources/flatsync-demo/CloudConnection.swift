import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation

/// How the demo reaches the cloud at `--cloud`: a `DirectoryCloud` directory, or a CloudKit Web Services
/// endpoint through ``CloudKitWebServicesTransport``.
struct CloudConnection {
    /// The account every device signs in to on a directory cloud.
    static let directoryAccount = "demo-user"

    let location: CloudLocation
    let service: ServiceSettings

    /// The transport to the endpoint for the device at `device`, whose directory keeps the web auth token.
    /// Loopback endpoints (`cloud serve`) take any API token; another host needs `$FLATSYNC_CK_API_TOKEN`.
    func serviceTransport(endpoint: URL, device: URL) throws -> CloudKitWebServicesTransport {
        let isLoopback = ["127.0.0.1", "localhost", "::1", "[::1]"].contains(endpoint.host ?? "")
        guard let apiToken = service.apiToken ?? (isLoopback ? ServiceSettings.emulatorAPIToken : nil) else {
            throw DemoFailure(
                "\(endpoint.absoluteString) needs the container's API token: set FLATSYNC_CK_API_TOKEN (CloudKit "
                    + "Dashboard → API Access → API Tokens)")
        }
        return CloudKitWebServicesTransport(
            configuration: .init(
                containerID: service.container, environment: service.environment, apiToken: apiToken,
                tokenStore: DirectoryWebAuthTokenStore(directory: device), baseURL: endpoint,
                requestTimeout: .seconds(30)))
    }

    /// The account the device at `device` syncs: `demo-user` on a directory; the signed-in user of an
    /// endpoint, as `users/current` names them.
    func account(device: URL) async throws -> CloudAccount {
        switch location {
        case .directory(let directory):
            return CloudAccount(id: Self.directoryAccount, transport: try DirectoryCloud(directory: directory))
        case .service(let endpoint):
            let transport = try serviceTransport(endpoint: endpoint, device: device)
            do {
                let user = try await transport.currentUser()
                return CloudAccount(id: user.userRecordName, transport: transport)
            } catch let error as CloudError where error.code == .notAuthenticated {
                throw DemoFailure(
                    "nobody is signed in to \(service.container) at \(endpoint.absoluteString) on this device; run "
                        + "`flatsync-demo cloud login --cloud \(endpoint.absoluteString)`"
                        + (error.redirectURL.map { " (sign-in page: \($0.absoluteString))" } ?? ""))
            }
        }
    }
}

import FlatSync
import FlatSyncTesting
import Foundation

/// `cloud serve`: the cloud directory served over localhost HTTP as CloudKit Web Services, until Ctrl-C.
///
/// The directory stays the cloud's state (a `DirectoryCloud`), so the server can stop and start again
/// and devices carry on; `cloud` commands work on the directory or on the URL alike.
struct ServeCommand {
    let directory: URL
    let port: UInt16?
    let options: ServeOptions
    let console: Console

    func run() async throws -> Demo.ExitStatus {
        let cloud = try DirectoryCloud(directory: directory)
        let console = self.console
        let schema = try productionSchema()
        // The environment is the server's, not the directory's: a server started without the option is a
        // development one again.
        try await cloud.setProductionSchema(schema)
        var serverOptions = CloudKitWebServicesServer.Options(port: port ?? 0)
        serverOptions.requireWebAuthToken = options.requireSignIn
        serverOptions.guessedErrorCodes = options.guessedErrorCodes
        serverOptions.signInCallbackURL = options.signInCallback
        if let seconds = options.courierHoldSeconds { serverOptions.courierHoldTime = .seconds(seconds) }
        if options.verbose {
            serverOptions.requestLog = { line in console.error(line) }
        }
        let server = try CloudKitWebServicesServer(backing: cloud, options: serverOptions)
        let url = server.baseURL.absoluteString
        console.out("serving \(directory.path) as CloudKit Web Services at \(url)")
        if let schema {
            console.out(
                "  a production container: saves outside its schema (\(schema.recordTypes.count) record types) are refused"
            )
        }
        console.out("  devices: flatsync-demo sync --cloud \(url)   (or watch, to hear of changes at once)")
        console.out("  Ctrl-C stops the server; the directory keeps the cloud")
        let signal = await Interrupts.wait()
        await server.stop()
        console.out("stopped (\(signal == SIGINT ? "interrupted" : "terminated")); \(directory.path) keeps the cloud")
        return .success
    }

    /// The schema `--production-schema` names, or nil for a development server.
    private func productionSchema() throws -> CloudSchema? {
        switch options.productionSchema {
        case nil: return nil
        case .declared: return ArticleNote.schema
        case .file(let path):
            let url = URL(fileURLWithPath: path)
            let data: Data
            do {
                data = try Data(contentsOf: url)
            } catch {
                throw DemoFailure("cloud serve could not read the schema \(url.path): \(error.localizedDescription)")
            }
            do {
                return try CloudSchema(json: data)
            } catch {
                throw DemoFailure("cloud serve could not use the schema \(url.path): \(error.message)")
            }
        }
    }
}

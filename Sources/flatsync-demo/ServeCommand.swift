import FlatSync
import Foundation

/// `cloud serve`: the cloud directory served over localhost HTTP as CloudKit Web Services.
struct ServeCommand {
    let directory: URL
    let port: UInt16?
    let options: ServeOptions
    let console: Console

    func run() async throws -> Demo.ExitStatus {
        throw DemoFailure("cloud serve is not available yet")
    }
}

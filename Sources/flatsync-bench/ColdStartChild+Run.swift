import FlatSyncBenchHost
import Foundation

extension ColdStartChild {
    /// Which process does the cold start.
    enum Host: CaseIterable {
        /// `flatsync-bench-host`, which links FlatSync only: a host with its own transport.
        case flatSyncOnly
        /// `flatsync-bench` itself, which also links FlatSyncCloudKit and so FoundationNetworking.
        case withCloudKitTransport
    }

    /// `flatsync-bench-host` beside this executable (SwiftPM builds it with the benchmark), or nil.
    static var hostExecutable: URL? {
        let url = currentExecutable().deletingLastPathComponent().appendingPathComponent("flatsync-bench-host")
        return FileManager.default.isExecutableFile(atPath: url.path) ? url : nil
    }

    /// In the parent: runs the child on `directory` and reads its line.
    static func run(directory: URL, host: Host) throws -> Output {
        let text: String
        switch host {
        case .flatSyncOnly:
            guard let executable = hostExecutable else { throw BenchError("flatsync-bench-host is not built") }
            text = try runChild(executable, [directory.path])
        case .withCloudKitTransport:
            text = try runChild(currentExecutable(), [argument, directory.path])
        }
        guard let line = text.split(separator: "\n").last,
            let output = try? JSONDecoder().decode(Output.self, from: Data(line.utf8))
        else { throw BenchError("the cold-start child printed \(text.debugDescription)") }
        return output
    }
}

import FlatSyncBenchHost
import Foundation

// `flatsync-bench-host DIR`: the smallest host of FlatSync — it links the library and nothing else — which
// `flatsync-bench` starts to measure the memory of a cold start and of an open store (DESIGN §10).

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 1, let directory = arguments.first else {
    FileHandle.standardError.write(Data("usage: flatsync-bench-host DEVICE-DIRECTORY\n".utf8))
    exit(2)
}
do {
    try await ColdStartChild.main(directory: directory)
} catch {
    FileHandle.standardError.write(Data("flatsync-bench-host: \(error)\n".utf8))
    exit(1)
}

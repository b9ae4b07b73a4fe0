import FlatSyncBenchHost
#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// `flatsync-bench-host DIR`: the smallest host of FlatSync — it links the library and nothing else — which
// `flatsync-bench` starts to measure the memory of a cold start and of an open store (the Memory row of the
// Performance article, Sources/FlatSync/FlatSync.docc/Performance.md).

/// Writes a line to standard error (without Foundation's `FileHandle`, which this host does not link).
func printError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 1, let directory = arguments.first else {
    printError("usage: flatsync-bench-host DEVICE-DIRECTORY")
    exit(2)
}
do {
    try await ColdStartChild.main(directory: directory)
} catch {
    printError("flatsync-bench-host: \(error)")
    exit(1)
}

import Foundation
import Testing

/// The `flatsync-test-child` executable, built next to the test runner.
///
/// Found by walking up from the runner's own path (and, on Darwin, from the test bundle) until a
/// directory holds it, since the runner lives at different depths on different platforms.
func testChildExecutable(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
    var starts = [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()]
    if let executable = Bundle.main.executableURL { starts.append(executable) }
    starts += Bundle.allBundles.map(\.bundleURL)
    for start in starts {
        var directory = start.deletingLastPathComponent()
        while directory.path != "/" && !directory.path.isEmpty {
            let candidate = directory.appendingPathComponent("flatsync-test-child")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
    }
    throw TestChildNotFound(searchedFrom: starts.map(\.path))
}

struct TestChildNotFound: Error, CustomStringConvertible {
    var searchedFrom: [String]
    var description: String { "flatsync-test-child not found above \(searchedFrom)" }
}

/// A started child process whose exit can be awaited without blocking a thread.
struct ChildProcess {
    let process: Process
    let standardError: URL
    private let exit: AsyncStream<Int32>

    /// Starts `flatsync-test-child` with `arguments`, sending its standard error to a file in `directory`.
    init(_ arguments: [String], errorsIn directory: URL) throws {
        process = Process()
        process.executableURL = try testChildExecutable()
        process.arguments = arguments
        standardError = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: standardError.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: standardError)
        process.standardOutput = FileHandle.nullDevice
        let (stream, continuation) = AsyncStream.makeStream(of: Int32.self)
        exit = stream
        process.terminationHandler = { finished in
            continuation.yield(finished.terminationStatus)
            continuation.finish()
        }
        try process.run()
    }

    /// Waits for the child to exit and returns its status and what it wrote to standard error.
    func waitForExit() async -> (status: Int32, errors: String) {
        var status: Int32 = -1
        for await value in exit { status = value }
        let errors = (try? String(contentsOf: standardError, encoding: .utf8)) ?? ""
        return (status, errors)
    }
}

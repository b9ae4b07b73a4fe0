import FlatSyncTestSupport
import Foundation

/// A started child process whose exit can be awaited without blocking a thread.
struct ChildProcess {
    let process: Process
    let standardError: URL
    private let exit: AsyncStream<Int32>

    /// Starts `flatsync-test-child` with `arguments`, sending its standard error to a file in `directory`.
    init(_ arguments: [String], errorsIn directory: URL) throws {
        process = Process()
        process.executableURL = try BuildProduct.url(named: "flatsync-test-child", override: "FLATSYNC_TEST_CHILD")
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

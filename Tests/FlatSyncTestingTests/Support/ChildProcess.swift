import FlatSyncTestSupport
import Foundation

/// A started child process whose exit can be awaited without blocking a thread.
struct ChildProcess {
    let process: SpawnedProcess
    let standardError: URL

    /// Starts `flatsync-test-child` with `arguments`, sending its standard error to a file in `directory`.
    init(_ arguments: [String], errorsIn directory: URL) throws {
        standardError = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: standardError.path, contents: nil)
        let errors = try FileHandle(forWritingTo: standardError)
        defer { try? errors.close() }
        process = try SpawnedProcess(
            try BuildProduct.url(named: "flatsync-test-child", override: "FLATSYNC_TEST_CHILD"),
            arguments: arguments, input: .nullDevice, output: .nullDevice, error: .fileDescriptor(errors.fileDescriptor)
        )
    }

    /// Waits for the child to exit and returns its status and what it wrote to standard error.
    func waitForExit() async -> (status: Int32, errors: String) {
        let exit = await process.waitForExit()
        let errors = (try? String(contentsOf: standardError, encoding: .utf8)) ?? ""
        return (exit.status, errors)
    }
}

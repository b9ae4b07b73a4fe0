import FlatSyncTestSupport
import Foundation
import Testing

/// The built `flatsync-demo`, run as a separate process with its output captured: each call is one
/// command of one device, as a person would type it.
///
/// ```swift
/// let result = try await DemoProcess.run(["save", "x", "--device", a.path, "--cloud", cloud.path])
/// #expect(result.status == 0)
/// ```
///
/// The child gets this process's environment without `FLATSYNC_DEVICE` and `FLATSYNC_CLOUD`, plus
/// `environment`. Blocking reads and waits run on Dispatch threads, never on the cooperative pool.
enum DemoProcess {
    /// How a run ended and what it printed.
    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String

        /// Standard output's lines, without the empty one after the last newline.
        var lines: [String] {
            stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast(
                stdout.hasSuffix("\n") ? 1 : 0)
        }

        /// Standard output parsed as one JSON value.
        func json(sourceLocation: SourceLocation = #_sourceLocation) throws -> Any {
            do {
                return try JSONSerialization.jsonObject(with: Data(stdout.utf8), options: [.fragmentsAllowed])
            } catch {
                Issue.record("stdout is not one JSON value: \(stdout)", sourceLocation: sourceLocation)
                throw error
            }
        }

        var description: String { "exit \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
    }

    static func run(
        _ arguments: [String],
        environment: [String: String] = [:],
        currentDirectory: URL? = nil
    ) async throws -> Result {
        var inherited = ProcessInfo.processInfo.environment
        for name in ["FLATSYNC_DEVICE", "FLATSYNC_CLOUD", "FLATSYNC_SAMPLE_DATA"] { inherited[name] = nil }
        let child = try SpawnedProcess(
            try executableURL(), arguments: arguments, environment: inherited.merging(environment) { $1 },
            currentDirectory: currentDirectory, input: .nullDevice, output: .pipe, error: .pipe)
        // Read both pipes while the child runs, so a child printing more than a pipe holds never blocks.
        async let stdout = readToEnd(child.standardOutput!)
        async let stderr = readToEnd(child.standardError!)
        let status = await child.waitForExit().status
        return Result(status: status, stdout: await stdout, stderr: await stderr)
    }

    private static func readToEnd(_ handle: FileHandle) async -> String {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let data = (try? handle.readToEnd()) ?? Data()
                continuation.resume(returning: String(decoding: data, as: UTF8.self))
            }
        }
    }

    /// The `flatsync-demo` executable; `FLATSYNC_DEMO` overrides the search.
    static func executableURL(named name: String = "flatsync-demo") throws -> URL {
        try BuildProduct.url(named: name, override: "FLATSYNC_DEMO")
    }
}

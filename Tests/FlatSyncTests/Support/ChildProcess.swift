import FlatSyncTestSupport
import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A running `flatsync-test-child` process with pipes to its standard input and output, for tests of what
/// survives a real process death and what two processes do to shared files.
///
/// ```swift
/// let child = try ChildProcess(["hold-lock", directory.path])
/// #expect(await child.readLine() == "locked")
/// child.kill()
/// _ = await child.waitForExit()
/// ```
///
/// The child is killed with `SIGKILL` if the test forgets it. Waiting never blocks a thread of the
/// cooperative pool: blocking reads run on Dispatch threads.
final class ChildProcess {
    /// How a child ended.
    typealias Exit = SpawnedProcess.Exit

    private let child: SpawnedProcess

    /// The child's process ID.
    var processIdentifier: Int32 { child.processIdentifier }

    /// Starts `flatsync-test-child` with `arguments`. Its standard error goes to the test's.
    init(_ arguments: [String]) throws {
        child = try SpawnedProcess(
            try Self.executableURL(), arguments: arguments, input: .pipe, output: .pipe, error: .inherit)
    }

    deinit {
        child.signal(SIGKILL)
    }

    /// The next line the child printed on standard output, without its newline; nil at end of file.
    func readLine() async -> String? {
        let fd = child.standardOutput!.fileDescriptor
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var line: [UInt8] = []
                var byte: UInt8 = 0
                while true {
                    let count = read(fd, &byte, 1)
                    if count < 0 && errno == EINTR { continue }
                    if count <= 0 {
                        continuation.resume(returning: line.isEmpty ? nil : String(decoding: line, as: UTF8.self))
                        return
                    }
                    if byte == UInt8(ascii: "\n") {
                        continuation.resume(returning: String(decoding: line, as: UTF8.self))
                        return
                    }
                    line.append(byte)
                }
            }
        }
    }

    /// Closes the child's standard input, so that a child reading it sees end of file.
    func closeInput() {
        try? child.standardInput!.close()
    }

    /// Sends `signal` (by default `SIGKILL`) to the child.
    func kill(_ signal: Int32 = SIGKILL) {
        child.signal(signal)
    }

    /// Waits until the child has ended and returns how.
    func waitForExit() async -> Exit {
        await child.waitForExit()
    }

    /// The `flatsync-test-child` executable; `FLATSYNC_TEST_CHILD` overrides the search.
    static func executableURL() throws -> URL {
        try BuildProduct.url(named: "flatsync-test-child", override: "FLATSYNC_TEST_CHILD")
    }
}

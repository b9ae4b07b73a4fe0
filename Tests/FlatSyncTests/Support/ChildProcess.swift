import FlatSyncTestSupport
import Foundation
import Synchronization

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
    struct Exit: Equatable, Sendable {
        /// The exit status, or the signal number when `signaled`.
        var status: Int32
        /// True when a signal ended the process.
        var signaled: Bool
    }

    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let exit = ExitState()

    /// The child's process ID.
    var processIdentifier: Int32 { process.processIdentifier }

    /// Starts `flatsync-test-child` with `arguments`. Its standard error goes to the test's.
    init(_ arguments: [String]) throws {
        process.executableURL = try Self.executableURL()
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        let exit = self.exit
        process.terminationHandler = { process in
            exit.finish(Exit(status: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal))
        }
        try process.run()
    }

    deinit {
        if process.isRunning { sendSignal(SIGKILL, to: process.processIdentifier) }
    }

    /// The next line the child printed on standard output, without its newline; nil at end of file.
    func readLine() async -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
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
        try? input.fileHandleForWriting.close()
    }

    /// Sends `signal` (by default `SIGKILL`) to the child.
    func kill(_ signal: Int32 = SIGKILL) {
        sendSignal(signal, to: process.processIdentifier)
    }

    /// Waits until the child has ended and returns how.
    func waitForExit() async -> Exit {
        await exit.wait()
    }

    /// The `flatsync-test-child` executable; `FLATSYNC_TEST_CHILD` overrides the search.
    static func executableURL() throws -> URL {
        try BuildProduct.url(named: "flatsync-test-child", override: "FLATSYNC_TEST_CHILD")
    }
}

/// `kill(2)`, under a name that `ChildProcess.kill(_:)` does not shadow.
private func sendSignal(_ signal: Int32, to process: pid_t) {
    _ = kill(process, signal)
}

/// The child's exit, reported once by `Process.terminationHandler`, possibly before anyone waits.
private final class ExitState: Sendable {
    private let state = Mutex<(exit: ChildProcess.Exit?, waiters: [CheckedContinuation<ChildProcess.Exit, Never>])>(
        (nil, [])
    )

    func finish(_ exit: ChildProcess.Exit) {
        let waiters = state.withLock { state in
            state.exit = exit
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: exit) }
    }

    func wait() async -> ChildProcess.Exit {
        await withCheckedContinuation { continuation in
            let exit = state.withLock { state in
                if state.exit == nil { state.waiters.append(continuation) }
                return state.exit
            }
            if let exit { continuation.resume(returning: exit) }
        }
    }
}

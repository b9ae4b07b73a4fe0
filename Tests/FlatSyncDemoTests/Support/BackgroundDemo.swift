import FlatSyncTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#endif

/// A `flatsync-demo` that keeps running (`cloud serve`, `watch`, `cloud login`): its output lines as they
/// come, a way to type on its standard input, to signal it and to wait for it to exit.
///
/// Output is read on threads of its own, never on the concurrency pool. Every wait for a line has an upper
/// bound, so a process that never prints fails the test instead of hanging it.
final class BackgroundDemo: Sendable {
    private let process: SpawnedProcess
    private let lines = Mutex<(out: [String], error: [String], waiters: [Waiter])>(([], [], []))

    private struct Waiter {
        var matches: @Sendable (String) -> Bool
        var continuation: CheckedContinuation<String?, Never>
    }

    init(_ arguments: [String]) throws {
        var environment = ProcessInfo.processInfo.environment
        for name in ["FLATSYNC_DEVICE", "FLATSYNC_CLOUD"] { environment[name] = nil }
        process = try SpawnedProcess(
            try DemoProcess.executableURL(), arguments: arguments, environment: environment, input: .pipe,
            output: .pipe, error: .pipe)
        read(process.standardOutput!, isError: false)
        read(process.standardError!, isError: true)
    }

    deinit {
        process.signal(SIGTERM)
    }

    /// Every line printed so far, standard output then standard error.
    var transcript: String {
        lines.withLock { ($0.out + ["--- stderr"] + $0.error).joined(separator: "\n") }
    }

    /// The first line (on standard output or error) that `matches`, waiting for it up to `limit`.
    func line(within limit: Duration = .seconds(60), where matches: @escaping @Sendable (String) -> Bool) async
        -> String?
    {
        let deadline = Task {
            try await Task.sleep(for: limit)
            self.giveUp()
        }
        defer { deadline.cancel() }
        return await withCheckedContinuation { continuation in
            let found = lines.withLock { state -> String?? in
                if let line = (state.out + state.error).first(where: matches) { return .some(line) }
                state.waiters.append(Waiter(matches: matches, continuation: continuation))
                return nil
            }
            if let found { continuation.resume(returning: found) }
        }
    }

    /// Types `text` and a newline on the process's standard input.
    func type(_ text: String) {
        process.standardInput!.write(Data((text + "\n").utf8))
    }

    func signal(_ number: Int32) {
        process.signal(number)
    }

    /// Waits for the process to exit and returns its status.
    func waitForExit() async -> Int32 {
        await process.waitForExit().status
    }

    /// Stops the process (SIGKILL) if it still runs, and waits for it.
    func stop() async {
        signal(SIGKILL)
        _ = await waitForExit()
    }

    private func giveUp() {
        let waiters = lines.withLock { state -> [Waiter] in
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: nil) }
    }

    private func read(_ handle: FileHandle, isError: Bool) {
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let newline = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    let ready = self.lines.withLock { state -> [(Waiter, String)] in
                        if isError { state.error.append(line) } else { state.out.append(line) }
                        var ready: [(Waiter, String)] = []
                        state.waiters.removeAll { waiter in
                            guard waiter.matches(line) else { return false }
                            ready.append((waiter, line))
                            return true
                        }
                        return ready
                    }
                    for (waiter, line) in ready { waiter.continuation.resume(returning: line) }
                }
            }
        }
    }
}

/// The URL `cloud serve` printed.
func servedURL(_ line: String?) -> String? {
    guard let line, let range = line.range(of: #"http://127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else {
        return nil
    }
    return String(line[range])
}

import Foundation
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A child process started with `posix_spawn`, for the tests that run FlatSync's executables.
///
/// Not Foundation's `Process`: on Linux, swift-corelibs-foundation's `Process.run()` (Swift 6.3.1) copies a
/// whole 256-byte `d_name` out of each `/proc/self/fd` entry and now and then reads past glibc's buffer into an
/// unmapped page, crashing the whole test run (swiftlang/swift-corelibs-foundation#5472, fixed after 6.3.1;
/// seen here once in a full `swift test`). This does what `Process` did for the tests and no more: the child
/// gets a process group of its own and none of the parent's descriptors beyond the three it is given.
///
/// ```swift
/// let child = try SpawnedProcess(executable, arguments: ["list"], output: .pipe)
/// let text = try child.standardOutput!.readToEnd()
/// let exit = await child.waitForExit()
/// ```
///
/// A thread of its own waits for the child (`waitpid`), so waiting never blocks the cooperative pool.
public final class SpawnedProcess: Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// The parent's own stream.
        case inherit
        /// `/dev/null`.
        case nullDevice
        /// A new pipe; the parent's end is ``standardInput``, ``standardOutput`` or ``standardError``.
        case pipe
        /// An open descriptor of the parent's (which stays the caller's to close).
        case fileDescriptor(Int32)
        /// Standard error only: wherever standard output goes.
        case sameAsOutput
    }

    /// How a child ended.
    public struct Exit: Equatable, Sendable, CustomStringConvertible {
        /// The exit status, or the signal number when ``signaled``.
        public var status: Int32
        /// True when a signal ended the process.
        public var signaled: Bool

        public init(status: Int32, signaled: Bool) {
            self.status = status
            self.signaled = signaled
        }

        public var description: String { signaled ? "signal \(status)" : "exit \(status)" }
    }

    /// Why a child could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The child's process ID.
    public let processIdentifier: pid_t
    /// The parent's end of the child's standard input, when it is a ``Stream/pipe``.
    public let standardInput: FileHandle?
    /// The parent's end of the child's standard output, when it is a ``Stream/pipe``.
    public let standardOutput: FileHandle?
    /// The parent's end of the child's standard error, when it is a ``Stream/pipe``.
    public let standardError: FileHandle?

    private let state = Mutex<(exit: Exit?, waiters: [CheckedContinuation<Exit, Never>])>((nil, []))
    private let exited = DispatchGroup()

    /// Starts `executable` with `arguments` (not counting the program name), in `environment` (the
    /// parent's when `nil`) and `currentDirectory` (the parent's when `nil`).
    public init(
        _ executable: URL,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        currentDirectory: URL? = nil,
        input: Stream = .nullDevice,
        output: Stream = .inherit,
        error: Stream = .inherit
    ) throws {
        var actions = try FileActions()
        defer { actions.destroy() }
        var parentEnds: [Int32: Int32] = [:]  // child's stream number → the parent's end of its pipe
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        do {
            for (number, stream) in [(STDIN_FILENO, input), (STDOUT_FILENO, output), (STDERR_FILENO, error)] {
                switch stream {
                case .inherit:
                    continue
                case .nullDevice:
                    try actions.open(number, "/dev/null", number == STDIN_FILENO ? O_RDONLY : O_WRONLY)
                case .pipe:
                    let (read, write) = try Self.makePipe()
                    let (parent, child) = number == STDIN_FILENO ? (write, read) : (read, write)
                    parentEnds[number] = parent
                    childEnds.append(child)
                    try actions.duplicate(child, to: number)
                case .fileDescriptor(let fd):
                    try actions.duplicate(fd, to: number)
                case .sameAsOutput:
                    try actions.duplicate(STDOUT_FILENO, to: number)
                }
            }
            try actions.closeFrom(3)
            if let currentDirectory { try actions.changeDirectory(to: currentDirectory.path) }
            processIdentifier = try Self.spawn(
                executable.path, arguments: arguments,
                environment: environment ?? ProcessInfo.processInfo.environment, actions: &actions)
        } catch let failure {
            for fd in parentEnds.values { close(fd) }
            throw failure
        }
        func handle(_ number: Int32) -> FileHandle? {
            parentEnds[number].map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        }
        standardInput = handle(STDIN_FILENO)
        standardOutput = handle(STDOUT_FILENO)
        standardError = handle(STDERR_FILENO)
        exited.enter()
        let pid = processIdentifier
        Thread.detachNewThread { [self] in
            // Wait without reaping, then reap under the lock that `signal(_:)` takes: a signal never reaches
            // another process that was given the reaped one's ID.
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            finish(pid)
        }
    }

    /// True until the child has ended and been waited for.
    public var isRunning: Bool { state.withLock { $0.exit == nil } }

    /// Sends `signal` to the child (nothing once it has been waited for, so that a reused process ID is safe).
    public func signal(_ number: Int32) {
        state.withLock { state in
            if state.exit == nil { _ = kill(processIdentifier, number) }
        }
    }

    /// Waits until the child has ended and returns how.
    public func waitForExit() async -> Exit {
        await withCheckedContinuation { continuation in
            let exit = state.withLock { state in
                if state.exit == nil { state.waiters.append(continuation) }
                return state.exit
            }
            if let exit { continuation.resume(returning: exit) }
        }
    }

    /// Blocks the calling thread until the child has ended; for synchronous code only.
    public func waitUntilExit() -> Exit {
        exited.wait()
        return state.withLock { $0.exit! }
    }

    private func finish(_ pid: pid_t) {
        let (exit, waiters) = state.withLock { state in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let exit = Self.exit(fromWaitStatus: status)
            state.exit = exit
            defer { state.waiters = [] }
            return (exit, state.waiters)
        }
        exited.leave()
        for waiter in waiters { waiter.resume(returning: exit) }
    }

    /// A `waitpid` status as an exit: `WIFEXITED`/`WEXITSTATUS`/`WTERMSIG`, which are macros C alone can use.
    static func exit(fromWaitStatus status: Int32) -> Exit {
        let signal = status & 0x7f
        return signal == 0 ? Exit(status: (status >> 8) & 0xff, signaled: false) : Exit(status: signal, signaled: true)
    }

    /// A pipe whose two ends are closed on exec. (Every child started here also closes what it inherits
    /// beyond its three streams, so another child started between `pipe` and `fcntl` does not keep it open.)
    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw Failure(description: "pipe: \(errnoText())") }
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }

    private static func spawn(
        _ path: String, arguments: [String], environment: [String: String], actions: inout FileActions
    ) throws -> pid_t {
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        #if canImport(Darwin)
            var attributes: posix_spawnattr_t? = nil
        #else
            var attributes = posix_spawnattr_t()
        #endif
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }
        var flags = Int32(POSIX_SPAWN_SETPGROUP)
        #if canImport(Darwin)
            flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #endif
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "posix_spawnattr_setflags")
        try check(posix_spawnattr_setpgroup(&attributes, 0), "posix_spawnattr_setpgroup")
        var pid: pid_t = 0
        try check(posix_spawn(&pid, path, &actions.raw, &attributes, argv, envp), "posix_spawn \(path)")
        return pid
    }

    fileprivate static func check(_ result: Int32, _ what: String) throws {
        guard result != 0 else { return }
        throw Failure(description: "\(what): \(String(cString: strerror(result)))")
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}

/// `posix_spawn_file_actions_t`, with the two non-portable actions looked up where glibc has them but its
/// Swift module does not show them.
private struct FileActions {
    #if canImport(Darwin)
        var raw: posix_spawn_file_actions_t? = nil
    #else
        var raw = posix_spawn_file_actions_t()
    #endif

    init() throws {
        try SpawnedProcess.check(posix_spawn_file_actions_init(&raw), "posix_spawn_file_actions_init")
    }

    mutating func destroy() { posix_spawn_file_actions_destroy(&raw) }

    mutating func open(_ fd: Int32, _ path: String, _ flags: Int32) throws {
        try SpawnedProcess.check(posix_spawn_file_actions_addopen(&raw, fd, path, flags, 0), "addopen \(path)")
    }

    mutating func duplicate(_ fd: Int32, to target: Int32) throws {
        try SpawnedProcess.check(posix_spawn_file_actions_adddup2(&raw, fd, target), "adddup2 \(fd)")
    }

    /// Closes every descriptor from `lowest` up in the child (Darwin: `POSIX_SPAWN_CLOEXEC_DEFAULT` does it).
    mutating func closeFrom(_ lowest: Int32) throws {
        #if os(Linux)
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
                try SpawnedProcess.check(unsafeBitCast(symbol, to: CloseFrom.self)(&raw, lowest), "addclosefrom_np")
                return
            }
            // glibc before 2.34: the descriptors open now (FileManager reads a directory entry's name safely).
            let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            for fd in open.compactMap(Int32.init) where fd >= lowest {
                try SpawnedProcess.check(posix_spawn_file_actions_addclose(&raw, fd), "addclose \(fd)")
            }
        #endif
    }

    mutating func changeDirectory(to path: String) throws {
        #if canImport(Darwin)
            try SpawnedProcess.check(posix_spawn_file_actions_addchdir_np(&raw, path), "addchdir_np \(path)")
        #else
            typealias ChangeDirectory =
                @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np")
            else {
                throw SpawnedProcess.Failure(description: "this C library cannot start a child in another directory")
            }
            try SpawnedProcess.check(unsafeBitCast(symbol, to: ChangeDirectory.self)(&raw, path), "addchdir_np \(path)")
        #endif
    }
}

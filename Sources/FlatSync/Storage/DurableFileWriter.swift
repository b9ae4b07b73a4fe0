import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Replaces a file so that after a crash or a power loss the path holds either the old bytes or the new
/// ones, never a mix, an empty file, or nothing.
///
/// The recipe: write a temporary file in the same directory, flush it to stable storage (`F_FULLFSYNC`
/// on Darwin, whose plain `fsync` may leave data in the drive's cache), rename it over the destination,
/// then flush the directory so the rename itself is durable. `Data.write(options: .atomic)` skips the
/// directory flush and `F_FULLFSYNC`, so FlatSync never uses it.
///
/// A failed flush is reported, never retried: after a failed `fsync` the kernel may mark the pages clean,
/// so a second `fsync` can report success for data that never reached the disk.
package struct DurableFileWriter: Sendable {
    /// The steps of a durable replacement, for injecting failures in tests.
    package enum Step: String, Sendable, CaseIterable {
        case create, write, sync, rename, syncDirectory
    }

    /// A failure to inject at one step, as the `errno` the system call would have returned.
    package var injectedFailure: (step: Step, errno: Int32)?

    package init(injectedFailure: (step: Step, errno: Int32)? = nil) {
        self.injectedFailure = injectedFailure
    }

    /// The prefix of temporary files, so that an opener can recognise and remove leftovers of a crash.
    package static let temporaryPrefix = ".tmp-"

    /// Durably replaces the file at `url` with `data`, creating it with `permissions` if needed.
    package func write(_ data: Data, to url: URL, permissions: mode_t = 0o600) throws(FlatSyncError) {
        let directory = url.deletingLastPathComponent()
        let temporary = directory.appendingPathComponent(
            "\(Self.temporaryPrefix)\(url.lastPathComponent)-\(getpid())-\(UInt32.random(in: .min ... .max))"
        )
        let temporaryPath = temporary.path
        let fd = try check(.create, path: temporaryPath) {
            open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, permissions)
        }
        var renamed = false
        defer {
            close(fd)
            if !renamed { unlink(temporaryPath) }
        }
        try check(.write, path: temporaryPath) { () -> Int32 in
            Self.writeAll(fd, data) ? 0 : -1
        }
        try check(.sync, path: temporaryPath) { Self.fullSync(fd) }
        try check(.rename, path: url.path) { rename(temporaryPath, url.path) }
        renamed = true
        try syncDirectory(directory)
    }

    /// Flushes a directory's entries (creations, renames, deletions) to stable storage.
    package func syncDirectory(_ directory: URL) throws(FlatSyncError) {
        let path = directory.path
        let fd = try check(.syncDirectory, path: path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try check(.syncDirectory, path: path) { Self.fullSync(fd) }
    }

    /// Flushes one file descriptor to stable storage: `F_FULLFSYNC` on Darwin, `fsync` elsewhere.
    /// Returns 0 on success and -1 with `errno` set on failure, like the system call.
    package static func fullSync(_ fd: Int32) -> Int32 {
        #if canImport(Darwin)
            if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
            // Some file systems (network shares, RAM disks) do not support F_FULLFSYNC; fsync is the best left.
            if errno == ENOTSUP || errno == EINVAL { return fsync(fd) }
            return -1
        #else
            return fsync(fd)
        #endif
    }

    /// Writes every byte of `data` to `fd`, retrying short writes and `EINTR`. False with `errno` set on
    /// failure.
    package static func writeAll(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Bool in
            writeAll(fd, buffer)
        }
    }

    /// Writes every byte of `buffer` to `fd`, retrying short writes and `EINTR`.
    package static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Bool {
        guard var pointer = buffer.baseAddress else { return true }
        var remaining = buffer.count
        while remaining > 0 {
            let written = Foundation.write(fd, pointer, remaining)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            pointer += written
            remaining -= written
        }
        return true
    }

    /// Runs a system call, or the injected failure for `step`, turning -1 into a `FlatSyncError`.
    @discardableResult
    private func check(_ step: Step, path: String, _ call: () -> Int32) throws(FlatSyncError) -> Int32 {
        if let injectedFailure, injectedFailure.step == step {
            throw FlatSyncError.syscall(step.rawValue, errno: injectedFailure.errno, path: path)
        }
        while true {
            let result = call()
            if result >= 0 { return result }
            let code = errno
            // Retrying an interrupted open or rename is safe; an interrupted fsync is not retried.
            if code == EINTR && (step == .create || step == .rename) { continue }
            throw FlatSyncError.syscall(step.rawValue, errno: code, path: path)
        }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
/// so a second `fsync` can report success for data that never reached the disk. The temporary file is
/// then removed, never renamed, so the destination keeps its old bytes.
///
/// Every call goes through ``fileSystem`` (the real one unless a test passes a double).
package struct DurableFileWriter: Sendable {
    /// Where the calls go.
    package var fileSystem: FileSystem

    package init(fileSystem: FileSystem = .posix) {
        self.fileSystem = fileSystem
    }

    /// The prefix of temporary files, so that an opener can recognise and remove leftovers of a crash.
    package static let temporaryPrefix = ".tmp-"

    /// Durably replaces the file at `url` with `data`, creating it with `permissions` if needed.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` naming the call that failed. When only the
    ///   final directory flush fails, the path already holds the new bytes but a power loss may still
    ///   bring the old ones back.
    package func write(_ data: Data, to url: URL, permissions: mode_t = 0o600) throws(FlatSyncError) {
        let directory = url.deletingLastPathComponent().path
        let path = url.path
        let temporary =
            directory
            + "/\(Self.temporaryPrefix)\(url.lastPathComponent)-\(getpid())-\(UInt32.random(in: .min ... .max))"
        let fd = try fileSystem.open(
            temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, permissions: permissions)
        var renamed = false
        defer {
            fileSystem.close(fd)
            if !renamed { try? fileSystem.unlink(temporary) }
        }
        try fileSystem.writeAll(fd, data, path: temporary)
        try fileSystem.sync(fd, path: temporary)
        try fileSystem.rename(temporary, to: path)
        renamed = true
        try fileSystem.syncDirectory(directory)
    }

    /// Flushes a directory's entries (creations, renames, deletions) to stable storage.
    package func syncDirectory(_ directory: URL) throws(FlatSyncError) {
        try fileSystem.syncDirectory(directory.path)
    }

    /// Flushes one file descriptor to stable storage, straight to the kernel, as ``FileSystem/sync(_:path:)``
    /// does: `F_FULLFSYNC` on Darwin, `fdatasync` elsewhere. Returns 0 on success and -1 with `errno` set on
    /// failure, like the system call. (The benchmark's baselines use it.)
    package static func fullSync(_ fd: Int32) -> Int32 {
        switch POSIXFileSystem().sync(fd) {
        case .success: return 0
        case .failure(let error):
            errno = error.rawValue
            return -1
        }
    }
}

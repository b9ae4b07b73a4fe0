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

/// The `errno` of a failed file-system call.
package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    package var rawValue: Int32

    package init(_ rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The `errno` the last system call on this thread left.
    package static var current: Errno { Errno(errno) }

    package static let interrupted = Errno(EINTR)
    package static let ioError = Errno(EIO)
    package static let noSpace = Errno(ENOSPC)
    package static let noSuchFile = Errno(ENOENT)
    package static let fileExists = Errno(EEXIST)
    package static let wouldBlock = Errno(EWOULDBLOCK)

    package var description: String {
        "\(POSIXErrorCode(rawValue: rawValue).map { "\($0)" } ?? "errno \(rawValue)"): \(String(cString: strerror(rawValue)))"
    }
}

/// What a path names.
package enum ItemKind: Sendable, Equatable {
    case file
    case directory
    case other
}

/// The file-system calls that FlatSync's durable paths make — the log, snapshots, the device files,
/// quarantine, the directory lock and `DirectoryCloud` — one method per system call.
///
/// Implementations answer the way the system calls do: a result, or the `errno` of a failure; a `write`
/// may write fewer bytes than asked; `EINTR` may come back from anything that can block. They do not
/// retry: ``FileSystem`` holds the loops (finishing short writes, retrying `EINTR`) and turns failures
/// into ``FlatSyncError``s, so that the loops run against test doubles as well as against the kernel.
///
/// ``POSIXFileSystem`` is the real one. Test doubles inject failures, record the calls, or keep the
/// files in memory and work out what a power loss could leave (`FlatSyncTesting`).
package protocol FileSystemCalls: Sendable {
    /// `open(2)`: a new descriptor, creating a file with `permissions` when `flags` holds `O_CREAT`.
    func open(_ path: String, flags: Int32, permissions: mode_t) -> Result<Int32, Errno>
    /// `close(2)`. Its result is ignored, as everywhere: a failure to close says nothing the flushes did not.
    func close(_ descriptor: Int32)
    /// One `write(2)` at the descriptor's offset (the end of the file with `O_APPEND`): may be short.
    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno>
    /// One `pwrite(2)` at `offset`, which neither uses nor moves the descriptor's offset (the descriptor
    /// must not have `O_APPEND`): may be short.
    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno>
    /// One `pread(2)` at `offset`: may be short; 0 at the end of the file.
    func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno>
    /// The file's size, from `fstat(2)`.
    func size(_ descriptor: Int32) -> Result<Int, Errno>
    /// Flushes the file to stable storage: `fcntl(F_FULLFSYNC)` on Darwin, `fdatasync(2)` elsewhere — the
    /// data and the metadata needed to read it back (the size, the blocks), not the timestamps, as SQLite
    /// flushes on Linux. Overwriting bytes a file already has then costs one write of the data, not a
    /// second of the inode for its new modification time.
    func sync(_ descriptor: Int32) -> Result<Void, Errno>
    /// `ftruncate(2)`.
    func truncate(_ descriptor: Int32, to length: Int) -> Result<Void, Errno>
    /// `flock(2)` with `LOCK_EX`, and `LOCK_NB` unless `blocking`.
    func lock(_ descriptor: Int32, blocking: Bool) -> Result<Void, Errno>
    /// `flock(2)` with `LOCK_UN`.
    func unlock(_ descriptor: Int32)
    /// `rename(2)`.
    func rename(_ source: String, to destination: String) -> Result<Void, Errno>
    /// `link(2)`: a second name for a file.
    func link(_ source: String, to destination: String) -> Result<Void, Errno>
    /// `unlink(2)`.
    func unlink(_ path: String) -> Result<Void, Errno>
    /// `mkdir(2)`.
    func makeDirectory(_ path: String, permissions: mode_t) -> Result<Void, Errno>
    /// Flushes a directory's entries (creations, renames, links, removals) to stable storage: opens the
    /// directory, flushes it with `fsync(2)` (`F_FULLFSYNC` on Darwin), closes it.
    func syncDirectory(_ path: String) -> Result<Void, Errno>
    /// What `lstat(2)` finds at `path`; nil when nothing is there.
    func itemKind(_ path: String) -> Result<ItemKind?, Errno>
    /// The inode number `stat(2)` gives the item at `path`; nil when nothing is there. A copy of a file or
    /// directory has another; a rename keeps it.
    func inode(_ path: String) -> Result<UInt64?, Errno>
    /// The names in a directory, without `.` and `..`.
    func contentsOfDirectory(_ path: String) -> Result<[String], Errno>
}

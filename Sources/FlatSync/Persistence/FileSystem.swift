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

/// The one way FlatSync's storage code reaches the file system: the calls of ``FileSystemCalls``, plus
/// the loops around them (finishing short writes, retrying `EINTR` where a retry is safe) and the
/// translation of failures into ``FlatSyncError``s naming the call and the path.
///
/// ``posix`` — the default everywhere — calls the kernel directly: a `FileSystem` holds no
/// implementation then, and each call is one branch away from the system call, so the seam costs
/// nothing when it is unused. Tests pass `FileSystem(someDouble)` to inject failures, record the calls,
/// or simulate power loss.
///
/// Never retried: a flush. After a failed `fsync` the kernel may have marked the dirty pages clean, so a
/// second `fsync` could report success for data that never reached the disk; the caller must treat the
/// file's unflushed data as lost.
package struct FileSystem: Sendable {
    /// The implementation, or nil for the kernel.
    package let calls: (any FileSystemCalls)?

    /// The real file system.
    package static let posix = FileSystem()

    private init() {
        calls = nil
    }

    /// A file system whose every call goes to `calls`.
    package init(_ calls: any FileSystemCalls) {
        self.calls = calls
    }

    // MARK: - Descriptors

    /// Opens `path`, retrying `EINTR`.
    package func open(_ path: String, flags: Int32, permissions: mode_t = 0o600) throws(FlatSyncError) -> Int32 {
        while true {
            let result =
                calls?.open(path, flags: flags, permissions: permissions)
                ?? POSIXFileSystem().open(path, flags: flags, permissions: permissions)
            switch result {
            case .success(let fd): return fd
            case .failure(let error) where error == .interrupted: continue
            case .failure(let error): throw .syscall("open", errno: error.rawValue, path: path)
            }
        }
    }

    /// Closes a descriptor; failures are ignored.
    package func close(_ descriptor: Int32) {
        if let calls { calls.close(descriptor) } else { POSIXFileSystem().close(descriptor) }
    }

    /// Writes every byte of `bytes` at the descriptor's offset, finishing short writes and retrying
    /// `EINTR`. On failure part of the bytes may be in the file.
    @inline(__always)
    package func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws(FlatSyncError) {
        try writeAll(descriptor, bytes, at: nil, path: path)
    }

    /// The loop of both: `write(2)`s at the descriptor's offset when `offset` is nil, else `pwrite(2)`s.
    @inline(__always)
    private func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int?, path: String)
        throws(FlatSyncError)
    {
        var remaining = bytes
        while !remaining.isEmpty {
            let result: Result<Int, Errno>
            if let offset {
                let at = offset + (bytes.count - remaining.count)
                result =
                    calls?.write(descriptor, remaining, at: at)
                    ?? POSIXFileSystem().write(descriptor, remaining, at: at)
            } else {
                result = calls?.write(descriptor, remaining) ?? POSIXFileSystem().write(descriptor, remaining)
            }
            switch result {
            case .success(let written) where written > 0 && written <= remaining.count:
                remaining = UnsafeRawBufferPointer(rebasing: remaining[written...])
            case .success:
                // A regular file never answers a write with 0 bytes (or more than asked); do not spin.
                throw .syscall("write", errno: EIO, path: path)
            case .failure(let error) where error == .interrupted: continue
            case .failure(let error): throw .syscall("write", errno: error.rawValue, path: path)
            }
        }
    }

    /// ``writeAll(_:_:path:)`` for the bytes of an array; with `offset`, at that offset of the file
    /// (`pwrite(2)`; the descriptor must not have `O_APPEND`) instead of the descriptor's.
    @inline(__always)
    package func writeAll(_ descriptor: Int32, _ bytes: [UInt8], at offset: Int? = nil, path: String)
        throws(FlatSyncError)
    {
        let failure = bytes.withUnsafeBytes { buffer -> FlatSyncError? in
            do throws(FlatSyncError) {
                try writeAll(descriptor, buffer, at: offset, path: path)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// ``writeAll(_:_:path:)`` for the bytes of a `Data`.
    package func writeAll(_ descriptor: Int32, _ data: Data, path: String) throws(FlatSyncError) {
        let failure = data.withUnsafeBytes { buffer -> FlatSyncError? in
            do throws(FlatSyncError) {
                try writeAll(descriptor, buffer, path: path)
                return nil
            } catch {
                return error
            }
        }
        if let failure { throw failure }
    }

    /// Reads the whole file behind `descriptor` from its start.
    package func readAll(_ descriptor: Int32, path: String) throws(FlatSyncError) -> [UInt8] {
        let size = try fileSize(descriptor, path: path)
        var failure: FlatSyncError?
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            do throws(FlatSyncError) {
                count = try read(descriptor, into: UnsafeMutableRawBufferPointer(buffer), path: path)
            } catch {
                failure = error
                count = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// ``readAll(_:path:)`` straight into a `Data`, with no second copy (a snapshot may be megabytes).
    package func readAllData(_ descriptor: Int32, path: String) throws(FlatSyncError) -> Data {
        var data = Data(count: try fileSize(descriptor, path: path))
        let result = data.withUnsafeMutableBytes { buffer -> Result<Int, FlatSyncError> in
            do throws(FlatSyncError) {
                return .success(try read(descriptor, into: buffer, path: path))
            } catch {
                return .failure(error)
            }
        }
        let count = try result.get()
        if count < data.count { data.removeSubrange(count...) }
        return data
    }

    /// The size of the file behind `descriptor`, in bytes.
    package func size(_ descriptor: Int32, path: String) throws(FlatSyncError) -> Int {
        try fileSize(descriptor, path: path)
    }

    /// Fills `buffer` from `offset` of the file, retrying `EINTR`; returns how many bytes it read (fewer
    /// when the file ends first).
    package func read(
        _ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int, path: String
    ) throws(FlatSyncError) -> Int {
        var count = 0
        while count < buffer.count {
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[count...])
            let result =
                calls?.read(descriptor, into: target, at: offset + count)
                ?? POSIXFileSystem().read(descriptor, into: target, at: offset + count)
            switch result {
            case .success(0): return count
            case .success(let read) where read <= target.count: count += read
            case .success: throw .syscall("read", errno: EIO, path: path)
            case .failure(let error) where error == .interrupted: continue
            case .failure(let error): throw .syscall("read", errno: error.rawValue, path: path)
            }
        }
        return count
    }

    private func fileSize(_ descriptor: Int32, path: String) throws(FlatSyncError) -> Int {
        switch calls?.size(descriptor) ?? POSIXFileSystem().size(descriptor) {
        case .success(let value): return value
        case .failure(let error): throw .syscall("fstat", errno: error.rawValue, path: path)
        }
    }

    /// Fills `buffer` from the start of the file, retrying `EINTR`; returns how many bytes it read (fewer if
    /// the file shrank meanwhile).
    private func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String)
        throws(FlatSyncError) -> Int
    {
        var count = 0
        while count < buffer.count {
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[count...])
            let result =
                calls?.read(descriptor, into: target, at: count)
                ?? POSIXFileSystem().read(descriptor, into: target, at: count)
            switch result {
            case .success(0): return count  // The file shrank since fstat: keep what is there.
            case .success(let read) where read <= target.count: count += read
            case .success: throw .syscall("read", errno: EIO, path: path)
            case .failure(let error) where error == .interrupted: continue
            case .failure(let error): throw .syscall("read", errno: error.rawValue, path: path)
            }
        }
        return count
    }

    /// Flushes the file's data to stable storage (`fdatasync` on Linux, `F_FULLFSYNC` on Darwin; see
    /// ``FileSystemCalls/sync(_:)``). Never retried, not even on `EINTR`.
    @inline(__always)
    package func sync(_ descriptor: Int32, path: String) throws(FlatSyncError) {
        if case .failure(let error) = calls?.sync(descriptor) ?? POSIXFileSystem().sync(descriptor) {
            throw .syscall("fsync", errno: error.rawValue, path: path)
        }
    }

    /// Cuts (or extends) the file to `length` bytes, retrying `EINTR`.
    package func truncate(_ descriptor: Int32, to length: Int, path: String) throws(FlatSyncError) {
        try retryingInterrupts("ftruncate", path: path) {
            calls?.truncate(descriptor, to: length) ?? POSIXFileSystem().truncate(descriptor, to: length)
        }
    }

    /// Takes an exclusive `flock`, retrying `EINTR`. Fails with `EWOULDBLOCK` when not `blocking` and
    /// someone else holds it.
    package func lock(_ descriptor: Int32, blocking: Bool, path: String) throws(FlatSyncError) {
        try retryingInterrupts("flock", path: path) {
            calls?.lock(descriptor, blocking: blocking) ?? POSIXFileSystem().lock(descriptor, blocking: blocking)
        }
    }

    /// Lets go of a `flock`.
    package func unlock(_ descriptor: Int32) {
        if let calls { calls.unlock(descriptor) } else { POSIXFileSystem().unlock(descriptor) }
    }

    // MARK: - Names

    /// Renames `source` to `destination`, retrying `EINTR`.
    package func rename(_ source: String, to destination: String) throws(FlatSyncError) {
        try retryingInterrupts("rename", path: source) {
            calls?.rename(source, to: destination) ?? POSIXFileSystem().rename(source, to: destination)
        }
    }

    /// Gives the file at `source` the second name `destination`, retrying `EINTR`.
    package func link(_ source: String, to destination: String) throws(FlatSyncError) {
        try retryingInterrupts("link", path: source) {
            calls?.link(source, to: destination) ?? POSIXFileSystem().link(source, to: destination)
        }
    }

    /// Removes a name, retrying `EINTR`.
    package func unlink(_ path: String) throws(FlatSyncError) {
        try retryingInterrupts("unlink", path: path) { calls?.unlink(path) ?? POSIXFileSystem().unlink(path) }
    }

    /// Flushes a directory's entries to stable storage. Never retried.
    package func syncDirectory(_ path: String) throws(FlatSyncError) {
        if case .failure(let error) = calls?.syncDirectory(path) ?? POSIXFileSystem().syncDirectory(path) {
            throw .syscall("fsync of the directory", errno: error.rawValue, path: path)
        }
    }

    /// What is at `path`, or nil when nothing is.
    package func itemKind(_ path: String) throws(FlatSyncError) -> ItemKind? {
        switch calls?.itemKind(path) ?? POSIXFileSystem().itemKind(path) {
        case .success(let kind): return kind
        case .failure(let error): throw .syscall("lstat", errno: error.rawValue, path: path)
        }
    }

    /// The inode number of the item at `path`, or nil when nothing is there (see
    /// ``FileSystemCalls/inode(_:)``).
    package func inode(_ path: String) throws(FlatSyncError) -> UInt64? {
        switch calls?.inode(path) ?? POSIXFileSystem().inode(path) {
        case .success(let inode): return inode
        case .failure(let error): throw .syscall("stat", errno: error.rawValue, path: path)
        }
    }

    /// True when anything, even a dangling symbolic link, is at `path` (false when that cannot be told).
    package func exists(_ path: String) -> Bool {
        (try? itemKind(path)) != nil
    }

    /// The names in a directory.
    package func contentsOfDirectory(_ path: String) throws(FlatSyncError) -> [String] {
        switch calls?.contentsOfDirectory(path) ?? POSIXFileSystem().contentsOfDirectory(path) {
        case .success(let names): return names
        case .failure(let error): throw .syscall("opendir", errno: error.rawValue, path: path)
        }
    }

    // MARK: - Compound operations

    /// The bytes of the file at `path`, or nil when there is no such file.
    package func readFile(_ path: String) throws(FlatSyncError) -> Data? {
        let fd: Int32
        do {
            fd = try open(path, flags: O_RDONLY | O_CLOEXEC)
        } catch {
            if (error.cause as? POSIXError)?.code == .ENOENT { return nil }
            throw error
        }
        defer { close(fd) }
        return try readAllData(fd, path: path)
    }

    /// Makes sure the directory at `path` exists and that its entry is durable.
    ///
    /// Each missing directory, from the outermost in, is created with `permissions` and then its parent
    /// is flushed, so that the new entry survives a power loss before anything inside it is trusted to
    /// disk. With `flushingExistingParents`, the entries of the directories that already existed are
    /// flushed too, up to the root: pass it when a store first uses a directory that someone else made
    /// (`mkdir -p` never flushes) or that a process died making. A parent that cannot even be opened for
    /// that is left alone.
    package func createDirectory(_ path: String, permissions: mode_t = 0o700, flushingExistingParents: Bool = false)
        throws(FlatSyncError)
    {
        var missing: [String] = []
        var deepestExisting = Self.normalized(path)
        while true {
            switch try itemKind(deepestExisting) {
            case .directory?:
                break
            case nil:
                missing.append(deepestExisting)
                let parent = Self.parent(of: deepestExisting)
                if parent == deepestExisting { break }
                deepestExisting = parent
                continue
            case .file?, .other?:
                throw FlatSyncError(.ioFailed, "A file is in the way of a directory.", path: deepestExisting)
            }
            break
        }
        for directory in missing.reversed() {
            do {
                try retryingInterrupts("mkdir", path: directory) {
                    calls?.makeDirectory(directory, permissions: permissions)
                        ?? POSIXFileSystem().makeDirectory(directory, permissions: permissions)
                }
            } catch {
                // Another process made it meanwhile: fine, as long as it is a directory.
                guard (error.cause as? POSIXError)?.code == .EEXIST, try itemKind(directory) == .directory else {
                    throw error
                }
            }
            try syncDirectory(Self.parent(of: directory))
        }
        guard flushingExistingParents else { return }
        var directory = deepestExisting
        while Self.parent(of: directory) != directory && directory != "." {
            do {
                try syncDirectory(Self.parent(of: directory))
            } catch {
                let code = (error.cause as? POSIXError)?.code
                if code != .EACCES && code != .EPERM { throw error }
            }
            directory = Self.parent(of: directory)
        }
    }

    /// Deletes the temporary files a writer left in `directory` when it died mid-write (names starting with
    /// `prefix`), and returns how many it deleted. A missing directory holds none.
    @discardableResult
    package func removeFiles(in directory: String, withPrefix prefix: String) -> Int {
        guard let names = try? contentsOfDirectory(directory) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix(prefix) {
            if (try? unlink(directory + "/" + name)) != nil { removed += 1 }
        }
        return removed
    }

    // MARK: - Helpers

    private func retryingInterrupts(_ name: String, path: String, _ call: () -> Result<Void, Errno>)
        throws(FlatSyncError)
    {
        while true {
            switch call() {
            case .success: return
            case .failure(let error) where error == .interrupted: continue
            case .failure(let error): throw .syscall(name, errno: error.rawValue, path: path)
            }
        }
    }

    /// `path` without a trailing slash (except for the root).
    private static func normalized(_ path: String) -> String {
        var path = path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }

    /// The directory holding `path`: `/a` for `/a/b`, `/` for `/a`, `.` for `a`.
    package static func parent(of path: String) -> String {
        let path = normalized(path)
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }
}

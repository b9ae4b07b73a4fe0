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

// The system calls under other names: inside `POSIXFileSystem` its own methods of the same names would
// shadow them, and the module that declares them differs by platform.
@inline(__always) private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    open(path, flags, mode)
}
@inline(__always) private func systemClose(_ descriptor: Int32) -> Int32 { close(descriptor) }
@inline(__always) private func systemWrite(_ descriptor: Int32, _ base: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, base, count)
}
@inline(__always) private func systemRename(_ source: String, _ destination: String) -> Int32 {
    rename(source, destination)
}
@inline(__always) private func systemLink(_ source: String, _ destination: String) -> Int32 {
    link(source, destination)
}
@inline(__always) private func systemUnlink(_ path: String) -> Int32 { unlink(path) }

/// The real file system: each method is the system call it is named after, nothing more.
package struct POSIXFileSystem: FileSystemCalls {
    package init() {}

    @inline(__always)
    private static func result(_ value: Int32) -> Result<Void, Errno> {
        value == 0 ? .success(()) : .failure(.current)
    }

    package func open(_ path: String, flags: Int32, permissions: mode_t) -> Result<Int32, Errno> {
        let fd = systemOpen(path, flags, permissions)
        return fd >= 0 ? .success(fd) : .failure(.current)
    }

    package func close(_ descriptor: Int32) {
        _ = systemClose(descriptor)
    }

    @inline(__always)
    package func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        guard let base = bytes.baseAddress else { return .success(0) }
        let written = systemWrite(descriptor, base, bytes.count)
        return written >= 0 ? .success(written) : .failure(.current)
    }

    @inline(__always)
    package func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        guard let base = bytes.baseAddress else { return .success(0) }
        let written = pwrite(descriptor, base, bytes.count, off_t(offset))
        return written >= 0 ? .success(written) : .failure(.current)
    }

    package func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int)
        -> Result<Int, Errno>
    {
        guard let base = buffer.baseAddress else { return .success(0) }
        let count = pread(descriptor, base, buffer.count, off_t(offset))
        return count >= 0 ? .success(count) : .failure(.current)
    }

    package func size(_ descriptor: Int32) -> Result<Int, Errno> {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? .success(Int(info.st_size)) : .failure(.current)
    }

    @inline(__always)
    package func sync(_ descriptor: Int32) -> Result<Void, Errno> {
        #if canImport(Darwin)
            if fcntl(descriptor, F_FULLFSYNC) == 0 { return .success(()) }
            // Some file systems (network shares, RAM disks) do not support F_FULLFSYNC; fsync is the best left.
            if errno == ENOTSUP || errno == EINVAL { return Self.result(fsync(descriptor)) }
            return .failure(.current)
        #else
            return Self.result(fdatasync(descriptor))
        #endif
    }

    /// `fsync(2)` (`F_FULLFSYNC` on Darwin): a directory's entries are not data that `fdatasync` promises
    /// to flush on every file system.
    private func syncEverything(_ descriptor: Int32) -> Result<Void, Errno> {
        #if canImport(Darwin)
            return sync(descriptor)
        #else
            return Self.result(fsync(descriptor))
        #endif
    }

    package func truncate(_ descriptor: Int32, to length: Int) -> Result<Void, Errno> {
        Self.result(ftruncate(descriptor, off_t(length)))
    }

    package func lock(_ descriptor: Int32, blocking: Bool) -> Result<Void, Errno> {
        Self.result(flock(descriptor, blocking ? LOCK_EX : LOCK_EX | LOCK_NB))
    }

    package func unlock(_ descriptor: Int32) {
        _ = flock(descriptor, LOCK_UN)
    }

    package func rename(_ source: String, to destination: String) -> Result<Void, Errno> {
        Self.result(systemRename(source, destination))
    }

    package func link(_ source: String, to destination: String) -> Result<Void, Errno> {
        Self.result(systemLink(source, destination))
    }

    package func unlink(_ path: String) -> Result<Void, Errno> {
        Self.result(systemUnlink(path))
    }

    package func makeDirectory(_ path: String, permissions: mode_t) -> Result<Void, Errno> {
        Self.result(mkdir(path, permissions))
    }

    package func syncDirectory(_ path: String) -> Result<Void, Errno> {
        var fd: Int32
        repeat {
            fd = systemOpen(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        } while fd < 0 && errno == EINTR
        guard fd >= 0 else { return .failure(.current) }
        defer { _ = systemClose(fd) }
        return syncEverything(fd)
    }

    package func itemKind(_ path: String) -> Result<ItemKind?, Errno> {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .success(nil) : .failure(.current)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .success(.file)
        case S_IFDIR: return .success(.directory)
        default: return .success(.other)
        }
    }

    package func inode(_ path: String) -> Result<UInt64?, Errno> {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .success(nil) : .failure(.current)
        }
        return .success(UInt64(info.st_ino))
    }

    package func contentsOfDirectory(_ path: String) -> Result<[String], Errno> {
        guard let stream = opendir(path) else { return .failure(.current) }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return .success(names)
    }
}

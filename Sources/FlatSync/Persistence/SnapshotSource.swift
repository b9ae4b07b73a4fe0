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

/// Random access to a snapshot's bytes.
package protocol SnapshotSource {
    /// The number of bytes.
    var count: Int { get }
    /// Fills `buffer` with the bytes at `offset`, which the caller keeps within ``count``.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError)
}

extension SnapshotSource {
    /// The `count` bytes at `offset`.
    func bytes(at offset: Int, count: Int) throws(FlatSyncError) -> [UInt8] {
        var failure: FlatSyncError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            do throws(FlatSyncError) {
                try read(into: UnsafeMutableRawBufferPointer(buffer), at: offset)
                initialized = count
            } catch {
                failure = error
                initialized = 0
            }
        }
        if let failure { throw failure }
        return bytes
    }
}

/// A snapshot in memory.
package struct DataSnapshotSource: SnapshotSource {
    package let data: Data

    package init(_ data: Data) { self.data = data }

    package var count: Int { data.count }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError) {
        guard buffer.count > 0 else { return }
        data.withUnsafeBytes { bytes in
            buffer.baseAddress!.copyMemory(from: bytes.baseAddress! + offset, byteCount: buffer.count)
        }
    }
}

/// A snapshot file, read with `pread` as the columns stream. (The one place the snapshot reader calls the
/// file system: `open`, `fstat`, `pread`, `close`.)
package final class FileSnapshotSource: SnapshotSource {
    private let descriptor: Int32
    package let count: Int
    private let path: String
    private let fileSystem: FileSystem

    /// Opens the file at `path` through `fileSystem`, or returns nil when there is none.
    package static func open(_ path: String, fileSystem: FileSystem = .posix) throws(FlatSyncError)
        -> FileSnapshotSource?
    {
        guard try fileSystem.itemKind(path) != nil else { return nil }
        let fd = try fileSystem.open(path, flags: O_RDONLY | O_CLOEXEC)
        let count: Int
        do {
            count = try fileSystem.size(fd, path: path)
        } catch {
            fileSystem.close(fd)
            throw error
        }
        return FileSnapshotSource(descriptor: fd, count: count, path: path, fileSystem: fileSystem)
    }

    private init(descriptor: Int32, count: Int, path: String, fileSystem: FileSystem) {
        self.descriptor = descriptor
        self.count = count
        self.path = path
        self.fileSystem = fileSystem
    }

    deinit { fileSystem.close(descriptor) }

    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FlatSyncError) {
        let got = try fileSystem.read(descriptor, into: buffer, at: offset, path: path)
        if got < buffer.count {
            throw FlatSyncError(.damagedFile, "The snapshot ended early (it shrank while being read).", path: path)
        }
    }
}

// MARK: - Binary property list structure

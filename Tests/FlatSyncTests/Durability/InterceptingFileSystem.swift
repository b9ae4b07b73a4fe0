import Foundation

@testable import FlatSync

/// A file system that passes every call to another, except those a test replaces: for deliberately broken
/// variants (a flush that is skipped or whose failure is ignored) and for watching the calls go by.
struct InterceptingFileSystem: FileSystemCalls {
    let inner: any FileSystemCalls
    /// Replaces `sync(_:)`; gets the inner call to make (or not).
    var sync: (@Sendable (Int32, () -> Result<Void, Errno>) -> Result<Void, Errno>)?
    /// Replaces `syncDirectory(_:)`.
    var syncDirectory: (@Sendable (String, () -> Result<Void, Errno>) -> Result<Void, Errno>)?
    /// Sees every write before it is made.
    var willWrite: (@Sendable (Int32, UnsafeRawBufferPointer) -> Void)?
    /// Replaces `rename(_:to:)`; gets the source, the destination and the inner call to make (or not).
    var rename: (@Sendable (String, String, () -> Result<Void, Errno>) -> Result<Void, Errno>)?

    init(_ inner: any FileSystemCalls) {
        self.inner = inner
    }

    func sync(_ descriptor: Int32) -> Result<Void, Errno> {
        if let sync { return sync(descriptor) { inner.sync(descriptor) } }
        return inner.sync(descriptor)
    }

    func syncDirectory(_ path: String) -> Result<Void, Errno> {
        if let syncDirectory { return syncDirectory(path) { inner.syncDirectory(path) } }
        return inner.syncDirectory(path)
    }

    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        willWrite?(descriptor, bytes)
        return inner.write(descriptor, bytes)
    }

    func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        willWrite?(descriptor, bytes)
        return inner.write(descriptor, bytes, at: offset)
    }

    func open(_ path: String, flags: Int32, permissions: mode_t) -> Result<Int32, Errno> {
        inner.open(path, flags: flags, permissions: permissions)
    }
    func close(_ descriptor: Int32) { inner.close(descriptor) }
    func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        inner.read(descriptor, into: buffer, at: offset)
    }
    func size(_ descriptor: Int32) -> Result<Int, Errno> { inner.size(descriptor) }
    func truncate(_ descriptor: Int32, to length: Int) -> Result<Void, Errno> { inner.truncate(descriptor, to: length) }
    func lock(_ descriptor: Int32, blocking: Bool) -> Result<Void, Errno> { inner.lock(descriptor, blocking: blocking) }
    func unlock(_ descriptor: Int32) { inner.unlock(descriptor) }
    func rename(_ source: String, to destination: String) -> Result<Void, Errno> {
        if let rename { return rename(source, destination) { inner.rename(source, to: destination) } }
        return inner.rename(source, to: destination)
    }
    func link(_ source: String, to destination: String) -> Result<Void, Errno> { inner.link(source, to: destination) }
    func unlink(_ path: String) -> Result<Void, Errno> { inner.unlink(path) }
    func makeDirectory(_ path: String, permissions: mode_t) -> Result<Void, Errno> {
        inner.makeDirectory(path, permissions: permissions)
    }
    func itemKind(_ path: String) -> Result<ItemKind?, Errno> { inner.itemKind(path) }
    func inode(_ path: String) -> Result<UInt64?, Errno> { inner.inode(path) }
    func contentsOfDirectory(_ path: String) -> Result<[String], Errno> { inner.contentsOfDirectory(path) }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Exclusive ownership of a directory, held through `flock` on a lock file that is never renamed.
///
/// `flock` belongs to the open file description, so a second open in the same process is refused just
/// like another process, and the lock goes away when the owner closes it or dies (even by `kill -9`).
/// POSIX `fcntl` locks would not do: closing any descriptor of the file drops them.
package final class DirectoryLock: Sendable {
    /// The lock file's path.
    package let path: String
    private let fileSystem: FileSystem
    private let descriptor: Mutex<Int32?>

    private init(path: String, fd: Int32, fileSystem: FileSystem) {
        self.path = path
        self.fileSystem = fileSystem
        self.descriptor = Mutex(fd)
    }

    /// Takes the lock on `directory/name`, creating the file (mode `0600`) if needed.
    ///
    /// - Parameter blocking: wait for the current owner to let go instead of failing at once.
    /// - Throws: ``FlatSyncError/Code-swift.struct/storeLocked`` when another opener holds the lock and
    ///   `blocking` is false; ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be opened.
    package static func acquire(
        in directory: URL,
        name: String = "lock",
        blocking: Bool = false,
        fileSystem: FileSystem = .posix
    ) throws(FlatSyncError) -> DirectoryLock {
        let path = directory.appendingPathComponent(name).path
        let fd = try fileSystem.open(path, flags: O_RDWR | O_CREAT | O_CLOEXEC, permissions: 0o600)
        do {
            try fileSystem.lock(fd, blocking: blocking, path: path)
        } catch {
            fileSystem.close(fd)
            if (error.cause as? POSIXError)?.code == .EWOULDBLOCK {
                throw FlatSyncError(
                    .storeLocked,
                    "The directory is in use by another process or another open store; close that one first.",
                    path: directory.path
                )
            }
            throw error
        }
        return DirectoryLock(path: path, fd: fd, fileSystem: fileSystem)
    }

    /// True until ``release()`` runs.
    package var isHeld: Bool {
        descriptor.withLock { $0 != nil }
    }

    /// Lets go of the lock. Calling it again does nothing.
    package func release() {
        descriptor.withLock { fd in
            guard let open = fd else { return }
            fileSystem.unlock(open)
            fileSystem.close(open)
            fd = nil
        }
    }

    deinit {
        release()
    }
}

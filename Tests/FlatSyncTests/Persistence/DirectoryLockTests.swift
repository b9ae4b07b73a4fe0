import FlatSyncTestSupport
import Foundation
import Testing

@testable import FlatSync

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@Suite struct DirectoryLockTests {
    @Test func aSecondAcquireInTheSameProcessIsRefusedUntilRelease() throws {
        try withTemporaryDirectory { directory in
            let first = try DirectoryLock.acquire(in: directory)
            #expect(first.isHeld)
            let error = #expect(throws: FlatSyncError.self) { try DirectoryLock.acquire(in: directory) }
            #expect(error?.code == .storeLocked)

            first.release()
            #expect(!first.isHeld)
            first.release()  // A second release does nothing.

            let second = try DirectoryLock.acquire(in: directory)
            #expect(second.isHeld)
            second.release()
        }
    }

    @Test func theLockFileIsCreatedWithMode0600() throws {
        try withTemporaryDirectory { directory in
            let lock = try DirectoryLock.acquire(in: directory)
            defer { lock.release() }
            #expect(permissions(of: URL(fileURLWithPath: lock.path)) == 0o600)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func anotherProcessHoldsTheLockUntilItIsKilled() async throws {
        try await withTemporaryDirectory { directory in
            let child = try ChildProcess(["hold-lock", directory.path])
            #expect(await child.readLine() == "locked")

            let error = #expect(throws: FlatSyncError.self) { try DirectoryLock.acquire(in: directory) }
            #expect(error?.code == .storeLocked)

            child.kill(SIGKILL)
            let exit = await child.waitForExit()
            #expect(exit == ChildProcess.Exit(status: SIGKILL, signaled: true))

            // The kernel dropped the dead holder's lock.
            let lock = try DirectoryLock.acquire(in: directory)
            lock.release()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func anotherProcessReleasesTheLockWhenItExits() async throws {
        try await withTemporaryDirectory { directory in
            let child = try ChildProcess(["hold-lock", directory.path])
            #expect(await child.readLine() == "locked")
            child.closeInput()
            #expect(await child.waitForExit() == ChildProcess.Exit(status: 0, signaled: false))
            let lock = try DirectoryLock.acquire(in: directory)
            lock.release()
        }
    }
}

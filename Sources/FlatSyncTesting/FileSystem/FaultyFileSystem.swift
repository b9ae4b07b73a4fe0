import FlatSync
import Foundation
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A file system that passes every call to another one (the real one by default) and fails the calls it
/// is told to: the I/O-error double of FlatSync's ``FileSystem`` seam.
///
/// It numbers the calls it sees (``callCount``), so a test can run a workload once to count them and then
/// fail each one in turn — SQLite's I/O-error sweep — with ``inject(_:atCall:)``; or fail the next call of
/// a kind with ``failNext(_:with:)``. A failed flush of a ``SimulatedDisk`` file also drops the durability
/// of that file's unflushed data, as Linux does after a failed `fsync` (the pages are marked clean).
package final class FaultyFileSystem: FileSystemCalls {
    /// The kinds of call, one per ``FileSystemCalls`` method; `write` covers both writes (at the
    /// descriptor's offset and at a position).
    package enum Call: String, Sendable, CaseIterable {
        case open, close, write, read, size, sync, truncate, lock, unlock, rename, link, unlink, makeDirectory
        case syncDirectory, itemKind, inode, contentsOfDirectory
    }

    /// A fault the sweep injects at one call.
    package enum Fault: String, Sendable, CaseIterable, CustomStringConvertible {
        /// The call fails with `EIO` and does nothing (a flush that fails this way loses the data it held).
        case eio
        /// The disk is full from this call on, until ``FaultyFileSystem/clearFaults()``: every call that
        /// needs space fails with `ENOSPC` (a write first writes what fits, then fails).
        case enospc
        /// The call is interrupted (`EINTR`) before doing anything; the caller must retry it.
        case eintr
        /// A write writes only part of its bytes and says so; the caller must write the rest.
        case shortWrite
        /// A flush (of a file or a directory) fails with `EIO`, and the data it held is not durable.
        case fsyncFailure

        package var description: String { rawValue }

        /// Whether this fault can happen to `call` (with `flags`, for an open).
        package func applies(to call: Call, flags: Int32 = 0) -> Bool {
            switch self {
            case .eio:
                return call != .close && call != .unlock
            case .enospc:
                switch call {
                case .write, .sync, .rename, .link, .makeDirectory: return true
                case .open: return flags & O_CREAT != 0
                default: return false
                }
            case .eintr:
                switch call {
                case .open, .write, .read, .truncate, .lock, .rename, .link, .unlink, .makeDirectory: return true
                default: return false
                }
            case .shortWrite:
                return call == .write
            case .fsyncFailure:
                return call == .sync || call == .syncDirectory
            }
        }
    }

    /// One injected failure, as it happened.
    package struct Injection: Sendable, CustomStringConvertible {
        package var number: Int
        package var call: Call
        package var path: String?
        package var fault: Fault
        /// For a write: whether every byte it was given was zero (space reserved ahead of the data, say).
        package var wroteOnlyZeros = false

        package var description: String { "call \(number) (\(call) \(path ?? "")): \(fault)" }
    }

    private struct State {
        var calls = 0
        var paths: [Int32: String] = [:]
        var sweep: (fault: Fault, at: Int)?
        var diskFull = false
        var shortWriteOn: Set<Int32> = []
        var once: [(call: Call, errno: Errno, pathSuffix: String?)] = []
        var injections: [Injection] = []
        var logging = false
        var log: [(call: Call, flags: Int32)] = []
        var holdNextSync = false
        var holdingSync = false
    }

    /// The file system the calls go to.
    package let inner: any FileSystemCalls
    private let state = Mutex(State())
    /// What a held `sync` waits on (see ``holdNextSync()``).
    private let heldSyncRelease = DispatchSemaphore(value: 0)

    package init(wrapping inner: any FileSystemCalls = POSIXFileSystem()) {
        self.inner = inner
    }

    /// The calls seen so far (close and unlock are not counted: they cannot fail).
    package var callCount: Int { state.withLock { $0.calls } }

    /// The failures injected so far.
    package var injections: [Injection] { state.withLock { $0.injections } }

    /// Keep the kind (and the flags of an open) of every counted call in ``callLog``.
    package var logsCalls: Bool {
        get { state.withLock { $0.logging } }
        set { state.withLock { $0.logging = newValue } }
    }

    /// The counted calls so far, in order, when ``logsCalls`` is on: call `n` is `callLog[n - 1]`.
    package var callLog: [(call: Call, flags: Int32)] { state.withLock { $0.log } }

    /// Injects `fault` into the `number`-th counted call (1-based), if the fault applies to that call.
    package func inject(_ fault: Fault, atCall number: Int) {
        state.withLock { $0.sweep = (fault, number) }
    }

    /// Fails the next `call` (whose path ends with `pathSuffix`, if given) with `errno`, once.
    package func failNext(_ call: Call, with errno: Errno, pathSuffix: String? = nil) {
        state.withLock { $0.once.append((call, errno, pathSuffix)) }
    }

    /// Makes the next `sync` block its thread, before it reaches the disk, until ``releaseHeldSync()``: a test
    /// can line callers up behind a flush that is under way. ``isHoldingSync`` is true while it blocks.
    package func holdNextSync() {
        state.withLock { $0.holdNextSync = true }
    }

    /// True while a `sync` is held (see ``holdNextSync()``).
    package var isHoldingSync: Bool { state.withLock { $0.holdingSync } }

    /// Lets the held `sync` go on. Called when none is held, it lets the next held one through at once.
    package func releaseHeldSync() {
        heldSyncRelease.signal()
    }

    /// Stops injecting: the disk has space again, pending one-off failures are dropped.
    package func clearFaults() {
        state.withLock {
            $0.sweep = nil
            $0.diskFull = false
            $0.once = []
            $0.shortWriteOn = []
        }
    }

    /// What to do with a call: go on (nil), fail with an errno, or write only part.
    private enum Decision {
        case fail(Errno)
        case writePart(Int)
    }

    private func decide(
        _ call: Call, path: String?, descriptor: Int32? = nil, flags: Int32 = 0, writeCount: Int = 0,
        onlyZeros: @autoclosure () -> Bool = false
    ) -> Decision? {
        state.withLock { s -> Decision? in
            let path = path ?? descriptor.flatMap { s.paths[$0] }
            if call == .close || call == .unlock { return nil }
            s.calls += 1
            let number = s.calls
            if s.logging { s.log.append((call, flags)) }
            func record(_ fault: Fault) {
                s.injections.append(
                    Injection(number: number, call: call, path: path, fault: fault, wroteOnlyZeros: onlyZeros()))
            }
            if let index = s.once.firstIndex(where: {
                $0.call == call && ($0.pathSuffix.map { suffix in path?.hasSuffix(suffix) ?? false } ?? true)
            }) {
                let failure = s.once.remove(at: index)
                switch failure.errno {
                case .noSpace: record(.enospc)
                case .interrupted: record(.eintr)
                default: record(failure.call == .sync || failure.call == .syncDirectory ? .fsyncFailure : .eio)
                }
                return .fail(failure.errno)
            }
            if let sweep = s.sweep, sweep.at == number, sweep.fault.applies(to: call, flags: flags) {
                s.sweep = nil
                switch sweep.fault {
                case .eio, .fsyncFailure:
                    record(sweep.fault)
                    return .fail(.ioError)
                case .eintr:
                    record(.eintr)
                    return .fail(.interrupted)
                case .shortWrite:
                    guard writeCount >= 2 else { return nil }
                    record(.shortWrite)
                    return .writePart(writeCount / 2)
                case .enospc:
                    s.diskFull = true
                }
            }
            if s.diskFull, Fault.enospc.applies(to: call, flags: flags) {
                record(.enospc)
                // A full disk takes what fits of a write first; the write after that fails.
                if call == .write, let descriptor, writeCount >= 2, !s.shortWriteOn.contains(descriptor) {
                    s.shortWriteOn.insert(descriptor)
                    return .writePart(writeCount / 2)
                }
                return .fail(.noSpace)
            }
            return nil
        }
    }

    /// A failed flush: the data it was to make durable may never be (Linux marks the pages clean).
    private func flushFailed(_ descriptor: Int32?) {
        guard let disk = inner as? SimulatedDisk else { return }
        if let descriptor { disk.loseUnflushedData(of: descriptor) }
    }

    // MARK: - FileSystemCalls

    package func open(_ path: String, flags: Int32, permissions: mode_t) -> Result<Int32, Errno> {
        if case .fail(let error) = decide(.open, path: path, flags: flags) { return .failure(error) }
        let result = inner.open(path, flags: flags, permissions: permissions)
        if case .success(let fd) = result { state.withLock { $0.paths[fd] = path } }
        return result
    }

    package func close(_ descriptor: Int32) {
        state.withLock {
            $0.paths[descriptor] = nil
            $0.shortWriteOn.remove(descriptor)
        }
        inner.close(descriptor)
    }

    package func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        write(descriptor, bytes, at: nil)
    }

    /// A `pwrite(2)` is a ``Call/write`` too: the same faults, counted in the same sequence.
    package func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        write(descriptor, bytes, at: Optional(offset))
    }

    /// Both writes: `write(2)` when `position` is nil, else `pwrite(2)` there, of the bytes the fault lets
    /// through.
    private func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at position: Int?) -> Result<Int, Errno> {
        var allowed = bytes
        switch decide(
            .write, path: nil, descriptor: descriptor, writeCount: bytes.count,
            onlyZeros: !bytes.isEmpty && bytes.allSatisfy { $0 == 0 })
        {
        case .fail(let error)?: return .failure(error)
        case .writePart(let count)?: allowed = UnsafeRawBufferPointer(rebasing: bytes[..<count])
        case nil: break
        }
        guard let position else { return inner.write(descriptor, allowed) }
        return inner.write(descriptor, allowed, at: position)
    }

    package func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int)
        -> Result<Int, Errno>
    {
        if case .fail(let error) = decide(.read, path: nil, descriptor: descriptor) { return .failure(error) }
        return inner.read(descriptor, into: buffer, at: offset)
    }

    package func size(_ descriptor: Int32) -> Result<Int, Errno> {
        if case .fail(let error) = decide(.size, path: nil, descriptor: descriptor) { return .failure(error) }
        return inner.size(descriptor)
    }

    package func sync(_ descriptor: Int32) -> Result<Void, Errno> {
        let hold = state.withLock { (s: inout State) -> Bool in
            guard s.holdNextSync else { return false }
            s.holdNextSync = false
            s.holdingSync = true
            return true
        }
        if hold {
            heldSyncRelease.wait()
            state.withLock { $0.holdingSync = false }
        }
        if case .fail(let error) = decide(.sync, path: nil, descriptor: descriptor) {
            flushFailed(descriptor)
            return .failure(error)
        }
        return inner.sync(descriptor)
    }

    package func truncate(_ descriptor: Int32, to length: Int) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.truncate, path: nil, descriptor: descriptor) { return .failure(error) }
        return inner.truncate(descriptor, to: length)
    }

    package func lock(_ descriptor: Int32, blocking: Bool) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.lock, path: nil, descriptor: descriptor) { return .failure(error) }
        return inner.lock(descriptor, blocking: blocking)
    }

    package func unlock(_ descriptor: Int32) {
        inner.unlock(descriptor)
    }

    package func rename(_ source: String, to destination: String) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.rename, path: source) { return .failure(error) }
        return inner.rename(source, to: destination)
    }

    package func link(_ source: String, to destination: String) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.link, path: source) { return .failure(error) }
        return inner.link(source, to: destination)
    }

    package func unlink(_ path: String) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.unlink, path: path) { return .failure(error) }
        return inner.unlink(path)
    }

    package func makeDirectory(_ path: String, permissions: mode_t) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.makeDirectory, path: path) { return .failure(error) }
        return inner.makeDirectory(path, permissions: permissions)
    }

    package func syncDirectory(_ path: String) -> Result<Void, Errno> {
        if case .fail(let error) = decide(.syncDirectory, path: path) { return .failure(error) }
        return inner.syncDirectory(path)
    }

    package func itemKind(_ path: String) -> Result<ItemKind?, Errno> {
        if case .fail(let error) = decide(.itemKind, path: path) { return .failure(error) }
        return inner.itemKind(path)
    }

    package func inode(_ path: String) -> Result<UInt64?, Errno> {
        if case .fail(let error) = decide(.inode, path: path) { return .failure(error) }
        return inner.inode(path)
    }

    package func contentsOfDirectory(_ path: String) -> Result<[String], Errno> {
        if case .fail(let error) = decide(.contentsOfDirectory, path: path) { return .failure(error) }
        return inner.contentsOfDirectory(path)
    }
}

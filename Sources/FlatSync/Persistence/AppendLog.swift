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

/// A durable, append-only log of framed binary entries: the durability point of FlatSync's command queue.
///
/// ## File format (version 2)
///
/// A 24-byte header — the ASCII bytes `FSYNCLOG`, the format version (`UInt32`, 2), the length of the
/// file as it was created (`UInt64`: every byte before it was on stable storage before the file got its
/// name) and the CRC-32 of those 20 bytes — followed by frames. Integers are little-endian.
///
/// | bytes | content |
/// |---|---|
/// | 4 | ``frameMagic`` |
/// | 4 | payload length, at most ``maxPayloadSize`` |
/// | 8 | *synced through*: an offset every byte before which was on stable storage when the frame was appended |
/// | 4 | CRC-32 of the length, the synced-through offset and the payload |
/// | n | payload |
///
/// The synced-through offsets let recovery tell a torn tail from damage. A power loss in the middle of a
/// group flush may leave any of that flush's sectors on disk and not others, so a valid frame can follow
/// an invalid one; but no frame of that flush — nor of any earlier unflushed one — claims the damaged
/// bytes were on stable storage. Damage below the highest claim (or below the header's length) hit bytes
/// that were durable: that is real damage, and the file is quarantined. Version 1 (16-byte header,
/// 12-byte frames without the offset) is still read, and rewritten as version 2 when opened.
///
/// ## Reserved space
///
/// The file is kept up to ``reservationSize`` longer than its frames, with zeros written ahead of need, and
/// frames are written into them at their offset (`pwrite`). A flush then overwrites blocks the file
/// already has and keeps its size, so `fdatasync` writes the data alone and not the inode too. ``close()``
/// cuts the zeros off again; after a crash, ``open(at:durability:now:fileSystem:)`` takes zeros after the
/// last frame for reserved space, not for a torn entry.
///
/// ## Durability
///
/// In ``Durability/buffered`` mode ``append(_:)`` writes the frames to the file (`pwrite(2)`) before it
/// returns, so they survive the process being killed. In ``Durability/fsync`` mode ``append(_:)`` only
/// buffers them in memory, and ``waitUntilDurable(_:)`` makes them durable with group commit: the first
/// waiter becomes the leader and writes and flushes everything buffered so far on its own thread, while
/// waiters that arrive during that flush suspend and are covered by the next one, which the first of them
/// leads.
///
/// A failed write or flush is never retried. After a failed `fsync` the kernel may have dropped the dirty
/// pages, so a second `fsync` could report success for lost data, and a later append that succeeds could
/// leave a hole of lost bytes before it. So a failure poisons the file: its descriptor is closed, the
/// waiters get the ``FlatSyncError/Code-swift.struct/ioFailed`` error and every later append throws
/// ``FlatSyncError/Code-swift.struct/storeClosed`` — until ``rewrite(_:)`` replaces the file with a fresh
/// one (a new inode, written and flushed in full), which is how the store recovers. Reopening the log
/// recovers whatever reached the file.
///
/// Every file-system call goes through the ``FileSystem`` given to ``open(at:durability:now:fileSystem:)``.
/// Only one opener may use a file at a time (the caller holds the directory's lock).
package final class AppendLog: Sendable {
    /// Identifies everything appended up to and including one ``AppendLog/append(_:)`` call; pass it to
    /// ``AppendLog/waitUntilDurable(_:)``. Later appends have greater tickets.
    package struct Ticket: Comparable, Hashable, Sendable, CustomStringConvertible {
        /// The number of entries this log instance had accepted when the ticket was issued.
        package let sequence: UInt64

        package init(sequence: UInt64) { self.sequence = sequence }

        package static func < (lhs: Ticket, rhs: Ticket) -> Bool { lhs.sequence < rhs.sequence }

        package var description: String { "Ticket(\(sequence))" }
    }

    /// The first 8 bytes of every log file.
    package static let headerMagic: [UInt8] = Array("FSYNCLOG".utf8)
    /// The format version this code writes.
    package static let formatVersion: UInt32 = 2
    /// Bytes in the file header.
    package static let headerSize = 24
    /// The marker at the start of every frame (the bytes `B9 79 37 9E` on disk).
    package static let frameMagic: UInt32 = 0x9E37_79B9
    /// Bytes in a frame before its payload: marker, length, synced-through offset, checksum.
    package static let frameHeaderSize = 20
    /// The largest payload a frame may carry: 512 MiB.
    package static let maxPayloadSize = 512 << 20
    /// The file is reserved in steps of this many bytes: when frames end past the reserved space, zeros are
    /// written after them up to the next multiple of it (see *Reserved space* above).
    package static let reservationSize = 64 << 10

    /// Where the reserved space ends once frames end at `end`: the next multiple of ``reservationSize``
    /// past it.
    package static func reservedEnd(after end: Int) -> Int {
        (end / reservationSize + 1) * reservationSize
    }

    /// The log file.
    package let url: URL
    /// `url.path`, computed once: `URL.path` costs more than a buffered append.
    package let path: String
    /// What a durable entry has survived; fixed when the log is opened.
    package let durability: Durability
    /// Where the file-system calls go.
    package let fileSystem: FileSystem

    /// Everything that changes. Never held while waiting for the disk, except by ``rewrite(_:)`` and by
    /// ``append(_:)`` in buffered mode, whose `write(2)` must happen in ticket order.
    private let state: Mutex<State>
    /// Held while frames are written and flushed, and while ``rewrite(_:)`` or ``close()`` swap or close the
    /// file, so that those never race a leader's flush. Lock order: `io`, then `state`.
    private let io = Mutex(())

    /// A log appending to `descriptor`, a file whose frames end at `fileSize`, followed by zeros up to
    /// `allocatedSize`, all durable before `syncedThrough`.
    init(
        url: URL, durability: Durability, descriptor: Int32, fileSize: Int, allocatedSize: Int? = nil,
        syncedThrough: Int? = nil, fileSystem: FileSystem
    ) {
        self.url = url
        self.path = url.path
        self.durability = durability
        self.fileSystem = fileSystem
        self.state = Mutex(
            State(
                descriptor: descriptor, fileSize: fileSize, allocatedSize: max(allocatedSize ?? fileSize, fileSize),
                syncedThrough: syncedThrough ?? fileSize))
    }

    deinit {
        close()
    }

    // MARK: - Appending

    /// Encodes `payloads` as frames, in order, after everything appended before.
    ///
    /// In buffered mode the frames are in the file (the page cache) when this returns. In fsync mode they
    /// are only buffered: pass the ticket to ``waitUntilDurable(_:)``.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/invalidArgument`` for a payload over
    ///   ``maxPayloadSize`` (nothing is appended); ``FlatSyncError/Code-swift.struct/storeClosed`` after
    ///   ``close()`` or an I/O failure; ``FlatSyncError/Code-swift.struct/ioFailed`` when the buffered-mode
    ///   write fails (which also poisons the log).
    @discardableResult
    package func append(_ payloads: [Data]) throws(FlatSyncError) -> Ticket {
        for payload in payloads where payload.count > Self.maxPayloadSize {
            throw FlatSyncError(
                .invalidArgument,
                "A log entry of \(payload.count) bytes is over the limit of \(Self.maxPayloadSize) bytes.",
                path: path
            )
        }
        let path = self.path
        let fileSystem = self.fileSystem
        switch durability {
        case .fsync:
            return try state.withLock { (s: inout State) throws(FlatSyncError) -> Ticket in
                try s.checkAcceptingWrites(path: path)
                for payload in payloads { Self.appendFrame(payload, syncedThrough: s.syncedThrough, to: &s.pending) }
                s.appended += UInt64(payloads.count)
                return Ticket(sequence: s.appended)
            }
        case .buffered:
            return try state.withLock { (s: inout State) throws(FlatSyncError) -> Ticket in
                try s.checkAcceptingWrites(path: path)
                guard !payloads.isEmpty else { return Ticket(sequence: s.appended) }
                // In buffered mode `pending` is only a scratch buffer, empty between calls.
                for payload in payloads { Self.appendFrame(payload, syncedThrough: s.syncedThrough, to: &s.pending) }
                let fd = s.descriptor
                let count = s.pending.count
                var failure: FlatSyncError?
                do throws(FlatSyncError) {
                    s.allocatedSize = try Self.writeFrames(
                        fd, s.pending, at: s.fileSize, allocatedSize: s.allocatedSize, fileSystem: fileSystem,
                        path: path)
                } catch {
                    failure = error
                }
                State.recycle(&s.pending)
                if let failure {
                    // Part of the frames may be in the file: a torn tail that the next open drops.
                    s.poison(failure, fileSystem: fileSystem)
                    throw failure
                }
                s.fileSize += count
                s.appended += UInt64(payloads.count)
                s.durable = s.appended
                return Ticket(sequence: s.appended)
            }
        }
    }

    /// Returns when every entry up to `ticket` is durable at the log's ``durability`` level.
    ///
    /// Buffered mode: returns at once (``append(_:)`` already wrote the entries). Fsync mode: group commit.
    /// If no flush is running the caller becomes the leader and writes and flushes everything buffered so
    /// far on its own thread; otherwise it suspends until a flush covers its ticket, or until it is handed
    /// the lead of the next one (see ``flushAsLeader()``). It runs on the global executor, never on the
    /// caller's actor, and is not cancellable (the entries are appended already).
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` (cause: the `POSIXError`) when the flush that
    ///   would cover the ticket failed, or failed earlier.
    #if compiler(>=6.2)
        @concurrent
        package func waitUntilDurable(_ ticket: Ticket) async throws(FlatSyncError) {
            try await waitForFlush(ticket)
        }
    #else
        package func waitUntilDurable(_ ticket: Ticket) async throws(FlatSyncError) {
            try await waitForFlush(ticket)
        }
    #endif

    /// Returns when every entry up to `ticket` is on stable storage, whatever the log's ``durability``: in
    /// fsync mode that is ``waitUntilDurable(_:)``; in buffered mode it flushes the file once. A snapshot
    /// calls it before it is written, so that it never holds a change whose entry a power loss could take.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the flush failed (which poisons the log).
    #if compiler(>=6.2)
        @concurrent
        package func waitUntilFlushed(_ ticket: Ticket) async throws(FlatSyncError) {
            try await flushForSnapshot(ticket)
        }
    #else
        package func waitUntilFlushed(_ ticket: Ticket) async throws(FlatSyncError) {
            try await flushForSnapshot(ticket)
        }
    #endif

    /// Calls `body` once every entry up to `ticket` is durable (with nil), or once the flush that would
    /// cover it failed (with the error); at once when that is known already. It never leads a flush: the
    /// caller must make sure one runs, by waiting on a ticket at least as late itself
    /// (``waitUntilDurable(_:)``). A combiner registers one callback for all the writers whose changes
    /// went into one entry.
    package func whenDurable(_ ticket: Ticket, _ body: @escaping @Sendable (FlatSyncError?) -> Void) {
        guard durability == .fsync else { return body(nil) }
        let sequence = ticket.sequence
        let now = state.withLock { (s: inout State) -> Wakeup? in
            if sequence <= s.durable { return .durable }
            if let failure = s.failure { return .failed(failure) }
            s.waiters.append(Waiter(sequence: sequence, resumer: .callback(body)))
            return nil
        }
        if let now { Resumer.callback(body).resume(now) }
    }

    /// Writes and flushes everything appended so far on the calling thread, when no flush is running;
    /// returns at once otherwise (a waiter leads the next one), in buffered mode, and when
    /// everything is durable already.
    ///
    /// A large batch calls it right after appending its entry, on one thread while the store takes the
    /// batch into its command queue on another, so that the flush overlaps that work. The flush is a
    /// leader's like any other: it resumes the waiters it covers, and its failure poisons the log, which
    /// every waiter then hears — so it throws nothing itself.
    package func flushIfIdle() {
        guard durability == .fsync else { return }
        let leads = state.withLock { (s: inout State) -> Bool in
            guard !s.flushing, s.failure == nil, s.durable < s.appended else { return false }
            s.flushing = true
            return true
        }
        // The failure is the log's now (poisoned), and the batch's writer hears it when it waits.
        if leads { try? flushAsLeader() }
    }

    private func flushForSnapshot(_ ticket: Ticket) async throws(FlatSyncError) {
        guard durability == .buffered else { return try await waitForFlush(ticket) }
        try syncWrittenFrames()
    }

    /// Flushes every frame written so far, at once, on the calling thread: for a snapshot that must not hold
    /// a change the log could still lose (see ``waitUntilFlushed(_:)``), such as one the store's recovery
    /// writes of what it replayed, which may be only in the page cache after a killed process.
    package func syncWrittenFrames() throws(FlatSyncError) {
        let path = self.path
        let fileSystem = self.fileSystem
        // Under `io`, so that no rewrite or close swaps the file meanwhile; appends go on writing.
        let failure = io.withLock { _ -> FlatSyncError? in
            let (descriptor, end, failure) = state.withLock { ($0.descriptor, $0.fileSize, $0.failure) }
            if let failure { return failure }
            if descriptor < 0 { return FlatSyncError(.storeClosed, "The log is closed; reopen the store.", path: path) }
            do throws(FlatSyncError) {
                try fileSystem.sync(descriptor, path: path)
            } catch {
                state.withLock { $0.poison(error, fileSystem: fileSystem) }
                return error
            }
            state.withLock { $0.syncedThrough = max($0.syncedThrough, end) }
            return nil
        }
        if let failure { throw failure }
    }

    private func waitForFlush(_ ticket: Ticket) async throws(FlatSyncError) {
        guard durability == .fsync else { return }
        let sequence = ticket.sequence
        while true {
            var wakeup = state.withLock { $0.decide(sequence) }
            if wakeup == nil {
                wakeup = await withCheckedContinuation { (continuation: CheckedContinuation<Wakeup, Never>) in
                    let now = state.withLock { (s: inout State) -> Wakeup? in
                        if let now = s.decide(sequence) { return now }
                        s.waiters.append(Waiter(sequence: sequence, resumer: .continuation(continuation)))
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            }
            switch wakeup {
            case .durable, nil: return
            case .failed(let error): throw error
            case .lead: try flushAsLeader()
            }
        }
    }

    /// Writes and flushes everything buffered and resumes the waiters it covered. Only one leader runs at a
    /// time (`State.flushing`); when it is done, the first waiter it did not cover leads the next flush,
    /// which takes everything appended meanwhile: the writers that arrived during one flush share the next.
    private func flushAsLeader() throws(FlatSyncError) {
        let path = self.path
        let fileSystem = self.fileSystem
        let (resumptions, failure) = io.withLock { _ -> ([Resumption], FlatSyncError?) in
            let job = state.withLock { (s: inout State) -> FlushJob? in
                if s.failure != nil { return nil }
                return s.takePendingForFlush()
            }
            var through: UInt64?
            if var job {
                let (failure, allocatedSize) = Self.writeAndSync(job, fileSystem: fileSystem, path: path)
                if failure == nil { through = job.through }
                job.bytes.removeAll(keepingCapacity: true)
                let buffer = job.bytes
                return state.withLock { (s: inout State) in
                    s.spare = buffer
                    s.allocatedSize = max(s.allocatedSize, allocatedSize)
                    s.recordFlush(through: through, endingAt: job.end, failure: failure, fileSystem: fileSystem)
                    s.flushing = false
                    return (s.settleWaiters(), s.failure)
                }
            }
            // Nothing was buffered (a rewrite or close covered it), or the log failed meanwhile.
            return state.withLock { (s: inout State) in
                s.flushing = false
                return (s.settleWaiters(), s.failure)
            }
        }
        Self.resume(resumptions)
        if let failure { throw failure }
    }

    // MARK: - Compaction and closing

    /// Durably replaces the log with exactly `payloads` and continues appending to the new file.
    ///
    /// The new file is written through ``DurableFileWriter`` (temporary file, flush, rename, directory
    /// flush), so after a crash the log holds either the old entries or exactly these. Entries buffered
    /// but not yet flushed are discarded (the caller's payloads supersede them) and every ticket issued so
    /// far counts as durable afterwards. Appends that run concurrently wait for the swap and land in the
    /// new file; a running flush is allowed to finish first.
    ///
    /// This is also how a log poisoned by an I/O failure recovers: the fresh file shares nothing with the
    /// one whose flush failed, so no byte of it depends on pages the kernel may have dropped.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/storeClosed`` after ``close()``;
    ///   ``FlatSyncError/Code-swift.struct/ioFailed`` when the replacement fails, which poisons the log.
    package func rewrite(_ payloads: [Data]) throws(FlatSyncError) {
        for payload in payloads where payload.count > Self.maxPayloadSize {
            throw FlatSyncError(
                .invalidArgument,
                "A log entry of \(payload.count) bytes is over the limit of \(Self.maxPayloadSize) bytes.",
                path: path
            )
        }
        let contents = Data(Self.encodeLog(payloads))
        let url = self.url
        let path = self.path
        let fileSystem = self.fileSystem
        let (resumptions, failure) = io.withLock { _ -> ([Resumption], FlatSyncError?) in
            state.withLock { (s: inout State) -> ([Resumption], FlatSyncError?) in
                if s.closed {
                    return ([], FlatSyncError(.storeClosed, "The log is closed; reopen the store.", path: path))
                }
                do throws(FlatSyncError) {
                    try DurableFileWriter(fileSystem: fileSystem).write(contents, to: url)
                    let descriptor = try Self.openForAppending(path, fileSystem: fileSystem)
                    if s.descriptor >= 0 { fileSystem.close(s.descriptor) }
                    s.descriptor = descriptor
                } catch {
                    // The path may already hold the new file while the descriptor still points at the old
                    // one: stop writing rather than guess.
                    s.poison(error, fileSystem: fileSystem)
                    return (s.settleWaiters(), error)
                }
                s.failure = nil
                s.fileSize = contents.count
                s.allocatedSize = contents.count
                s.syncedThrough = contents.count
                s.pending = []
                s.durable = s.appended
                return (s.settleWaiters(), nil)
            }
        }
        Self.resume(resumptions)
        if let failure { throw failure }
    }

    /// In fsync mode, writes and flushes the entries still buffered; then cuts off the reserved zeros and
    /// closes the file. Later appends throw ``FlatSyncError/Code-swift.struct/storeClosed``. Calling it again
    /// does nothing.
    ///
    /// If that last flush fails, its waiters get the error and the entries may be lost; they were never
    /// acknowledged.
    package func close() {
        let path = self.path
        let fileSystem = self.fileSystem
        let resumptions = io.withLock { _ -> [Resumption] in
            let job = state.withLock { (s: inout State) -> FlushJob? in
                guard !s.closed else { return nil }
                s.closed = true
                guard s.failure == nil, !s.pending.isEmpty else { return nil }
                return s.takePendingForFlush()
            }
            let failure = job.flatMap { Self.writeAndSync($0, fileSystem: fileSystem, path: path).failure }
            return state.withLock { (s: inout State) -> [Resumption] in
                s.recordFlush(
                    through: job?.through, endingAt: job?.end ?? 0, failure: failure, fileSystem: fileSystem)
                if s.descriptor >= 0 {
                    // Always, whatever `allocatedSize` says: this flush may have reserved more, and a reservation
                    // that failed half-way left zeros it did not count. Not flushed, and a failure changes
                    // nothing: if the cut is lost, the next open keeps the zeros as space.
                    try? fileSystem.truncate(s.descriptor, to: s.fileSize, path: path)
                    fileSystem.close(s.descriptor)
                    s.descriptor = -1
                }
                return s.settleWaiters()
            }
        }
        Self.resume(resumptions)
    }

    // MARK: - Inspection and test seams

    /// The size of the log in bytes, including entries buffered but not yet written.
    package var byteCount: Int {
        state.withLock { $0.fileSize + $0.pending.count }
    }

    /// How many successful flushes (`fsync`, or `F_FULLFSYNC` on Darwin) of appended entries this log has
    /// performed. Group commit keeps it below the number of appends.
    package var flushCount: Int {
        state.withLock { $0.flushCount }
    }

    /// How many writers wait for a flush: suspended callers of ``waitUntilDurable(_:)``, and the writers
    /// callbacks registered with ``whenDurable(_:_:)``.
    package var waiterCount: Int {
        state.withLock { $0.waiters.count }
    }

    /// The I/O failure that poisoned the log, until ``rewrite(_:)`` replaces the file; nil while it works.
    package var failure: FlatSyncError? {
        state.withLock { $0.failure }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// MARK: - State

extension AppendLog {
    /// What a waiter is told when it resumes.
    enum Wakeup: Sendable {
        /// Its ticket is durable.
        case durable
        /// It is the leader now: flush.
        case lead
        /// The flush failed, or an earlier one did.
        case failed(FlatSyncError)
    }

    struct Waiter: Sendable {
        var sequence: UInt64
        var resumer: Resumer
    }

    /// How a waiter hears its wakeup: a suspended ``AppendLog/waitUntilDurable(_:)``, which may be told to
    /// lead, or a callback registered with ``AppendLog/whenDurable(_:_:)``, which never leads.
    enum Resumer: Sendable {
        case continuation(CheckedContinuation<Wakeup, Never>)
        case callback(@Sendable (FlatSyncError?) -> Void)

        var canLead: Bool {
            if case .continuation = self { return true }
            return false
        }

        func resume(_ wakeup: Wakeup) {
            switch (self, wakeup) {
            case (.continuation(let continuation), _): continuation.resume(returning: wakeup)
            case (.callback(let body), .failed(let error)): body(error)
            case (.callback(let body), .durable): body(nil)
            case (.callback, .lead): preconditionFailure("a callback waiter was handed the lead")
            }
        }
    }

    typealias Resumption = (Resumer, Wakeup)

    /// Bytes taken from the buffer by a leader (or ``AppendLog/close()``) to write and flush.
    struct FlushJob: Sendable {
        var descriptor: Int32
        var bytes: [UInt8]
        /// The sequence of the last entry in `bytes`.
        var through: UInt64
        /// Where `bytes` end in the file once written.
        var end: Int
        /// The file's reserved size before they are: its length, frames and zeros.
        var allocatedSize: Int
    }

    struct State: Sendable {
        /// The open log file, or -1 once closed.
        var descriptor: Int32
        /// Where the frames in the file end, counting bytes a leader is writing now: where the next go.
        var fileSize: Int
        /// The file's length: `fileSize` and the zeros reserved after it (see ``AppendLog/reservationSize``).
        var allocatedSize: Int
        /// Every byte of the file before this offset is on stable storage: what new frames claim.
        var syncedThrough: Int
        /// Fsync mode: frames appended but not yet handed to a leader. Buffered mode: a scratch buffer.
        var pending: [UInt8] = []
        /// An empty buffer with capacity, swapped in for `pending` when a leader takes it.
        var spare: [UInt8] = []
        /// Entries accepted by ``AppendLog/append(_:)`` since open; the sequence of the latest ticket.
        var appended: UInt64 = 0
        /// Every ticket up to this sequence is durable.
        var durable: UInt64 = 0
        /// A leader is flushing or has been chosen: new waiters suspend instead of leading.
        var flushing = false
        /// Suspended waiters, in arrival order.
        var waiters: [Waiter] = []
        var closed = false
        /// The I/O failure that poisoned the log.
        var failure: FlatSyncError?
        var flushCount = 0

        init(descriptor: Int32, fileSize: Int, allocatedSize: Int, syncedThrough: Int) {
            self.descriptor = descriptor
            self.fileSize = fileSize
            self.allocatedSize = allocatedSize
            self.syncedThrough = syncedThrough
        }

        func checkAcceptingWrites(path: String) throws(FlatSyncError) {
            if closed { throw FlatSyncError(.storeClosed, "The log is closed; reopen the store.", path: path) }
            if let failure {
                throw FlatSyncError(
                    .storeClosed,
                    "The log stopped accepting writes after an I/O failure; rewrite it or reopen the store.",
                    cause: failure,
                    path: path
                )
            }
        }

        /// What a waiter for `sequence` does now, or nil to suspend.
        mutating func decide(_ sequence: UInt64) -> Wakeup? {
            if sequence <= durable { return .durable }
            if let failure { return .failed(failure) }
            if !flushing {
                flushing = true
                return .lead
            }
            return nil
        }

        /// Takes everything buffered for a flush; nil (and everything counts as durable) when nothing is.
        /// Call it holding the `io` lock: then nothing outside `pending` is in flight.
        mutating func takePendingForFlush() -> FlushJob? {
            guard !pending.isEmpty else {
                durable = appended
                return nil
            }
            var bytes = spare
            swap(&bytes, &pending)
            spare = []
            fileSize += bytes.count
            return FlushJob(
                descriptor: descriptor, bytes: bytes, through: appended, end: fileSize, allocatedSize: allocatedSize)
        }

        /// Records the outcome of a flush: `through` is the sequence it made durable (nil when it flushed
        /// nothing) and `end` the file size it made durable; `failure` poisons the log.
        mutating func recordFlush(through: UInt64?, endingAt end: Int, failure: FlatSyncError?, fileSystem: FileSystem)
        {
            if let failure {
                poison(failure, fileSystem: fileSystem)
            } else if let through {
                durable = max(durable, through)
                syncedThrough = max(syncedThrough, end)
                flushCount += 1
            }
        }

        /// Stops using the file after an I/O failure: its unflushed bytes may never reach the disk, and a
        /// later flush of the same file could report success without them. The descriptor is closed, so
        /// nothing can flush it again; ``AppendLog/rewrite(_:)`` starts a fresh file.
        mutating func poison(_ error: FlatSyncError, fileSystem: FileSystem) {
            if failure == nil { failure = error }
            if descriptor >= 0 {
                fileSystem.close(descriptor)
                descriptor = -1
            }
        }

        /// Returns the waiters to resume now: all of them with the failure if the log is poisoned, else the
        /// covered ones, plus — when no leader is running — the first uncovered one that can lead (not a
        /// callback) as the next leader.
        /// A leader clears `flushing` before calling this, so that it hands over to a waiter whose entries
        /// were buffered during its flush; ``AppendLog/rewrite(_:)`` and ``AppendLog/close()`` leave the flag
        /// to a leader that set it.
        mutating func settleWaiters() -> [Resumption] {
            if let failure {
                let all = waiters.map { ($0.resumer, Wakeup.failed(failure)) }
                waiters = []
                return all
            }
            var resumptions: [Resumption] = []
            var remaining: [Waiter] = []
            for waiter in waiters {
                if waiter.sequence <= durable {
                    resumptions.append((waiter.resumer, .durable))
                } else {
                    remaining.append(waiter)
                }
            }
            if !flushing, let next = remaining.firstIndex(where: { $0.resumer.canLead }) {
                flushing = true
                resumptions.append((remaining.remove(at: next).resumer, .lead))
            }
            waiters = remaining
            return resumptions
        }

        /// Empties a buffer, keeping its storage unless it grew large (a big batch should not pin memory).
        static func recycle(_ buffer: inout [UInt8]) {
            if buffer.capacity > 1 << 20 {
                buffer = []
            } else {
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }
}

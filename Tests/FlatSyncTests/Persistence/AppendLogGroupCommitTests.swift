import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@Suite struct AppendLogGroupCommitTests {
    // MARK: - Group commit

    @Test(.timeLimit(.minutes(1)))
    func concurrentAppendersShareFlushes() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let count = 200
            // Every task appends before any waits, so the sharing does not depend on how the scheduler
            // interleaves them (a one-thread pool would otherwise run each task to its end in turn).
            let appended = AsyncBarrier(count: count)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    group.addTask {
                        let ticket = try log.append([logPayload(index)])
                        await appended.arriveAndWait()
                        try await log.waitUntilDurable(ticket)
                    }
                }
                try await group.waitForAll()
            }
            #expect(log.flushCount < count, "group commit shares flushes between concurrent callers")
            #expect(log.flushCount == 1, "the first waiter's flush covered every entry")
            log.close()

            let (reopened, recovery) = try AppendLog.open(at: url, durability: .fsync)
            reopened.close()
            #expect(Set(recovery.payloads) == Set((0..<count).map { logPayload($0) }))
            #expect(recovery.payloads.count == count)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func freeRunningAppendersAreAllDurable() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let count = 200
            let start = AsyncBarrier(count: count)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    group.addTask {
                        await start.arriveAndWait()
                        for round in 0..<3 {
                            try await log.waitUntilDurable(log.append([logPayload(index * 3 + round)]))
                        }
                    }
                }
                try await group.waitForAll()
            }
            // How many flushes were shared depends on the scheduler; that none was lost does not.
            #expect((1...3 * count).contains(log.flushCount))
            log.close()

            let (reopened, recovery) = try AppendLog.open(at: url, durability: .fsync)
            reopened.close()
            #expect(Set(recovery.payloads) == Set((0..<3 * count).map { logPayload($0) }))
            #expect(recovery.payloads.count == 3 * count)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func waitersForEntriesAppendedBeforeAnyFlushShareOne() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            defer { log.close() }
            let tickets = try (0..<20).map { try log.append([logPayload($0)]) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for ticket in tickets.reversed() {
                    group.addTask { try await log.waitUntilDurable(ticket) }
                }
                try await group.waitForAll()
            }
            #expect(log.flushCount == 1)
            // Durable tickets return at once, without another flush.
            try await log.waitUntilDurable(tickets[0])
            try await log.waitUntilDurable(log.append([]))
            #expect(log.flushCount == 1)
        }
    }

    // MARK: - Writers queued behind a flush

    /// Starts a flush of entry `firstPayload` and holds it in `sync` while writers of the next `queued`
    /// entries queue behind it (and `alsoWaitingForTheLeader` more wait for the held entry itself), calls
    /// `beforeRelease`, then lets it finish. Returns the queued writers' tasks.
    private func queueBehindAHeldFlush(
        _ log: AppendLog, _ disk: FaultyFileSystem, queued: Int, alsoWaitingForTheLeader: Int = 0,
        firstPayload: Int = 0, beforeRelease: () throws -> Void = {}
    ) async throws -> [Task<Void, any Error>] {
        disk.holdNextSync()
        // The held flush blocks its thread: one of a private queue's, not of the pool the tests share.
        let leader = Task(executorPreference: HeldFlushExecutor()) {
            try await log.waitUntilDurable(log.append([logPayload(firstPayload)]))
        }
        var tasks: [Task<Void, any Error>] = []
        var covered: [Task<Void, any Error>] = []
        do {
            try await yieldUntil { disk.isHoldingSync }
            // Every entry of these tests is one payload, appended in order: payload n has sequence n + 1.
            let held = AppendLog.Ticket(sequence: UInt64(firstPayload + 1))
            for _ in 0..<alsoWaitingForTheLeader {
                covered.append(Task { try await log.waitUntilDurable(held) })
            }
            try await yieldUntil { log.waiterCount == alsoWaitingForTheLeader }
            for index in 1...queued {
                let ticket = try log.append([logPayload(firstPayload + index)])
                tasks.append(Task { try await log.waitUntilDurable(ticket) })
            }
            try await yieldUntil { log.waiterCount == alsoWaitingForTheLeader + queued }
            try beforeRelease()
        } catch {
            // A failing test must not leave the flush held: the log's close would wait for it forever.
            disk.releaseHeldSync()
            throw error
        }
        disk.releaseHeldSync()
        try await leader.value
        for task in covered { try await task.value }
        return tasks
    }

    /// Opens a log on a ``FaultyFileSystem`` in a temporary directory, runs `body` and closes the log.
    private func withFaultyLog(
        durability: Durability = .fsync, _ body: (AppendLog, FaultyFileSystem) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { directory in
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(
                at: directory.appendingPathComponent("commands.log"), durability: durability,
                fileSystem: FileSystem(faulty))
            defer { log.close() }
            try await body(log, faulty)
        }
    }

    /// The writers that queued behind a flush share the next one, which the first of them leads.
    @Test(.timeLimit(.minutes(1)))
    func writersQueuedBehindAFlushShareTheNextOne() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let disk = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(disk))
            defer { log.close() }
            let queued = try await queueBehindAHeldFlush(log, disk, queued: 3, alsoWaitingForTheLeader: 1)
            for task in queued { try await task.value }
            #expect(log.flushCount == 2, "one flush for the held entry, one for the three queued behind it")
            #expect(log.waiterCount == 0)
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0...3).map { logPayload($0) })
        }
    }

    @Test func aLoneWriterFlushesEachEntryAtOnce() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            defer { log.close() }
            for index in 0..<3 {
                try await log.waitUntilDurable(log.append([logPayload(index)]))
                #expect(log.flushCount == index + 1)
                #expect(log.waiterCount == 0)
            }
        }
    }

    /// A shared flush that fails tells every writer in it, and the log takes no more writes.
    @Test(.timeLimit(.minutes(1)))
    func aSharedFlushThatFailsTellsEveryWriterInIt() async throws {
        try await withFaultyLog { log, disk in
            // The queued writers' flush is held in its turn, and fails when it goes on.
            let queued = try await queueBehindAHeldFlush(log, disk, queued: 3) { disk.holdNextSync() }
            try await yieldUntil { disk.isHoldingSync }
            disk.failNext(.sync, with: .ioError)
            disk.releaseHeldSync()
            for task in queued {
                let error = await #expect(throws: FlatSyncError.self) { try await task.value }
                #expect(error?.code == .ioFailed)
            }
            #expect(log.flushCount == 1)
            #expect(log.failure?.code == .ioFailed)
        }
    }

    @Test func bufferedModeNeverFlushes() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .buffered)
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            log.close()
            #expect(log.flushCount == 0)
        }
    }

    // MARK: - Flushing before anyone waits (`flushIfIdle`)

    /// A large batch flushes its entry on a second thread before its writer waits: the flush is a leader's
    /// like any other, so the writer's wait then finds the entry durable and flushes nothing more.
    @Test func flushIfIdleFlushesWhatWasAppendedAndTheWaitFlushesNothingMore() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let ticket = try log.append([logPayload(0), logPayload(1)])
            log.flushIfIdle()
            #expect(log.flushCount == 1)
            try await log.waitUntilDurable(ticket)
            #expect(log.flushCount == 1, "the wait found the entries durable")
            log.flushIfIdle()
            #expect(log.flushCount == 1, "nothing appended since: nothing to flush")
            // What it flushed is on disk: a copy of the file now, before close writes anything, holds both.
            let copy = directory.appendingPathComponent("copy.log")
            try FileManager.default.copyItem(at: url, to: copy)
            log.close()
            #expect(try AppendLog.open(at: copy, durability: .fsync).1.payloads == [logPayload(0), logPayload(1)])
        }
    }

    @Test func flushIfIdleDoesNothingInBufferedMode() async throws {
        try await withFaultyLog(durability: .buffered) { log, faulty in
            _ = try log.append([logPayload(0)])
            let calls = faulty.callCount
            log.flushIfIdle()
            #expect(log.flushCount == 0)
            #expect(faulty.callCount == calls, "no file-system call: no write, no flush")
        }
    }

    /// While a flush runs, `flushIfIdle` leaves the entry to the next leader: it never waits for the disk.
    @Test(.timeLimit(.minutes(1)))
    func flushIfIdleLeavesARunningFlushAlone() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let disk = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(disk))
            defer { log.close() }
            var extra: AppendLog.Ticket?
            let queued = try await queueBehindAHeldFlush(log, disk, queued: 1) {
                extra = try log.append([logPayload(2)])
                log.flushIfIdle()
                #expect(log.flushCount == 0, "the held flush has not finished; flushIfIdle did not flush")
            }
            for task in queued { try await task.value }
            try await log.waitUntilDurable(try #require(extra))
            #expect(log.flushCount == 2, "the queued writer's flush took the extra entry too")
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0...2).map { logPayload($0) })
        }
    }

    /// A flush that fails there poisons the log like any other, and the writer hears it when it waits.
    @Test func aFailedFlushIfIdleIsHeardByTheWriter() async throws {
        try await withFaultyLog { log, faulty in
            faulty.failNext(.sync, with: .ioError)
            let ticket = try log.append([logPayload(0)])
            log.flushIfIdle()
            #expect(log.failure?.code == .ioFailed)
            let error = await #expect(throws: FlatSyncError.self) { try await log.waitUntilDurable(ticket) }
            #expect(error?.code == .ioFailed)
            #expect(log.flushCount == 0)
        }
    }

    // MARK: - Callbacks (`whenDurable`)

    /// What callbacks registered with `whenDurable` were told, in order: nil for durable.
    final class Heard: Sendable {
        private let calls = Mutex<[FlatSyncError?]>([])
        @Sendable func record(_ error: FlatSyncError?) { calls.withLock { $0.append(error) } }
        var all: [FlatSyncError?] { calls.withLock { $0 } }
    }

    /// A callback waits like a waiter but never leads: it is called by the flush a later waiter leads.
    @Test(.timeLimit(.minutes(1)))
    func aCallbackIsCalledByTheFlushThatCoversItAndNeverLeads() async throws {
        try await withTemporaryDirectory { directory in
            let (log, _) = try AppendLog.open(at: directory.appendingPathComponent("commands.log"), durability: .fsync)
            defer { log.close() }
            let heard = Heard()
            log.whenDurable(try log.append([logPayload(0)]), heard.record)
            #expect(log.waiterCount == 1)
            #expect(log.flushCount == 0, "registering a callback flushes nothing")
            #expect(heard.all.isEmpty)

            try await log.waitUntilDurable(log.append([logPayload(1)]))
            #expect(log.flushCount == 1)
            #expect(heard.all.count == 1)
            #expect(heard.all.first! == nil, "told durable")
            #expect(log.waiterCount == 0)
        }
    }

    @Test func aCallbackForADurableTicketOrInBufferedModeIsCalledAtOnce() async throws {
        try await withTemporaryDirectory { directory in
            for durability in [Durability.fsync, .buffered] {
                let (log, _) = try AppendLog.open(
                    at: directory.appendingPathComponent("\(durability).log"), durability: durability)
                defer { log.close() }
                let ticket = try log.append([logPayload(0)])
                if durability == .fsync { try await log.waitUntilDurable(ticket) }
                let heard = Heard()
                log.whenDurable(ticket, heard.record)
                #expect(heard.all.count == 1)
                #expect(heard.all.first! == nil)
                #expect(log.waiterCount == 0)
            }
        }
    }

    /// A failed flush tells the callbacks it would have covered; a callback registered after the failure
    /// is told at once.
    @Test(.timeLimit(.minutes(1)))
    func aFailedFlushTellsItsCallbacks() async throws {
        try await withFaultyLog { log, faulty in
            faulty.failNext(.sync, with: .ioError)
            let heard = Heard()
            let ticket = try log.append([logPayload(0)])
            log.whenDurable(ticket, heard.record)
            await #expect(throws: FlatSyncError.self) { try await log.waitUntilDurable(log.append([logPayload(1)])) }
            log.whenDurable(ticket, heard.record)
            #expect(heard.all.map { $0?.code } == [.ioFailed, .ioFailed])
        }
    }

    /// Closing flushes what is buffered and tells the callbacks waiting for it.
    @Test func closingTellsTheCallbacks() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let heard = Heard()
            log.whenDurable(try log.append([logPayload(0)]), heard.record)
            log.close()
            #expect(heard.all.count == 1)
            #expect(heard.all.first! == nil)
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == [logPayload(0)])
        }
    }

    /// A callback registered behind a running flush waits without leading, and the next flush covers it.
    @Test(.timeLimit(.minutes(1)))
    func aCallbackQueuedBehindAFlushIsCoveredByTheNextOne() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let disk = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(disk))
            defer { log.close() }
            let heard = Heard()
            let queued = try await queueBehindAHeldFlush(log, disk, queued: 1) {
                log.whenDurable(try log.append([logPayload(2)]), heard.record)
                #expect(log.waiterCount == 2)
            }
            for task in queued { try await task.value }
            #expect(heard.all.count == 1)
            #expect(heard.all.first! == nil)
            #expect(log.flushCount == 2, "the queued writer's flush covered the callback's entry")
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0...2).map { logPayload($0) })
        }
    }

    // MARK: - I/O failures

    @Test func aFailedFsyncPoisonsTheLogAndIsNeverRetried() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(faulty))
            defer { log.close() }
            let first = try log.append([logPayload(0)])
            try await log.waitUntilDurable(first)
            #expect(log.flushCount == 1)

            faulty.failNext(.sync, with: .ioError)
            let second = try log.append([logPayload(1)])
            let third = try log.append([logPayload(2)])
            // Both waiters of the failing flush get the error, whichever of them leads it.
            try await withThrowingTaskGroup(of: FlatSyncError?.self) { group in
                for ticket in [second, third] {
                    group.addTask {
                        do {
                            try await log.waitUntilDurable(ticket)
                            return nil
                        } catch {
                            return error as? FlatSyncError
                        }
                    }
                }
                for try await error in group {
                    #expect(error?.code == .ioFailed)
                    #expect((error?.cause as? POSIXError)?.code == .EIO)
                    #expect(error?.message.hasPrefix("fsync failed") == true)
                }
            }
            #expect(log.flushCount == 1, "the failed flush is not counted")
            #expect(faulty.injections.count == 1, "the injected failure fired once")
            #expect(log.failure?.code == .ioFailed)

            // Waiting again is not a retry that could report success, and nothing flushes the file again.
            let callsBefore = faulty.callCount
            let again = await #expect(throws: FlatSyncError.self) { try await log.waitUntilDurable(second) }
            #expect(again?.code == .ioFailed)
            #expect(log.flushCount == 1)
            #expect(faulty.callCount == callsBefore, "no call reached the file system")

            let refused = #expect(throws: FlatSyncError.self) { try log.append([logPayload(3)]) }
            #expect(refused?.code == .storeClosed)
            #expect(refused?.message.contains("I/O failure") == true)
            #expect((refused?.cause as? FlatSyncError)?.code == .ioFailed)

            // What was durable before stays durable.
            try await log.waitUntilDurable(first)
        }
    }

    /// After a failed flush the file's unflushed bytes may never reach the disk, so the log does not go on
    /// appending to it: a rewrite replaces it with a fresh file, and appends continue there.
    @Test func aRewriteRecoversAFailedLogWithAFreshFile() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(faulty))
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            faulty.failNext(.sync, with: .ioError)
            let failed = try log.append([logPayload(1)])
            await #expect(throws: FlatSyncError.self) { try await log.waitUntilDurable(failed) }
            let inode = try FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? NSNumber

            try log.rewrite([logPayload(0), logPayload(1)])
            #expect(log.failure == nil)
            let replaced = try FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? NSNumber
            #expect(inode != replaced, "the log is a new file, not the one whose flush failed")
            try await log.waitUntilDurable(failed)
            try await log.waitUntilDurable(log.append([logPayload(2)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0..<3).map { logPayload($0) })
        }
    }

    @Test func aFailedWriteInFsyncModePoisonsTheLog() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(faulty))
            defer { log.close() }
            faulty.failNext(.write, with: .noSpace)
            let ticket = try log.append([logPayload(0)])
            let error = await #expect(throws: FlatSyncError.self) { try await log.waitUntilDurable(ticket) }
            #expect(error?.code == .ioFailed)
            #expect((error?.cause as? POSIXError)?.code == .ENOSPC)
            #expect(log.flushCount == 0)
            #expect(throws: FlatSyncError.self) { try log.append([logPayload(1)]) }
        }
    }

    @Test func aFailedWriteInBufferedModePoisonsTheLog() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .buffered, fileSystem: FileSystem(faulty))
            defer { log.close() }
            try log.append([logPayload(0)])
            faulty.failNext(.write, with: .noSpace)
            let error = #expect(throws: FlatSyncError.self) { try log.append([logPayload(1)]) }
            #expect(error?.code == .ioFailed)
            #expect((error?.cause as? POSIXError)?.code == .ENOSPC)
            let refused = #expect(throws: FlatSyncError.self) { try log.append([logPayload(2)]) }
            #expect(refused?.code == .storeClosed)
            log.close()
            #expect(try AppendLog.open(at: url, durability: .buffered).1.payloads == [logPayload(0)])
        }
    }

    @Test(arguments: Durability.allCases)
    func shortWritesAndInterruptionsAreFinishedNotReported(durability: Durability) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: durability, fileSystem: FileSystem(faulty))
            for index in 0..<4 {
                if index % 2 == 0 {
                    faulty.inject(.shortWrite, atCall: faulty.callCount + 1)
                } else {
                    faulty.failNext(.write, with: .interrupted)
                }
                try await log.waitUntilDurable(log.append([logPayload(index, size: 300)]))
            }
            #expect(faulty.injections.count == 4)
            log.close()
            #expect(
                try AppendLog.open(at: url, durability: durability).1.payloads
                    == (0..<4).map { logPayload($0, size: 300) })
        }
    }

    // MARK: - Rewrite (compaction)

    @Test(arguments: Durability.allCases)
    func rewriteReplacesTheEntriesAndLaterAppendsFollow(durability: Durability) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: durability)
            try await log.waitUntilDurable(log.append((0..<5).map { logPayload($0) }))
            let kept = [logPayload(10), logPayload(11, size: 200)]
            try log.rewrite(kept)
            #expect(log.byteCount == AppendLog.encodeLog(kept).count)
            #expect(try fileBytes(url) == AppendLog.encodeLog(kept))
            #expect(permissions(of: url) == 0o600)
            try await log.waitUntilDurable(log.append([logPayload(12)]))
            try log.rewrite([])
            try await log.waitUntilDurable(log.append([logPayload(13)]))
            log.close()

            let (reopened, recovery) = try AppendLog.open(at: url, durability: durability)
            reopened.close()
            #expect(recovery.payloads == [logPayload(13)])
            #expect(recovery.damage == nil && recovery.truncatedTailBytes == 0)
            #expect(try fileNames(in: directory) == ["commands.log"], "no temporary file is left")
        }
    }

    @Test func rewriteSupersedesEntriesNotYetFlushed() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let ticket = try log.append([logPayload(0), logPayload(1)])
            try log.rewrite([logPayload(5)])
            try await log.waitUntilDurable(ticket)
            #expect(log.flushCount == 0, "the rewrite made every ticket durable")
            try await log.waitUntilDurable(log.append([logPayload(6)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == [logPayload(5), logPayload(6)])
        }
    }

    @Test func aFailedRewriteKeepsTheOldFileAndPoisonsTheLog() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(faulty))
            defer { log.close() }
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            let before = try fileBytes(url)
            faulty.failNext(.sync, with: .ioError)
            let error = #expect(throws: FlatSyncError.self) { try log.rewrite([logPayload(9)]) }
            #expect(error?.code == .ioFailed)
            #expect(try fileBytes(url) == before)
            #expect(try fileNames(in: directory) == ["commands.log"])
            let refused = #expect(throws: FlatSyncError.self) { try log.append([logPayload(1)]) }
            #expect(refused?.code == .storeClosed)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func rewriteWhileOthersWaitForDurabilityCompletesEveryone() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let appenders = 100
            let rewrites = 5
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<appenders {
                    group.addTask {
                        let ticket = try log.append([logPayload(index)])
                        try await log.waitUntilDurable(ticket)
                    }
                    if index % (appenders / rewrites) == 0 {
                        let round = index / (appenders / rewrites)
                        group.addTask {
                            try log.rewrite([logPayload(1000 + round)])
                        }
                    }
                }
                try await group.waitForAll()
            }
            log.close()

            let (reopened, recovery) = try AppendLog.open(at: url, durability: .fsync)
            reopened.close()
            #expect(recovery.damage == nil)
            // The file is one rewrite's payload followed by entries appended after that rewrite, each once.
            let rewritten = (1000..<1000 + rewrites).map { logPayload($0) }
            let first = try #require(recovery.payloads.first)
            #expect(rewritten.contains(first))
            let appended = Set((0..<appenders).map { logPayload($0) })
            let rest = recovery.payloads.dropFirst()
            #expect(rest.allSatisfy { appended.contains($0) })
            #expect(Set(rest).count == rest.count)
        }
    }
}

/// Runs its jobs on a private serial queue, whose threads are not those of Swift's cooperative pool: a
/// flush held in `sync` there blocks no thread that other tests running in parallel need.
private final class HeldFlushExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "AppendLogGroupCommitTests.held-flush")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

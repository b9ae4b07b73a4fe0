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

    @Test func bufferedModeNeverFlushes() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .buffered)
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            log.close()
            #expect(log.flushCount == 0)
        }
    }

    // MARK: - I/O failures

    @Test func aFailedFsyncPoisonsTheLogAndIsNeverRetried() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            defer { log.close() }
            let first = try log.append([logPayload(0)])
            try await log.waitUntilDurable(first)
            #expect(log.flushCount == 1)

            log.injectedFailure = (.sync, EIO)
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
            #expect(log.injectedFailure == nil, "the injected failure fired once")

            // Waiting again is not a retry that could report success.
            let again = await #expect(throws: FlatSyncError.self) { try await log.waitUntilDurable(second) }
            #expect(again?.code == .ioFailed)
            #expect(log.flushCount == 1)

            let refused = #expect(throws: FlatSyncError.self) { try log.append([logPayload(3)]) }
            #expect(refused?.code == .storeClosed)
            #expect(refused?.message.contains("I/O failure") == true)
            #expect((refused?.cause as? FlatSyncError)?.code == .ioFailed)
            #expect(throws: FlatSyncError.self) { try log.rewrite([]) }

            // What was durable before stays durable.
            try await log.waitUntilDurable(first)
        }
    }

    @Test func aFailedWriteInFsyncModePoisonsTheLog() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            defer { log.close() }
            log.injectedFailure = (.write, ENOSPC)
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
            let (log, _) = try AppendLog.open(at: url, durability: .buffered)
            defer { log.close() }
            try log.append([logPayload(0)])
            log.injectedFailure = (.write, ENOSPC)
            let error = #expect(throws: FlatSyncError.self) { try log.append([logPayload(1)]) }
            #expect(error?.code == .ioFailed)
            #expect((error?.cause as? POSIXError)?.code == .ENOSPC)
            let refused = #expect(throws: FlatSyncError.self) { try log.append([logPayload(2)]) }
            #expect(refused?.code == .storeClosed)
            log.close()
            #expect(try AppendLog.open(at: url, durability: .buffered).1.payloads == [logPayload(0)])
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
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            defer { log.close() }
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            let before = try fileBytes(url)
            log.injectedFailure = (.sync, EIO)
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

import Dispatch
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// The common ancestor a host's merge gets, at the moments a second review found it wrong: a close while
/// a save is out, two kills in a row, a record made again while its save is out, a kill during the
/// snapshot of a merge; and the snapshot writes a merge must not multiply.
@Suite struct MergeAncestorReviewTests {
    private let configure: (inout SyncContext.Configuration) -> Void = { $0.recordTypes = [Tally.self] }

    /// The host closes the context while a save is on its way; the server applies it, and its answer,
    /// arriving after the close, is not taken. The save's fate is noted as unknown, so B's version over it
    /// is merged without an ancestor, not over the version before the save (which counts A's +2 twice).
    @Test func aSaveAnsweredWhileTheContextClosesIsNotCountedTwice() async throws {
        try await SyncHarness.run { harness in
            let configure = configure
            let target = Mutex<SyncContext?>(nil)
            let closing = Mutex<Task<Void, Never>?>(nil)
            let transport = InterceptingTransport(harness.cloud) { kind, _ in
                guard kind == .modifyRecords,
                    let a = target.withLock({ t in
                        defer { t = nil }; return t
                    })
                else {
                    return
                }
                closing.withLock { $0 = Task { try? await a.close() } }
                while !(await a.isClosed) { await Task.yield() }
            }
            var a = try await harness.device("A", transport: transport, start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2
            target.withLock { $0 = a }
            _ = try? await a.syncNow()
            await closing.withLock { $0 }?.value
            #expect(await harness.serverTally() == .int(7), "the server applied A's save")

            a = try await harness.device("A", start: false, configure: configure)
            try await incrementOnB(then: a, b, settleAt: 8, harness: harness, "10 counts A's +2 twice")
        }
    }

    /// Killed while the save is on its way: the restart marks the sealed round's saves as of unknown fate,
    /// in the zone's snapshot before the log forgets the round, so a second kill right after keeps the mark.
    @Test func aSecondKillAfterTheRecoveryKeepsTheUnknownFate() async throws {
        try await SyncHarness.run { harness in
            let configure = configure
            let target = Mutex<SyncContext?>(nil)
            let transport = InterceptingTransport(harness.cloud) { kind, _ in
                guard kind == .modifyRecords,
                    let a = target.withLock({ t in
                        defer { t = nil }; return t
                    })
                else {
                    return
                }
                await a.localStore.abandon()  // the process dies; the request still reaches the server
            }
            var a = try await harness.device("A", transport: transport, start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2
            target.withLock { $0 = a }
            _ = try? await a.syncNow()
            #expect(await harness.serverTally() == .int(7), "the server applied A's save")

            a = try await harness.device("A", start: false, configure: configure)
            #expect(await a.localStore.zones.isFateUnknown(of: Tally.recordID("t")), "the first restart marks it")
            await a.abandon()  // killed again before any snapshot of the zone
            a = try await harness.device("A", start: false, configure: configure)
            #expect(await a.localStore.zones.isFateUnknown(of: Tally.recordID("t")), "the second restart keeps it")

            try await incrementOnB(then: a, b, settleAt: 8, "10 counts A's +2 twice")
        }
    }

    /// A record deleted and made again while its earlier save is on its way has no ancestor: the save's
    /// acknowledgement, finding the new record's change waiting, does not make the saved version its merge
    /// base. B's +3 then meets A's new record: max(1, 9) = 9, not 9 + 1 - 6 = 4.
    @Test func aRecordMadeAgainWhileItsSaveIsOnItsWayHasNoAncestor() async throws {
        try await SyncHarness.run { harness in
            let configure = configure
            let devices = Mutex<(SyncContext, SyncContext)?>(nil)
            let transport = InterceptingTransport(harness.cloud) { kind, number in
                guard kind == .modifyRecords, let (a, b) = devices.withLock({ $0 }) else { return }
                if number == 2 {
                    _ = try? await a.records(Tally.self).delete("t")
                    _ = try? await a.records(Tally.self).save(Tally(id: "t", count: 1))  // made again
                }
                if number == 3 {
                    _ = try? await b.syncNow()
                    _ = try? await b.records(Tally.self).save(Tally(id: "t", count: 9))  // +3 over 6
                    _ = try? await b.syncNow()
                }
            }
            let a = try await harness.device("A", transport: transport, start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            devices.withLock { $0 = (a, b) }
            try await a.records(Tally.self).save(Tally(id: "t", count: 6))  // +1
            _ = try await a.syncNow()
            _ = try await a.syncNow()
            devices.withLock { $0 = nil }
            #expect(transport.count(.modifyRecords) >= 3)
            do {
                let v = await a.records(Tally.self).value("t")?.count
                #expect(v == 9, "A has \(String(describing: v)); 4 is a merge over the made-again record's old version")
            }
            try await a.close()
            try await b.close()
        }
    }

    /// A fetch merges B's version in memory and writes the snapshot (with the merge base) away from the
    /// actor; a host save lands meanwhile and logs the merged record. Killed before the snapshot's rename,
    /// the restart finds the merged version in that save's log entry (``RecordChange/rebases``), so the
    /// refetch does not count B's +1 twice (9, not 10).
    @Test func aSaveDuringTheSnapshotOfAFetchMergeThenAKillGivesTheSameAncestor() async throws {
        try await SyncHarness.run { harness in
            let configure = configure
            let gate = RenameGate()
            var a = try await harness.device(
                "A",
                configure: {
                    configure(&$0)
                    $0.fileSystem = gate.fileSystem
                })
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2, waits (debounce)
            try await b.records(Tally.self).save(Tally(id: "t", count: 6))  // +1
            #expect(try await b.syncNow().isComplete)

            gate.arm(suffix: "zone-\(Tally.zone.name).plist")
            await a.handleRemoteNotification(zones: [Tally.zone])
            try await yieldUntil { gate.reached }
            // The fetch merged 6 over 7 (8) in memory; its snapshot is being written.
            #expect(await a.records(Tally.self).value("t")?.count == 8)
            try await a.records(Tally.self).save(Tally(id: "t", count: 9))  // +1, logged as 9
            gate.release(failing: true)  // the process dies before the rename
            await a.localStore.abandon()

            a = try await harness.device("A", start: false, configure: configure)
            #expect(await a.records(Tally.self).value("t")?.count == 9)
            #expect(try await a.syncNow().isComplete)
            do {
                let v = await a.records(Tally.self).value("t")?.count
                #expect(v == 9, "A has \(String(describing: v)); 10 counts B's +1 twice")
            }
            try await a.close()
            try await b.close()
        }
    }

    /// A fetch whose every page merges a host record writes the zone's snapshot once, not once a page (n/p
    /// snapshots of n records: the square of a large zone's size).
    @Test func aPagedFetchWithMergesWritesTheSnapshotOnce() async throws {
        try await SyncHarness.run { harness in
            let gate = RenameGate()
            let n = Int(ProcessInfo.processInfo.environment["REVIEW_N"] ?? "") ?? 4_000
            let a = try await harness.device("A") {
                $0.recordTypes = [Tally.self]
                $0.fileSystem = gate.fileSystem
                $0.fetchResultsLimit = 100
            }
            let b = try await harness.device("B", start: false) { $0.recordTypes = [Tally.self] }
            _ = try await a.records(Tally.self).save((0..<n).map { Tally(id: "t\($0)", count: 0) })
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            _ = try await b.records(Tally.self).save((0..<n).map { Tally(id: "t\($0)", count: 1) })
            #expect(try await b.syncNow().isComplete)
            // One pending change per page of the fetch.
            _ = try await a.records(Tally.self).save(
                stride(from: 0, to: n, by: 100).map { Tally(id: "t\($0)", count: 2) })
            gate.count(suffix: "zone-\(Tally.zone.name).plist")
            await a.handleRemoteNotification(zones: [Tally.zone])
            await a.waitUntilIdle()
            let writes = gate.renames
            #expect(writes <= 2, "\(writes) snapshot writes of a \(n)-record zone for one fetch")
            try await a.close()
            try await b.close()
        }
    }

    /// A push whose every batch meets a conflict on a host record writes the zone's snapshot a few times, not
    /// once a batch.
    @Test func aPushWithConflictsInEveryBatchWritesTheSnapshotOnce() async throws {
        try await SyncHarness.run { harness in
            let gate = RenameGate()
            let n = Int(ProcessInfo.processInfo.environment["REVIEW_N"] ?? "") ?? 4_000
            let other = Mutex<SyncContext?>(nil)
            let transport = InterceptingTransport(harness.cloud) { kind, _ in
                guard kind == .modifyRecords,
                    let b = other.withLock({ t in
                        defer { t = nil }; return t
                    })
                else {
                    return
                }
                // Before A's first batch lands, B changes one record of every batch.
                _ = try? await b.records(Tally.self).save(
                    stride(from: 0, to: n, by: 100).map { Tally(id: "t\($0)", count: 1) })
                _ = try? await b.syncNow()
            }
            let a = try await harness.device("A", transport: transport, start: false) {
                $0.recordTypes = [Tally.self]
                $0.fileSystem = gate.fileSystem
            }
            let b = try await harness.device("B", start: false) { $0.recordTypes = [Tally.self] }
            _ = try await a.records(Tally.self).save((0..<n).map { Tally(id: "t\($0)", count: 0) })
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            _ = try await a.records(Tally.self).save((0..<n).map { Tally(id: "t\($0)", count: 2) })
            other.withLock { $0 = b }
            gate.count(suffix: "zone-\(Tally.zone.name).plist")
            #expect(try await a.syncNow().isComplete)
            let writes = gate.renames
            #expect(writes <= 3, "\(writes) snapshot writes of a \(n)-record zone for one push")
            try await a.close()
            try await b.close()
        }
    }
}

/// Holds a rename onto a path with an armed suffix until released (then fails it with EIO, as if the process
/// had died), or counts renames onto a suffix; ``fileSystem`` is the POSIX calls with the gate on renames.
final class RenameGate: Sendable {
    private struct State {
        var blockSuffix: String?
        var countSuffix: String?
        var reached = false
        var renames = 0
        var fail = false
    }
    private let state = Mutex(State())
    private let released = DispatchSemaphore(value: 0)

    func arm(suffix: String) { state.withLock { $0.blockSuffix = suffix } }
    func count(suffix: String) { state.withLock { $0.countSuffix = suffix } }
    var reached: Bool { state.withLock { $0.reached } }
    var renames: Int { state.withLock { $0.renames } }
    func release(failing: Bool) {
        state.withLock { $0.fail = failing }
        released.signal()
    }

    /// The real file system, its renames through the gate.
    var fileSystem: FileSystem {
        var calls = InterceptingFileSystem(POSIXFileSystem())
        calls.rename = { [self] _, destination, rename in
            let block = state.withLock { s -> Bool in
                if let c = s.countSuffix, destination.hasSuffix(c) { s.renames += 1 }
                guard let b = s.blockSuffix, destination.hasSuffix(b) else { return false }
                s.blockSuffix = nil
                s.reached = true
                return true
            }
            if block {
                released.wait()
                if state.withLock({ $0.fail }) { return .failure(.ioError) }
            }
            return rename()
        }
        return FileSystem(calls)
    }
}

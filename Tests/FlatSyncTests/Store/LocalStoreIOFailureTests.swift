import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// What a store does after a write or flush of its log fails. Regression tests for what the I/O-error
/// sweep found (`Tests/FlatSyncTests/Durability`).
@Suite struct LocalStoreIOFailureTests {
    static let directory = URL(fileURLWithPath: "/device")

    /// A store on a faulty simulated disk.
    static func open(_ faulty: FaultyFileSystem) throws -> LocalStore {
        var options = testOptions()
        options.fileSystem = FileSystem(faulty)
        return try LocalStore(directory: directory, options: options)
    }

    static func reopen(_ disk: SimulatedDisk) throws -> LocalStore {
        var options = testOptions()
        options.fileSystem = FileSystem(disk)
        return try LocalStore(directory: directory, options: options)
    }

    /// Whether the reading list shows `id`, and whether a change to it waits to be sent.
    static func state(of id: String, in store: LocalStore) async -> (shown: Bool, pending: Bool) {
        let shown = await store.readingList.contains(id)
        let pending = await store.pendingChange(for: RecordID(zone: .readingList, name: "rl-" + id)) != nil
        return (shown, pending)
    }

    /// Found by the sweep: the mutation whose log write failed stayed in memory, and the next snapshot (the
    /// one `close()` writes, or any other) saved it while the log had lost its command. After a restart the
    /// article showed on this device and was never sent. Now a snapshot holds only what the log holds, and
    /// a failed log is rewritten from memory first: the mutation is then pending like any other.
    @Test(arguments: ["close", "snapshot"])
    func aMutationWhoseLogWriteFailedNeverShowsWithoutBeingSent(then: String) async throws {
        for failing in [FaultyFileSystem.Call.write, .sync] {
            let disk = SimulatedDisk()
            let faulty = FaultyFileSystem(wrapping: disk)
            let store = try Self.open(faulty)
            try await store.readingList.add("kept")
            faulty.failNext(failing, with: .ioError, pathSuffix: "commands.log")
            await #expect(throws: FlatSyncError.self) { try await store.readingList.add("failed") }
            if then == "close" {
                try await store.close()
            } else {
                try await store.persistSnapshot(of: .readingList)
                await store.abandon()
            }
            for image in [disk, SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)] {
                let reopened = try Self.reopen(image)
                #expect(await reopened.readingList.contains("kept"))
                let failed = await Self.state(of: "failed", in: reopened)
                #expect(!failed.shown || failed.pending, "\(failing), then \(then): shown but never sent")
                await reopened.abandon()
            }
        }
    }

    /// Found by the sweep: a mutation refused by a log that an earlier failure had stopped still changed
    /// the store in memory, and a later snapshot saved it. Now the log is rewritten first, and when even
    /// that fails (the disk is still full) nothing changes.
    @Test func aMutationTheLogCannotTakeChangesNothing() async throws {
        let disk = SimulatedDisk()
        let faulty = FaultyFileSystem(wrapping: disk)
        let store = try Self.open(faulty)
        try await store.readingList.add("kept")
        faulty.inject(.enospc, atCall: faulty.callCount + 1)
        await #expect(throws: FlatSyncError.self) { try await store.readingList.add("first") }
        let refused = await #expect(throws: FlatSyncError.self) { try await store.readingList.add("refused") }
        #expect((refused?.cause as? POSIXError)?.code == .ENOSPC, "\(String(describing: refused))")
        #expect(await store.readingList.contains("refused") == false, "a refused mutation changes nothing")
        await #expect(throws: FlatSyncError.self) { try await store.persistSnapshot(of: .readingList) }

        // Space again: the store works on, without being reopened.
        faulty.clearFaults()
        try await store.readingList.add("after")
        try await store.close()
        let reopened = try Self.reopen(SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly))
        #expect(await reopened.readingList.contains("kept"))
        #expect(await reopened.readingList.contains("after"))
        #expect(await reopened.readingList.contains("refused") == false)
        let first = await Self.state(of: "first", in: reopened)
        #expect(!first.shown || first.pending)
        await reopened.abandon()
    }

    /// The compaction `close()` makes of a log of many small entries is an optimization, but its failure
    /// still reaches the caller; the old log stays in place, so nothing is lost.
    @Test func aCompactionThatFailsAtCloseIsReportedAndLosesNothing() async throws {
        let disk = SimulatedDisk()
        let faulty = FaultyFileSystem(wrapping: disk)
        let store = try Self.open(faulty)
        for i in 0..<100 { try await store.readingList.add("a\(i)") }
        // Snapshots first, so that the rename that fails is the new log's.
        try await store.persistSnapshot(of: .readingList)
        try await store.persistSnapshot(of: .readingHistory)
        faulty.failNext(.rename, with: .ioError)
        let error = await #expect(throws: FlatSyncError.self) { try await store.close() }
        #expect(error?.code == .ioFailed)
        for image in [disk, SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)] {
            let reopened = try Self.reopen(image)
            for i in 0..<100 {
                let state = await Self.state(of: "a\(i)", in: reopened)
                #expect(state.shown && state.pending, "a\(i)")
            }
            await reopened.abandon()
        }
    }

    /// After a failed flush the log's file is never flushed again: the next mutation rewrites the log as a
    /// fresh file (temporary file, flush, rename, directory flush) and appends there, so what it
    /// acknowledges does not rest on the pages the failed flush may have dropped.
    @Test func afterAFailedFlushTheLogIsRewrittenNotFlushedAgain() async throws {
        let disk = SimulatedDisk()
        let faulty = FaultyFileSystem(wrapping: disk)
        let store = try Self.open(faulty)
        try await store.readingList.add("before")
        faulty.failNext(.sync, with: .ioError, pathSuffix: "commands.log")
        await #expect(throws: FlatSyncError.self) { try await store.readingList.add("failed") }
        disk.recordsCrashPoints = true
        try await store.readingList.add("after")
        // The first thing that changes on disk is a fresh log file, renamed over the old one.
        let calls = disk.crashPoints.dropFirst().map(\.lastCall)
        #expect(calls.first?.hasPrefix("open O_CREAT /device/.tmp-commands.log") == true, "\(calls)")
        #expect(calls.prefix(5).contains { $0.hasPrefix("rename ") && $0.hasSuffix(" /device/commands.log") })
        await store.abandon()

        let reopened = try Self.reopen(SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly))
        #expect(await reopened.readingList.contains("before"))
        #expect(await reopened.readingList.contains("after"), "acknowledged after the rewrite: durable")
        #expect(await Self.state(of: "failed", in: reopened).pending, "the failed one was rewritten as pending")
        await reopened.abandon()
    }

    /// Found by the sweep after snapshots began to stream from their files: a read that failed with `EIO`
    /// was taken for a damaged snapshot, which was quarantined, and what only the snapshot held (changes
    /// the log had let go) was gone. Now a failed read fails the open and leaves the file where it is.
    @Test func aSnapshotThatCannotBeReadIsNotTakenForDamage() async throws {
        let disk = SimulatedDisk()
        let store = try Self.reopen(disk)
        try await store.readingList.add("kept")
        try await store.close()

        let faulty = FaultyFileSystem(wrapping: disk)
        faulty.failNext(.read, with: .ioError, pathSuffix: "reading-list.plist")
        let error = #expect(throws: FlatSyncError.self) { try Self.open(faulty) }
        #expect(error?.code == .ioFailed)
        let names = try FileSystem(disk).contentsOfDirectory(Self.directory.path)
        #expect(!names.contains { $0.contains(".corrupt-") }, "nothing was quarantined: \(names)")

        let reopened = try Self.reopen(disk)
        #expect(await reopened.readingList.contains("kept"))
        #expect(reopened.eventHub.keptEvents.isEmpty)
        await reopened.abandon()
    }
}

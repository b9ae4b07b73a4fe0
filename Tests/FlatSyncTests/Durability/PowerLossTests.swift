import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// A power loss at every point of a workload, under a pessimistic model of what survives (SQLite's crash
/// test, TigerBeetle's storage simulator): the workload runs once on a `SimulatedDisk` that keeps its state
/// after every call, and for each of those crash points several disk images are made — only what was
/// flushed, everything written, and random mixes in which each unflushed write lands whole, not at all,
/// as a prefix of its sectors or as any subset of them, and each unflushed directory change persists or
/// not. Each image is opened as the next boot would, and must show:
///
/// - every mutation acknowledged before the crash, nothing never issued, in-flight ones whole or not at
///   all — and an in-flight one that shows must also be pending, or it would never be sent;
/// - no quarantined file (a power loss is not damage: a torn group flush is a torn tail);
/// - the device ID it had, once the first open returned.
///
/// The workload starts where no device directory exists, so the directories' creation is part of it; it
/// mutates one at a time and concurrently (group flushes of several frames), snapshots (also while a
/// mutation is in flight), compacts, runs send rounds, closes and reopens.
///
/// `FLATSYNC_POWERLOSS_SIZE=large` runs a longer workload with more random images per crash point.
@Suite struct PowerLossTests {
    static let large = ProcessInfo.processInfo.environment["FLATSYNC_POWERLOSS_SIZE"] == "large"
    static let rounds = large ? 4 : 1
    static let randomImagesPerPoint = large ? 12 : 2

    static let device = URL(fileURLWithPath: "/data/devices/phone")

    struct Figures {
        var crashPoints = 0
        var images = 0
        var acknowledgedChecked = 0
        var multiFrameFlushes = 0
        var problems: [String] = []
    }

    /// `fsync` promises that an acknowledged mutation survives a power loss; `buffered` does not (it
    /// survives a killed process), so there only the rest is checked: nothing never issued, nothing shown
    /// that will not be sent, no quarantine, the same device ID.
    @Test(arguments: Durability.allCases)
    func aPowerLossAtEveryPointKeepsWhatTheDurabilityLevelPromises(durability: Durability) async throws {
        let figures = await Self.simulate(
            durability: durability, rounds: Self.rounds, randomImages: Self.randomImagesPerPoint)
        for problem in figures.problems.prefix(20) { Issue.record("\(problem)") }
        #expect(figures.problems.isEmpty, "\(figures.problems.count) problems")
        #expect(figures.multiFrameFlushes > 0, "the workload must flush several frames at once")
        print(
            "power-loss simulation (\(durability)): \(figures.crashPoints) crash points, \(figures.images) disk "
                + "states checked, \(figures.acknowledgedChecked) acknowledged mutations checked, "
                + "\(figures.multiFrameFlushes) writes of several frames, lost = \(figures.problems.count)"
        )
    }

    /// The harness can fail: with the directory flush after a rename skipped (what `Data.write(.atomic)`
    /// does), a power loss can bring back the old log after a compaction and lose what was acknowledged since.
    @Test func theSimulationReportsASkippedDirectoryFlush() async throws {
        let figures = await Self.simulate(durability: .fsync, rounds: 1, randomImages: 0) { disk in
            var broken = InterceptingFileSystem(disk)
            broken.syncDirectory = { _, _ in .success(()) }
            return broken
        }
        #expect(!figures.problems.isEmpty, "the broken variant must be reported")
        print("power-loss simulation, broken variant (no directory flush): \(figures.problems.count) problems")
    }

    // MARK: - Found by the simulation

    /// Found by the simulation (buffered): a snapshot is flushed to disk, but in buffered mode the log
    /// entries of the changes it holds may still be only in the page cache. A power loss then left the
    /// changes in the snapshot without their commands: shown on the device, never sent. Now a snapshot
    /// flushes the log first, in buffered mode too.
    @Test func aBufferedSnapshotNeverHoldsAChangeWhoseCommandAPowerLossCanTake() async throws {
        let disk = SimulatedDisk()
        var options = LocalStore.Options(
            durability: .buffered, deviceID: "device", clock: TestClock(), snapshotDelay: .seconds(3_600))
        options.fileSystem = FileSystem(disk)
        let store = try LocalStore(directory: Self.device, options: options)
        try await store.readingList.add("written, not flushed")
        try await store.persistSnapshot(of: .readingList)
        await store.abandon()

        let reopened = try LocalStore(
            directory: Self.device,
            options: { () -> LocalStore.Options in
                var options = options
                options.fileSystem = FileSystem(SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly))
                return options
            }())
        let shown = await reopened.readingList.contains("written, not flushed")
        let pending = await reopened.pendingRecordCount() > 0
        #expect(!shown || pending, "shown but never sent")
        await reopened.abandon()
    }

    // MARK: - The simulation

    /// Runs the workload once, then checks images of a crash at each of its points.
    static func simulate(
        durability: Durability, rounds: Int, randomImages: Int,
        wrapping wrap: (SimulatedDisk) -> any FileSystemCalls = { $0 }
    ) async -> Figures {
        let disk = SimulatedDisk()
        _ = disk.makeDirectory("/data", permissions: 0o700)
        _ = disk.syncDirectory("/")
        disk.recordsCrashPoints = true
        let model = DurabilityModel(calls: { disk.callCount })
        let multiFrame = Mutex(0)
        var intercepting = InterceptingFileSystem(wrap(disk))
        intercepting.willWrite = { _, bytes in
            // Frames start with the marker; a write holding two or more is a group flush.
            var count = 0
            var offset = 0
            while offset + 4 <= bytes.count {
                if bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self) == AppendLog.frameMagic.littleEndian {
                    count += 1
                }
                offset += 1
            }
            if count >= 2 { multiFrame.withLock { $0 += 1 } }
        }
        let workload = Workload(fileSystem: FileSystem(intercepting), durability: durability, model: model)
        await workload.run(rounds: rounds)

        var figures = Figures()
        figures.multiFrameFlushes = multiFrame.withLock { $0 }
        let points = disk.crashPoints
        figures.crashPoints = points.count
        if ProcessInfo.processInfo.environment["FLATSYNC_POWERLOSS_TRACE"] != nil {
            for point in points { print("  \(point.calls): \(point.lastCall)") }
            for entry in model.all { print("  \(entry)") }
        }
        for (index, point) in points.enumerated() {
            var damages: [SimulatedDisk.Damage] = [.flushedOnly, .everything]
            damages += (0..<randomImages).map { .random(seed: UInt64(index * 1_000 + $0)) }
            for damage in damages {
                let image = SimulatedDisk.crashImage(of: point, damage: damage)
                let problems = await check(image, crashAfter: point.calls, model: model, workload: workload)
                figures.images += 1
                if durability == .fsync {
                    figures.acknowledgedChecked += model.acknowledgedCount(crashAfter: point.calls)
                }
                figures.problems += problems.map {
                    "crash after call \(point.calls) (\(point.lastCall)), \(damage): \($0)"
                }
            }
        }
        return figures
    }

    /// Opens the store on a crash image and lists what is wrong with it.
    static func check(_ image: SimulatedDisk, crashAfter point: Int, model: DurabilityModel, workload: Workload) async
        -> [String]
    {
        var options = LocalStore.Options(
            durability: workload.durability, deviceID: nil, clock: TestClock(), snapshotDelay: .seconds(3_600),
            recordTypes: [TestRecipe.self, TestPhoto.self])
        options.fileSystem = FileSystem(image)
        let store: LocalStore
        do {
            store = try LocalStore(directory: device, options: options)
        } catch {
            return ["the store does not open: \(error)"]
        }
        var problems = await model.problems(
            in: store, crashAfter: point, checkingPending: true,
            acknowledgementsAreDurable: workload.durability == .fsync)
        for event in store.eventHub.keptEvents {
            if case .fileQuarantined(let original, _, let reason) = event {
                problems.append("\(original) was quarantined: \(reason)")
            }
        }
        if let (openedAt, deviceID) = workload.firstOpen, point >= openedAt, store.deviceID != deviceID {
            problems.append("the device ID changed from \(deviceID) to \(store.deviceID)")
        }
        await store.abandon()
        return problems
    }

    /// The workload: one device, from nothing.
    final class Workload: Sendable {
        let fileSystem: FileSystem
        let durability: Durability
        let model: DurabilityModel
        private let state = Mutex<(firstOpen: (Int, String)?, articles: Int)>((nil, 0))

        init(fileSystem: FileSystem, durability: Durability, model: DurabilityModel) {
            self.fileSystem = fileSystem
            self.durability = durability
            self.model = model
        }

        /// The calls made when the first open returned, and the device ID it made.
        var firstOpen: (Int, String)? { state.withLock { $0.firstOpen } }

        private func newArticle() -> String {
            state.withLock {
                $0.articles += 1
                return "a\($0.articles)"
            }
        }

        private func open() throws -> LocalStore {
            var options = LocalStore.Options(
                durability: durability, deviceID: nil, clock: TestClock(), snapshotDelay: .seconds(3_600),
                recordTypes: [TestRecipe.self, TestPhoto.self])
            options.fileSystem = fileSystem
            options.compactionMinimumBytes = 2 << 10
            options.compactionGrowthFactor = 2
            let store = try LocalStore(directory: PowerLossTests.device, options: options)
            let calls = model.callCount
            state.withLock { if $0.firstOpen == nil { $0.firstOpen = (calls, store.deviceID) } }
            return store
        }

        private func mutate(_ store: LocalStore, _ mutation: DurabilityModel.Mutation) async {
            await model.perform(mutation) {
                switch mutation {
                case .add(let id): try await store.readingList.add(id)
                case .remove(let id): try await store.readingList.remove(id)
                case .visit(let id): try await store.history.visit(id)
                case .saveRecipe(let id):
                    try await store.records(TestRecipe.self).save(TestRecipe(id: "recipe-" + id, title: id))
                case .deleteRecipe(let id): try await store.records(TestRecipe.self).delete("recipe-" + id)
                case .savePhoto(let id):
                    let image = try await store.makeAsset(DurabilityModel.Mutation.photoBytes(id))
                    try await store.records(TestPhoto.self).save(
                        TestPhoto(id: "photo-" + id, caption: id, image: image))
                case .deletePhoto(let id): try await store.records(TestPhoto.self).delete("photo-" + id)
                }
            }
        }

        /// What a push does to the queue: everything acknowledged, but the records the server refused (those
        /// whose article number ends in 7), which are parked, their refusal written durably.
        private func sendRound(_ store: LocalStore) async throws {
            let start = model.callCount
            defer {
                // From the round's first call on, a crash may find its acknowledgements in the log.
                model.markSent(acknowledgedBefore: start, at: start)
            }
            for zone in store.zoneIDs {
                for command in try await store.sealPendingCommands(in: zone) {
                    let ids = Array(command.changes.keys)
                    let refused = ids.filter { $0.name.hasSuffix("7") }
                    try await store.park(
                        refused.map { id in
                            RefusedChange(
                                recordID: id, isDelete: command.kind == .removeRecords, code: .invalidArguments,
                                reason: "power-loss workload", refusedAt: Date(timeIntervalSince1970: 0),
                                changeSequence: command.changes[id]?.sequence ?? 0)
                        })
                    try await store.acknowledge(ids.filter { !$0.name.hasSuffix("7") }, in: command.id)
                }
                try await store.unsealPendingCommands(in: zone)
            }
        }

        func run(rounds: Int) async {
            do {
                var store = try open()
                let read = newArticle()
                var added: [String] = []
                for round in 0..<rounds {
                    for _ in 0..<3 {
                        let id = newArticle()
                        added.append(id)
                        await mutate(store, .add(id))
                    }
                    await mutate(store, .visit(read))
                    // Several callers at once: their frames may share group flushes.
                    let shared = store
                    await withTaskGroup(of: Void.self) { group in
                        for _ in 0..<8 {
                            let id = newArticle()
                            group.addTask { await self.mutate(shared, .add(id)) }
                        }
                        group.addTask { await self.mutate(shared, .visit(read)) }
                    }
                    // A snapshot while a mutation waits for its flush.
                    let inFlight = newArticle()
                    async let mutation: Void = mutate(shared, .add(inFlight))
                    try await shared.persistSnapshot(of: .readingList)
                    await mutation
                    await mutate(store, .remove(added[round * 3]))
                    await mutate(store, .saveRecipe(added[round * 3 + 2]))
                    await mutate(store, .savePhoto(added[round * 3]))
                    await mutate(store, .savePhoto(added[round * 3 + 1]))
                    try await sendRound(store)
                    try await store.persistSnapshot(of: .readingHistory)
                    // Enough mutations that the log compacts on its own.
                    for _ in 0..<12 { await mutate(store, .visit(newArticle())) }
                    await mutate(store, .add(newArticle()))
                    try await sendRound(store)
                    // A send round cut short by the process stopping: the next open ends it with an entry
                    // per zone that it does not wait for; the next mutation flushes them with its own.
                    await mutate(store, .add(newArticle()))
                    await mutate(store, .visit(read))
                    await mutate(store, .saveRecipe(read))
                    // A photo replaced, and one deleted: the next open deletes their old files, which a
                    // power loss during it must not take from the photos left.
                    await mutate(store, .savePhoto(added[round * 3]))
                    await mutate(store, .deletePhoto(added[round * 3 + 1]))
                    for zone in store.zoneIDs { _ = try await store.sealPendingCommands(in: zone) }
                    try await store.close()
                    store = try open()
                    await mutate(store, .remove(added[round * 3 + 1]))
                    await mutate(store, .visit(read))
                    await mutate(store, .deleteRecipe(added[round * 3 + 2]))
                }
                try await store.close()
            } catch {
                Issue.record("the workload failed without any fault: \(error)")
            }
        }
    }
}

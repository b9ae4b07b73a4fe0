import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// SQLite's I/O-error test, for FlatSync: a workload that mutates, syncs through a `DirectoryCloud`,
/// snapshots, compacts and repairs damaged files runs once to count its file-system calls, then once per
/// call and per fault with that call failing — `EIO`, a full disk from then on (`ENOSPC`), `EINTR`, a short
/// write, a failed flush. Every run must:
///
/// - throw nothing but `FlatSyncError`s (and nothing at all for `EINTR` and short writes, which FlatSync
///   finishes itself), and never crash;
/// - tell the host of every other failure — thrown, in a sync summary or on the event stream — unless it
///   is one that needs telling no one (`absorbedByDesign(_:)`: the cloud double's files, scans, the log's
///   reserved space, a hard link with a copy to fall back on, an asset file nothing holds left in place);
/// - once the fault clears, reopen with every acknowledged mutation, and nothing that was never asked for;
/// - keep every acknowledged mutation through a power loss right after the run too: so a mutation
///   acknowledged after a failed flush must not rest on the data that flush lost (PostgreSQL's
///   "fsyncgate": a failed `fsync` is never retried into a success on the same file).
///
/// Everything runs on a `SimulatedDisk`, so a failed flush really loses its data. `FLATSYNC_SWEEP_SIZE=large`
/// repeats the middle of the workload, for a run by hand.
@Suite struct IOErrorSweepTests {
    static let rounds = ProcessInfo.processInfo.environment["FLATSYNC_SWEEP_SIZE"] == "large" ? 4 : 1

    /// What one run of the workload with one fault showed.
    struct RunReport {
        var fired = false
        var errors: [String] = []
        var problems: [String] = []
        var acknowledgedChecked = 0
    }

    // MARK: - The sweep

    @Test func everyFailedCallGivesATypedErrorAndLosesNothingAcknowledged() async throws {
        // A clean run: how many calls, of which kinds.
        let counting = FaultyFileSystem(wrapping: SimulatedDisk())
        counting.logsCalls = true
        let clean = await Self.run(on: counting, rounds: Self.rounds)
        #expect(clean.errors.isEmpty, "a run without faults fails: \(clean.errors)")
        #expect(clean.problems.isEmpty, "a run without faults loses data: \(clean.problems)")
        let calls = counting.callLog

        // FLATSYNC_SWEEP_ONLY=eio:152 runs one case and prints what happened in it.
        if let only = ProcessInfo.processInfo.environment["FLATSYNC_SWEEP_ONLY"]?.split(separator: ":"),
            only.count == 2, let fault = FaultyFileSystem.Fault(rawValue: String(only[0])), let number = Int(only[1])
        {
            let faulty = FaultyFileSystem(wrapping: SimulatedDisk())
            faulty.inject(fault, atCall: number)
            let report = await Self.run(on: faulty, rounds: Self.rounds)
            print("injected: \(faulty.injections)\nerrors:\n\(report.errors.joined(separator: "\n"))")
            print("problems:\n\(report.problems.joined(separator: "\n"))")
            return
        }

        var failed: [FaultyFileSystem.Fault: Int] = [:]
        var acknowledged = 0
        var runs = 0
        var lost = 0
        // Faults that are not retried, and how many of them reached the workload as an error (thrown, a
        // problem in a sync summary, or an error on the event stream). Every other one must be absorbed by
        // design (`absorbedByDesign`): a new way of swallowing a failure fails the sweep.
        var reportable = 0
        var reported = 0
        var absorbed: [String: Int] = [:]
        for fault in FaultyFileSystem.Fault.allCases {
            for (index, call) in calls.enumerated() where fault.applies(to: call.call, flags: call.flags) {
                let faulty = FaultyFileSystem(wrapping: SimulatedDisk())
                faulty.inject(fault, atCall: index + 1)
                let report = await Self.run(on: faulty, rounds: Self.rounds)
                runs += 1
                guard report.fired else { continue }
                failed[fault, default: 0] += 1
                acknowledged += report.acknowledgedChecked
                let context = "\(fault) at call \(index + 1) (\(call.call))"
                if fault == .eintr || fault == .shortWrite {
                    #expect(report.errors.isEmpty, "\(context): must be retried, not reported: \(report.errors)")
                } else {
                    reportable += 1
                    if !report.errors.isEmpty {
                        reported += 1
                    } else {
                        // Every failed call of the run (a full disk fails many) must be one that needs no telling.
                        let unexplained = faulty.injections.filter { Self.absorbedByDesign($0) == nil }
                        if unexplained.isEmpty, let reason = faulty.injections.first.flatMap(Self.absorbedByDesign) {
                            absorbed[reason, default: 0] += 1
                        } else {
                            Issue.record(
                                "\(context): reached no caller, and nothing absorbs it by design: \(unexplained)")
                        }
                    }
                }
                for error in report.errors
                where !["FlatSyncError", "CloudError", "SyncEvent.error"].contains(where: error.hasPrefix) {
                    Issue.record("\(context): an error that is no FlatSyncError, CloudError or error event: \(error)")
                }
                if !report.problems.isEmpty {
                    lost += 1
                    Issue.record("\(context):\n\(report.problems.joined(separator: "\n"))")
                }
            }
        }
        let total = failed.values.reduce(0, +)
        #expect(total > 0)
        #expect(lost == 0)
        print(
            "I/O-error sweep: \(calls.count) calls in the workload (\(Self.rounds) round\(Self.rounds == 1 ? "" : "s")), "
                + "\(runs) runs, calls failed = \(total) ("
                + FaultyFileSystem.Fault.allCases.map { "\($0) \(failed[$0, default: 0])" }.joined(separator: ", ")
                + "), reported to the caller = \(reported) of \(reportable) not retried (absorbed by design: "
                + absorbed.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
                + "), acknowledged mutations checked = \(acknowledged), lost = \(lost)"
        )
    }

    /// Why a failed call that reached no caller needs to reach none, or nil when nothing explains it.
    static func absorbedByDesign(_ injection: FaultyFileSystem.Injection) -> String? {
        let path = injection.path ?? ""
        if path == cloud.path || path.hasPrefix(cloud.path + "/") {
            // `DirectoryCloud` stands in for the server: its failures are the server's, which a round retries.
            return "in the cloud double's files"
        }
        if path == device.path + "/asset-uploads" || path.hasPrefix(device.path + "/asset-uploads/") {
            // The checksum an upload got, noted beside nothing durable: a note lost costs one download of
            // bytes the device has, when another device's version of the record arrives.
            return "noting an upload's checksum"
        }
        switch injection.call {
        case .itemKind, .contentsOfDirectory:
            // Looking for leftovers to clean up, or whether a snapshot or the device file is there, which
            // takes the safe side when it cannot tell (a quarantine's free name throws instead).
            return "in checks and scans that take the safe side"
        case .truncate where path.hasSuffix("/commands.log"):
            // Closing the log cuts its reserved zeros off; if that fails, the next open takes them for space.
            return "trimming the log's reserved space"
        case .link:
            // A damaged file is kept under a second name by a hard link, or else by a durable copy.
            return "linking a damaged file's copy"
        case .unlink where path.hasPrefix(device.path + "/assets/"):
            // An asset file no record holds, deleted when the store opens: one left costs space only, and the
            // next open tries again.
            return "deleting an asset file nothing holds"
        case .write where injection.wroteOnlyZeros && path.hasSuffix("/commands.log"):
            // Reserving space after the frames is for speed alone; the next flush reserves again.
            return "reserving log space"
        default:
            return nil
        }
    }

    /// The harness can fail: FlatSync made to believe a failed flush succeeded (as a retried `fsync` on the
    /// same file would tell it) acknowledges mutations that a power loss then takes away, and the sweep
    /// reports them.
    @Test func theSweepReportsAFailedFlushTakenForASuccess() async throws {
        var reported = 0
        let counting = FaultyFileSystem(wrapping: SimulatedDisk())
        counting.logsCalls = true
        _ = await Self.run(on: counting, rounds: 1)
        for (index, call) in counting.callLog.enumerated() where call.call == .sync {
            let faulty = FaultyFileSystem(wrapping: SimulatedDisk())
            faulty.inject(.fsyncFailure, atCall: index + 1)
            var broken = InterceptingFileSystem(faulty)
            broken.sync = { _, sync in
                _ = sync()
                return .success(())
            }
            let report = await Self.run(on: faulty, rounds: 1, through: broken)
            if report.fired && !report.problems.isEmpty { reported += 1 }
        }
        #expect(reported > 0, "the broken variant must be reported")
        print("I/O-error sweep, broken variant (failed fsync taken for success): \(reported) runs reported lost data")
    }

    // MARK: - The workload

    static let device = URL(fileURLWithPath: "/home/device")
    static let cloud = URL(fileURLWithPath: "/home/cloud")

    /// Runs the workload on `faulty` (or on `through`, a wrapper of it), then clears the fault and checks
    /// the reopened store and a power loss after the run.
    static func run(
        on faulty: FaultyFileSystem, rounds: Int, through wrapper: (any FileSystemCalls)? = nil
    ) async -> RunReport {
        let disk = faulty.inner as! SimulatedDisk
        let fileSystem = FileSystem(wrapper ?? faulty)
        let model = DurabilityModel(calls: { faulty.callCount })
        var report = RunReport()
        let workload = Workload(fileSystem: fileSystem, disk: disk, model: model)
        await workload.run(rounds: rounds)
        report.errors = workload.errors
        report.fired = !faulty.injections.isEmpty
        faulty.clearFaults()

        // The process restarts (nothing lost but what it held in memory); or the power goes, keeping only
        // what was flushed, or that and some of the rest.
        let images = [
            ("after the fault cleared", disk),
            ("after a power loss", SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)),
            (
                "after a power loss with random damage",
                SimulatedDisk.crashImage(of: disk.model, damage: .random(seed: 7))
            ),
        ]
        for (name, disk) in images {
            var options = LocalStore.Options(
                deviceID: nil, clock: TestClock(), recordTypes: [TestRecipe.self, TestPhoto.self])
            options.fileSystem = FileSystem(disk)
            do {
                let store = try LocalStore(directory: device, options: options)
                let cloud = try DirectoryCloud(directory: IOErrorSweepTests.cloud, fileSystem: FileSystem(disk))
                let problems = await model.problems(in: store, checkingPending: true, cloud: cloud)
                report.problems += problems.map { "\(name): \($0)" }
                report.acknowledgedChecked += model.acknowledgedCount()
                await store.abandon()
            } catch {
                report.problems.append("\(name): the store does not open: \(error)")
            }
        }
        return report
    }

    /// The sweep's workload: a device with a `DirectoryCloud`, both on the faulty disk.
    final class Workload {
        let fileSystem: FileSystem
        let disk: SimulatedDisk
        let model: DurabilityModel
        var context: SyncContext?
        var errors: [String] = []
        /// One per context opened: the errors on its event stream (failures no call threw, such as a
        /// snapshot the timer could not save), returned once the stream ends.
        private var eventErrors: [Task<[String], Never>] = []
        private var article = 0

        init(fileSystem: FileSystem, disk: SimulatedDisk, model: DurabilityModel) {
            self.fileSystem = fileSystem
            self.disk = disk
            self.model = model
        }

        private func note(_ error: any Error) {
            errors.append("\(type(of: error)) \(error)")
        }

        private func open() async {
            guard context == nil else { return }
            var configuration = SyncContext.Configuration(clock: TestClock())
            configuration.recordTypes = [TestRecipe.self, TestPhoto.self]
            configuration.fileSystem = fileSystem
            configuration.randomSeed = 1
            do {
                let cloud = try DirectoryCloud(directory: IOErrorSweepTests.cloud, fileSystem: fileSystem)
                let opened = try await SyncContext.open(
                    directory: IOErrorSweepTests.device, account: CloudAccount(id: "user", transport: cloud),
                    configuration: configuration)
                let events = opened.events()
                eventErrors.append(
                    Task {
                        var errors: [String] = []
                        for await case .error(let error) in events { errors.append("SyncEvent.error \(error)") }
                        return errors
                    })
                context = opened
            } catch {
                note(error)
            }
        }

        private func close() async {
            guard let context else { return }
            self.context = nil
            do { try await context.close() } catch { note(error) }
            // `close()` ends the stream; ended again here so that waiting for it can never hang.
            context.localStore.eventHub.finish()
            for task in eventErrors { errors += await task.value }
            eventErrors = []
        }

        private func mutate(_ mutation: DurabilityModel.Mutation) async {
            await open()
            guard let context else { return }
            let error = await model.perform(mutation) {
                switch mutation {
                case .add(let id): try await context.readingList.add(id)
                case .remove(let id): try await context.readingList.remove(id)
                case .visit(let id): try await context.history.visit(id)
                case .saveRecipe(let id):
                    try await context.records(TestRecipe.self).save(TestRecipe(id: "recipe-" + id, title: id))
                case .deleteRecipe(let id): try await context.records(TestRecipe.self).delete("recipe-" + id)
                case .savePhoto(let id):
                    let image = try await context.makeAsset(DurabilityModel.Mutation.photoBytes(id))
                    try await context.records(TestPhoto.self).save(
                        TestPhoto(id: "photo-" + id, caption: id, image: image))
                case .deletePhoto(let id): try await context.records(TestPhoto.self).delete("photo-" + id)
                }
            }
            if let error { note(error) }
        }

        private func newArticle() -> String {
            article += 1
            return "a\(article)"
        }

        /// Parks the pending change of an article's entry as a refused one (its refusal written to
        /// `refused-changes.plist`); the next sync sends it again, since a sync asks for that.
        private func park(_ article: String) async {
            await open()
            guard let context else { return }
            let id = ReadingListEntry.recordID(for: article)
            guard let change = await context.localStore.pendingChange(for: id) else { return }
            do {
                try await context.localStore.park([
                    RefusedChange(
                        recordID: id, isDelete: change.isDelete, code: .invalidArguments, reason: "sweep",
                        refusedAt: Date(timeIntervalSince1970: 0), changeSequence: change.sequence)
                ])
            } catch {
                note(error)
            }
        }

        /// Saves both snapshots; true when both were written.
        private func snapshot() async -> Bool {
            await open()
            guard let context else { return false }
            do {
                for zone in context.localStore.zoneIDs { try await context.localStore.persistSnapshot(of: zone) }
                return true
            } catch {
                note(error)
                return false
            }
        }

        private func sync() async {
            await open()
            guard let context else { return }
            do {
                // A failure the round absorbed shows as a problem in its summary: the host hears of it too.
                let summary = try await context.syncNow()
                if !summary.problems.isEmpty { errors.append("CloudError (in the summary) \(summary.problems)") }
            } catch {
                note(error)
            }
        }

        private func compact() async {
            await open()
            guard let context else { return }
            do { try await context.localStore.compact() } catch { note(error) }
        }

        /// Damages files behind the store's back (not counted as calls), then opens it, which repairs them.
        private func damage(logTail: Bool, deviceFile: Bool, logMiddle: Bool) async {
            await close()
            let directory = IOErrorSweepTests.device.path
            if deviceFile, var bytes = disk.contents(of: directory + "/device.plist"), bytes.count > 40 {
                bytes[bytes.count / 2] ^= 0x55
                disk.setContents(of: directory + "/device.plist", to: bytes)
            }
            if var bytes = disk.contents(of: directory + "/commands.log") {
                if logMiddle {
                    // A damaged frame followed by a valid one that claims the damaged bytes were durable: real
                    // damage, quarantined and repaired. Nothing before it is lost; the frame after it is an
                    // `unsealed` that changes nothing.
                    var damaged: [UInt8] = []
                    AppendLog.appendFrame(Data("lost".utf8), syncedThrough: 0, to: &damaged)
                    damaged[damaged.count - 1] ^= 0x55
                    bytes += damaged
                    AppendLog.appendFrame(
                        CommandLogEvent.unsealed(.readingList).encoded(), syncedThrough: bytes.count, to: &bytes)
                }
                if logTail { bytes += Array(repeating: 0x9E, count: 7) }
                disk.setContents(of: directory + "/commands.log", to: bytes)
            }
            await open()
        }

        func run(rounds: Int) async {
            await open()
            let first = newArticle()
            let second = newArticle()
            let read = newArticle()
            await mutate(.add(first))
            await mutate(.add(second))
            await mutate(.visit(read))
            await mutate(.visit(read))
            await mutate(.remove(second))
            await mutate(.saveRecipe(first))
            await mutate(.saveRecipe(second))
            await mutate(.deleteRecipe(first))
            // Photos, both uploaded by the sync; then one is replaced and the other deleted, so that the next
            // open (each round's damage reopens) deletes the files no record holds.
            await mutate(.savePhoto(first))
            await mutate(.savePhoto(second))
            await sync()
            await mutate(.savePhoto(first))
            await mutate(.deletePhoto(second))
            for _ in 0..<rounds {
                let added = newArticle()
                await mutate(.add(added))
                await park(added)
                await mutate(.visit(newArticle()))
                _ = await snapshot()
                await compact()
                await damage(logTail: true, deviceFile: true, logMiddle: false)
                await mutate(.add(newArticle()))
                await mutate(.remove(added))
                await mutate(.visit(read))
                await damage(logTail: false, deviceFile: false, logMiddle: true)
                await mutate(.add(newArticle()))
                await sync()
            }
            await mutate(.add(newArticle()))
            await close()
        }
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// Concurrent writers sharing one trip into the store actor (``WriteCombiner``,
/// ``LocalStore/applyDurably(_:)``).
@Suite struct WriteCombinerTests {
    // MARK: - The role and the inbox

    @Test func theRoleIsHeldByOneCallerUntilItFindsTheInboxEmpty() {
        let combiner = WriteCombiner<Int>()
        #expect(combiner.tryToCombine())
        #expect(!combiner.tryToCombine(), "a second caller finds a combiner at work")
        #expect(combiner.handIn(1))
        #expect(combiner.handIn(2))
        #expect(combiner.inboxCount == 2)
        #expect(combiner.takeInbox() == [1, 2], "oldest first")
        #expect(combiner.handIn(3), "the role is still held after a batch")
        #expect(combiner.takeInbox() == [3])
        #expect(combiner.takeInbox() == nil, "an empty inbox gives the role up")
        #expect(combiner.tryToCombine(), "and the next caller takes it")
    }

    @Test func handingInWithNoCombinerAtWorkTakesTheRoleAndKeepsNothing() {
        let combiner = WriteCombiner<Int>()
        #expect(!combiner.handIn(1), "no combiner: the caller combines itself")
        #expect(combiner.inboxCount == 0)
        #expect(!combiner.tryToCombine(), "the caller holds the role now")
        #expect(combiner.handIn(2))
        #expect(combiner.takeInbox() == [2])
        #expect(combiner.takeInbox() == nil)
    }

    @Test func aCombinerComingOntoTheActorTakesWhatWasHandedInAndKeepsTheRole() {
        let combiner = WriteCombiner<Int>()
        #expect(combiner.tryToCombine())
        #expect(combiner.takeInboxKeepingRole().isEmpty, "nothing handed in yet")
        #expect(combiner.handIn(1), "the role is still held")
        #expect(combiner.handIn(2))
        #expect(combiner.takeInboxKeepingRole() == [1, 2], "oldest first")
        #expect(combiner.inboxCount == 0)
        #expect(combiner.handIn(3), "still held after taking")
        #expect(combiner.takeInbox() == [3])
        #expect(combiner.takeInbox() == nil)
        #expect(combiner.tryToCombine())
    }

    // MARK: - Through the store

    struct Refused: Error, Equatable {}

    /// What a writer handed in returned, and how many flushes the log had made when it did.
    struct Returned {
        var changed: Int
        var flushesSeen: Int
    }

    /// Holds the combiner's role while `writers` hand their mutations in, then combines with `own`: every
    /// writer handed in is applied in the combiner's trip. Returns the combiner's result and the writers'.
    private func combine(
        _ store: LocalStore,
        writers: [@Sendable () async throws -> Int],
        own: LocalStore.Request
    ) async throws -> (own: Result<Int, any Error>, writers: [Result<Returned, any Error>]) {
        #expect(store.combiner.tryToCombine())
        var tasks: [Task<Returned, any Error>] = []
        for writer in writers {
            tasks.append(Task { Returned(changed: try await writer(), flushesSeen: store.logFlushCount) })
            // One at a time, so they are handed in (and applied) in this order.
            try await yieldUntil { store.combiner.inboxCount == tasks.count }
        }
        var combined = Result<Int, any Error>.success(0)
        do {
            combined = .success(try await store.combineAndWait(own))
        } catch {
            combined = .failure(error)
        }
        var results: [Result<Returned, any Error>] = []
        // Watched: a writer the combiner forgot to tell would otherwise hang the suite.
        for task in tasks { results.append(await result(of: task)) }
        return (combined, results)
    }

    @Test(.timeLimit(.minutes(1)))
    func writersHandedInAreAppliedInTheCombinersTripAndReturnOnceDurable() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("already-there")
            let flushesBefore = store.logFlushCount
            let list = store.readingList
            let (own, writers) = try await combine(
                store,
                writers: [
                    { try await list.add("a") ? 1 : 0 },
                    { try await list.add("already-there") ? 1 : 0 },
                    { try await store.applyDurably { _ in throw Refused() } },
                    { try await store.history.apply([.visit(articleID: "b", version: 1), .markRead(articleID: "c")]) },
                ],
                own: .mutation {
                    try $0.applyMutation(
                        \.readingList, [ReadingListChange.add(articleID: "own")])
                }
            )
            #expect(try own.get() == 1)
            #expect(try writers[0].get().changed == 1)
            #expect(try writers[1].get().changed == 0, "a mutation that changes nothing")
            #expect(throws: Refused.self) { try writers[2].get() }
            #expect(try writers[3].get().changed == 2)
            #expect(store.logFlushCount == flushesBefore + 1, "one flush covered the whole trip")
            for index in [0, 3] {
                #expect(try writers[index].get().flushesSeen == flushesBefore + 1, "returned only once durable")
            }
            #expect(store.combiner.tryToCombine(), "the combiner gave its role up")
            _ = store.combiner.takeInbox()
            try await store.close()

            // Everything acknowledged was durable: it is there after a reopen.
            let reopened = try LocalStore(directory: directory, options: testOptions())
            for id in ["already-there", "a", "own"] { #expect(await reopened.readingList.contains(id)) }
            #expect(await reopened.history.item("b") != nil)
            #expect(await reopened.history.item("c") != nil)
            try await reopened.close()
        }
    }

    /// Single changes handed in next to each other are applied as one batch per zone, and each writer hears
    /// what its change alone would have done after the ones before it — as one writer applying them in turn.
    @Test(.timeLimit(.minutes(1)))
    func neighbouringSingleChangesOfAZoneAreAppliedAsOneMutationWithEachWritersOwnResult() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            let list = store.readingList
            let history = store.history
            // What the writers do, in the order they hand in.
            let script: [@Sendable (LocalStore) async throws -> Int] = [
                { try await $0.readingList.add("a") ? 1 : 0 },
                { try await $0.readingList.add("a") ? 1 : 0 },  // the same article again: changes nothing
                { try await $0.readingList.add("already-there") ? 1 : 0 },
                { try await $0.readingList.add("b") ? 1 : 0 },
                { try await $0.readingList.remove("b") ? 1 : 0 },  // takes back what the batch added
                { try await $0.history.visit("v") ? 1 : 0 },  // another zone: a batch of its own
                { try await $0.history.setLiking("v", .liked) ? 1 : 0 },
                { try await $0.history.markRead("v") ? 1 : 0 },  // the visit read it: changes nothing
                { try await $0.applyDurably { _ in throw Refused() } },  // not a single change: alone
                { try await $0.readingList.add("c") ? 1 : 0 },
            ]
            try await list.add("already-there")
            let sequenceBefore = await store.nextMutationSequence
            let flushesBefore = store.logFlushCount
            let (own, writers) = try await combine(
                store, writers: script.map { step in { try await step(store) } },
                own: .mutation { try $0.applyMutation(\.readingList, [ReadingListChange.add(articleID: "own")]) })
            #expect(try own.get() == 1)
            let changed = writers.map { try? $0.get().changed }
            #expect(changed == [1, 0, 0, 1, 1, 1, 1, 0, nil, 1])
            #expect(await history.item("v")?.liking == .liked)
            #expect(throws: Refused.self) { try writers[8].get() }
            #expect(
                await store.nextMutationSequence - sequenceBefore == 4,
                "the combiner's own, the list's batch of five, the history's batch of three, and c alone")
            #expect(store.logFlushCount == flushesBefore + 1)

            // One writer applying the same changes in turn hears the same and ends with the same contents.
            try await withTemporaryDirectory { alone in
                let sequential = try LocalStore(directory: alone, options: testOptions())
                try await sequential.readingList.add("already-there")
                try await sequential.readingList.add("own")
                var results: [Int?] = []
                for step in script { results.append(try? await step(sequential)) }
                #expect(results == changed)
                #expect(
                    await sequential.readingList.entries().map(\.articleID).sorted()
                        == list.entries().map(\.articleID).sorted())
                #expect(await sequential.history.item("v")?.isRead == true)
                try await sequential.close()
            }
            #expect(await history.item("v")?.isRead == true)
            try await store.close()

            // And after a reopen.
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(
                await reopened.readingList.entries().map(\.articleID).sorted() == ["a", "already-there", "c", "own"])
            #expect(await reopened.history.item("v")?.isRead == true)
            try await reopened.close()
        }
    }

    /// A combiner whose own mutation is a single change applies it in one batch with the single changes of
    /// its zone handed in while it came onto the actor: one mutation for all of them, each writer hearing
    /// its own result, the combiner its own.
    @Test(.timeLimit(.minutes(1)), arguments: ["own", "already-there"])
    func aCombinersOwnSingleChangeJoinsTheChangesHandedIn(ownArticle: String) async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            let list = store.readingList
            try await list.add("already-there")
            let sequenceBefore = await store.nextMutationSequence
            let flushesBefore = store.logFlushCount
            let (own, writers) = try await combine(
                store,
                writers: [
                    { try await list.add("a") ? 1 : 0 }, { try await list.add(ownArticle) ? 1 : 0 },
                    { try await store.history.visit("v") ? 1 : 0 },
                ],
                own: .single(.readingList(.add(articleID: ownArticle))))
            #expect(try own.get() == (ownArticle == "own" ? 1 : 0))
            #expect(writers.map { try? $0.get().changed } == [1, 0, 1], "the same article again changes nothing")
            #expect(
                await store.nextMutationSequence - sequenceBefore == 2,
                "the combiner's own change and the list's two in one mutation, the history's in another")
            #expect(store.logFlushCount == flushesBefore + 1)
            try await store.close()

            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(
                await reopened.readingList.entries().map(\.articleID).sorted()
                    == (ownArticle == "own" ? ["a", "already-there", "own"] : ["a", "already-there"]))
            #expect(await reopened.history.item("v") != nil)
            try await reopened.close()
        }
    }

    /// What the writers of the failing-batch tests do, in the order they hand in: a list add that changes
    /// nothing, two that do, and a history visit (another zone: a batch of its own).
    private static let failingBatchScript: [@Sendable (LocalStore) async throws -> Int] = [
        { try await $0.readingList.add("already-there") ? 1 : 0 }, { try await $0.readingList.add("a") ? 1 : 0 },
        { try await $0.readingList.add("b") ? 1 : 0 }, { try await $0.history.visit("v") ? 1 : 0 },
    ]

    /// A buffered store on a faulty file system, holding "already-there".
    private func storeOnFaultyDisk(_ directory: URL) async throws -> (LocalStore, FaultyFileSystem) {
        let faulty = FaultyFileSystem()
        var options = testOptions(durability: .buffered)
        options.fileSystem = FileSystem(faulty)
        let store = try LocalStore(directory: directory, options: options)
        try await store.readingList.add("already-there")
        return (store, faulty)
    }

    /// What one writer hears applying `steps` in turn, on a store of its own (``storeOnFaultyDisk(_:)``) whose
    /// next write to its log fails: what a batch's writers should hear too.
    private func oneByOneWithTheNextWriteFailing(
        _ steps: [@Sendable (LocalStore) async throws -> Int]
    ) async throws -> [Result<Int, any Error>] {
        try await withTemporaryDirectory { directory in
            let (store, faulty) = try await storeOnFaultyDisk(directory)
            faulty.failNext(.write, with: .ioError, pathSuffix: "commands.log")
            var results: [Result<Int, any Error>] = []
            for step in steps {
                do { results.append(.success(try await step(store))) } catch { results.append(.failure(error)) }
            }
            try await store.close()
            return results
        }
    }

    /// Every change of the failing-batch script is there after the store was given up without a close, as a
    /// killed process leaves it.
    private func expectTheScriptsChangesKept(_ store: LocalStore, _ directory: URL) async throws {
        await store.abandon()
        let reopened = try LocalStore(directory: directory, options: testOptions(durability: .buffered))
        #expect(await reopened.readingList.entries().map(\.articleID).sorted() == ["a", "already-there", "b"])
        #expect(await reopened.history.item("v") != nil)
        try await reopened.close()
    }

    /// A batch of single changes whose log entry cannot be written is made durable at once by the repair
    /// of the log (a rewrite of what memory holds), and the writers hear what they would have one by one:
    /// the first that changed its record the failure (its entry failed), the others their own results
    /// (their mutations would have repaired the log first).
    @Test(.timeLimit(.minutes(1)))
    func aBatchWhoseEntryCannotBeWrittenIsRepairedAndTheWritersHearWhatTheyWouldOneByOne() async throws {
        try await withTemporaryDirectory { directory in
            let (store, faulty) = try await storeOnFaultyDisk(directory)
            faulty.failNext(.write, with: .ioError, pathSuffix: "commands.log")
            let (own, writers) = try await combine(
                store, writers: Self.failingBatchScript.map { step in { try await step(store) } },
                own: .mutation { _ in throw Refused() })
            #expect(throws: Refused.self) { try own.get() }
            #expect(faulty.injections.count == 1, "the batch's entry failed")
            #expect(writers.map { try? $0.get().changed } == [0, nil, 1, 1])
            #expect((writers[1].error as? FlatSyncError)?.code == .ioFailed, "the first change that changed")

            // One writer applying the same changes in turn, with the same write failing, hears the same.
            let alone = try await oneByOneWithTheNextWriteFailing(Self.failingBatchScript)
            #expect(alone.map { try? $0.get() } == writers.map { try? $0.get().changed })
            try await expectTheScriptsChangesKept(store, directory)
        }
    }

    /// The combiner's own single change, joined to the batch whose entry cannot be written, is the first to
    /// change its record: it hears the failure, and the writers what they would have after it one by one.
    @Test(.timeLimit(.minutes(1)))
    func aCombinersOwnChangeInABatchThatCannotBeWrittenHearsTheFailure() async throws {
        try await withTemporaryDirectory { directory in
            let (store, faulty) = try await storeOnFaultyDisk(directory)
            faulty.failNext(.write, with: .ioError, pathSuffix: "commands.log")
            let (own, writers) = try await combine(
                store, writers: Self.failingBatchScript.map { step in { try await step(store) } },
                own: .single(.readingList(.add(articleID: "own"))))
            #expect((own.error as? FlatSyncError)?.code == .ioFailed)
            #expect(faulty.injections.count == 1, "the batch's entry failed")
            #expect(writers.map { try? $0.get().changed } == [0, 1, 1, 1])

            let alone = try await oneByOneWithTheNextWriteFailing(
                [{ try await $0.readingList.add("own") ? 1 : 0 }] + Self.failingBatchScript)
            #expect(alone.first?.error is FlatSyncError, "alone, its own add is the one whose entry failed")
            #expect(alone.dropFirst().map { try? $0.get() } == writers.map { try? $0.get().changed })
            await store.abandon()
            let reopened = try LocalStore(directory: directory, options: testOptions(durability: .buffered))
            #expect(
                await reopened.readingList.entries().map(\.articleID).sorted() == ["a", "already-there", "b", "own"],
                "the repair wrote what memory held, the failed entry's changes too")
            try await reopened.close()
        }
    }

    /// When the repair fails too, each writer of the batch hears the failure — also one whose change changed
    /// nothing — and no one else: the next batch of the trip repairs the log and is applied, and that repair
    /// writes what memory holds, the failed batch's changes too.
    @Test(.timeLimit(.minutes(1)))
    func aBatchThatCannotBeLoggedNorRepairedFailsEachOfItsWriters() async throws {
        try await withTemporaryDirectory { directory in
            let (store, faulty) = try await storeOnFaultyDisk(directory)
            faulty.failNext(.write, with: .ioError, pathSuffix: "commands.log")
            faulty.failNext(.rename, with: .ioError)
            let (own, writers) = try await combine(
                store, writers: Self.failingBatchScript.map { step in { try await step(store) } },
                own: .mutation { _ in throw Refused() })
            #expect(throws: Refused.self) { try own.get() }
            #expect(faulty.injections.map(\.call) == [.write, .rename])
            for index in 0..<3 {
                #expect((writers[index].error as? FlatSyncError)?.code == .ioFailed, "writer \(index)")
            }
            #expect(try writers[3].get().changed == 1)
            try await expectTheScriptsChangesKept(store, directory)
        }
    }

    /// A combiner whose own mutation fails still flushes the writers it applied, and they return.
    @Test(.timeLimit(.minutes(1)))
    func aCombinerWhoseOwnMutationFailsStillMakesTheOthersDurable() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            let list = store.readingList
            let (own, writers) = try await combine(
                store, writers: [{ try await list.add("a") ? 1 : 0 }], own: .mutation { _ in throw Refused() })
            #expect(throws: Refused.self) { try own.get() }
            #expect(try writers[0].get().changed == 1)
            #expect(try writers[0].get().flushesSeen == 1)
            #expect(store.logFlushCount == 1)
            try await store.close()
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(await reopened.readingList.contains("a"))
            try await reopened.close()
        }
    }

    /// A combiner whose own mutation changes nothing still leads the flush its trip needs.
    @Test(.timeLimit(.minutes(1)))
    func aCombinerWhoseOwnMutationChangesNothingStillFlushesTheOthers() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("already-there")
            let list = store.readingList
            let (own, writers) = try await combine(
                store, writers: [{ try await list.add("a") ? 1 : 0 }],
                own: .mutation {
                    try $0.applyMutation(\.readingList, [ReadingListChange.add(articleID: "already-there")])
                })
            #expect(try own.get() == 0)
            #expect(try writers[0].get().changed == 1)
            #expect(try writers[0].get().flushesSeen == 2)
            try await store.close()
        }
    }

    /// When the flush that covers a trip fails, the combiner and every writer it applied get the error; a
    /// combiner whose own mutation changed nothing has nothing to lose and returns.
    @Test(.timeLimit(.minutes(1)), arguments: [true, false], [true, false])
    func aFailedFlushFailsEveryWriterOfTheTrip(combinerChanges: Bool, ownIsASingleChange: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let faulty = FaultyFileSystem()
            var options = testOptions()
            options.fileSystem = FileSystem(faulty)
            let store = try LocalStore(directory: directory, options: options)
            try await store.readingList.add("already-there")
            faulty.failNext(.sync, with: .ioError)
            let list = store.readingList
            let ownArticle = combinerChanges ? "own" : "already-there"
            // A single change joins the writers' batch; a mutation goes alone.
            let (own, writers) = try await combine(
                store,
                writers: [{ try await list.add("a") ? 1 : 0 }, { try await list.add("b") ? 1 : 0 }],
                own: ownIsASingleChange
                    ? .single(.readingList(.add(articleID: ownArticle)))
                    : .mutation { try $0.applyMutation(\.readingList, [ReadingListChange.add(articleID: ownArticle)]) }
            )
            for result in writers {
                #expect((result.error as? FlatSyncError)?.code == .ioFailed)
            }
            if combinerChanges {
                #expect((own.error as? FlatSyncError)?.code == .ioFailed)
            } else {
                #expect(try own.get() == 0)
            }
            try? await store.close()
        }
    }

    /// A lone writer is never kept waiting for company: each of its changes is flushed on its own.
    @Test func aLoneWriterFlushesEachChange() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            for index in 0..<20 { try await store.readingList.add("alone-\(index)") }
            try await store.history.visit("v")
            #expect(store.logFlushCount == 21)
            try await store.close()
        }
    }

    /// Many writers at once, whoever combines: every add is applied once, none is lost or applied twice.
    @Test(.timeLimit(.minutes(1)))
    func concurrentWritersAreAllAppliedOnce() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            let list = store.readingList
            let writers = 16
            let adds = 20
            let added = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var count = 0
                        for index in 0..<adds where try await list.add("w\(writer)-\(index)") { count += 1 }
                        return count
                    }
                }
                return try await group.reduce(0, +)
            }
            #expect(added == writers * adds)
            #expect(store.logFlushCount < writers * adds, "writers shared flushes")
            try await store.close()
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(await reopened.readingList.count() == writers * adds)
            try await reopened.close()
        }
    }
}

extension Result {
    fileprivate var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct PendingCommandsTests {
    private typealias F = Fixtures

    private func queue(_ mutations: [[RecordChange]], zone: ZoneID = .readingList) -> PendingCommands {
        PendingCommands().enqueuing(mutations, zone: zone)
    }

    // MARK: - The coalescing table, pair by pair

    @Test func modifyThenModifyKeepsOneModifyWithTheLaterRecordAndBothKeys() throws {
        let queue = queue([
            [F.save("a", ["title": .string("one"), "count": .int(1)], keys: ["title"])],
            [F.save("a", ["title": .string("one"), "count": .int(2)], keys: ["count"])],
        ])
        #expect(queue.commandCount == 1)
        let change = try #require(queue.latestChange(for: F.id("a")))
        #expect(change.record?.fields == ["title": .string("one"), "count": .int(2)])
        #expect(change.changedKeys == ["title", "count"])
        #expect(change.sequence == 2)
    }

    @Test func modifyThenRemoveLeavesOnlyTheRemove() throws {
        let queue = queue([[F.save("a", ["n": .int(1)])], [F.delete("a")]])
        #expect(queue.commandCount == 1)
        #expect(queue.allCommands.first?.kind == .removeRecords)
        #expect(try #require(queue.latestChange(for: F.id("a"))).isDelete)
    }

    @Test func removeThenModifyLeavesOnlyTheModifyWithTheWholeRecord() throws {
        let queue = queue([[F.delete("a")], [F.save("a", ["n": .int(1), "m": .int(2)], keys: ["n"])]])
        #expect(queue.commandCount == 1)
        #expect(queue.allCommands.first?.kind == .modifyRecords)
        let change = try #require(queue.latestChange(for: F.id("a")))
        #expect(change.record?.fields == ["n": .int(1), "m": .int(2)])
        #expect(change.replacesRecord, "sent, it replaces the record the delete was for, not updates it")
        let later = queue.enqueuing([F.save("a", ["n": .int(5), "m": .int(2)], keys: ["n"])], sequence: 3)
        #expect(try #require(later.latestChange(for: F.id("a"))).replacesRecord, "a later save keeps that")
    }

    @Test func aSaveOnItsOwnOrAfterASaveUpdatesTheRecord() throws {
        let queue = queue([[F.save("a", ["n": .int(1)])], [F.save("a", ["n": .int(2)])]])
        #expect(try #require(queue.latestChange(for: F.id("a"))).replacesRecord == false)
    }

    @Test func aSaveThatOutlivesADeleteOfTheSameRoundReplacesTheRecord() throws {
        var queue = queue([[F.save("a", ["n": .int(1)])]])
        queue.enqueue(Mutation(sequence: 2, zone: .readingList, changes: [F.delete("a")]))
        _ = queue.seal(.readingList)
        queue.enqueue(Mutation(sequence: 3, zone: .readingList, changes: [F.save("a", ["n": .int(3)])]))
        #expect(try #require(queue.latestChange(for: F.id("a"))).replacesRecord == false, "not while the delete is out")
        queue.unseal(.readingList)  // the delete did not go through
        let change = try #require(queue.latestChange(for: F.id("a")))
        #expect(!change.isDelete && change.replacesRecord)
        #expect(queue.inconsistencies().isEmpty)
    }

    /// A save made while an earlier save of the record was out, which then did not go through, is the
    /// two coalesced: it was made with only its own keys (the store held the earlier change's values
    /// already), and sending only those would leave the earlier change's fields off the server.
    @Test func aSaveMadeWhileAnEarlierSaveWasOutTakesItsKeysWhenTheRoundFails() throws {
        var queue = queue([[F.save("a", ["n": .int(1), "m": .int(0)], keys: ["n"])]])
        _ = queue.seal(.readingList)
        queue.enqueue(
            Mutation(
                sequence: 2, zone: .readingList, changes: [F.save("a", ["n": .int(1), "m": .int(2)], keys: ["m"])]))
        queue.unseal(.readingList)  // the first save did not go through
        let change = try #require(queue.latestChange(for: F.id("a")))
        #expect(change.changedKeys == ["n", "m"])
        #expect(change.record?.fields == ["n": .int(1), "m": .int(2)])
        #expect(queue.recordCount() == 1)
        #expect(queue.inconsistencies().isEmpty)
    }

    /// The same for a save that stood for a delete and a new record: the newer save replaces the record too.
    @Test func aSaveMadeWhileAReplacingSaveWasOutReplacesTheRecordWhenTheRoundFails() throws {
        var queue = queue([[F.delete("a")], [F.save("a", ["n": .int(1)])]])
        #expect(try #require(queue.latestChange(for: F.id("a"))).replacesRecord)
        _ = queue.seal(.readingList)
        queue.enqueue(Mutation(sequence: 3, zone: .readingList, changes: [F.save("a", ["n": .int(3)])]))
        queue.unseal(.readingList)
        #expect(try #require(queue.latestChange(for: F.id("a"))).replacesRecord)
        #expect(queue.inconsistencies().isEmpty)
    }

    @Test func removeThenRemoveLeavesOneRemove() {
        let queue = queue([[F.delete("a")], [F.delete("a")]])
        #expect(queue.commandCount == 1)
        #expect(queue.recordCount() == 1)
        #expect(queue.latestChange(for: F.id("a"))?.sequence == 2)
    }

    @Test func everyPairCoalescesEvenWhenOtherCommandsFollowThePendingOne() {
        let operations: [(String, (String) -> RecordChange)] = [
            ("save", { F.save($0, ["v": .string($0)]) }), ("delete", { F.delete($0) }),
        ]
        for (firstName, first) in operations {
            for (secondName, second) in operations {
                // The pending change for "a" sits in an older command, behind commands of the other kind.
                let queue = queue([[first("a")], [F.delete("x")], [F.save("y", ["v": .int(1)])], [second("a")]])
                let label = "\(firstName) then \(secondName)"
                #expect(queue.recordCount() == 3, "\(label): one change per record")
                #expect(queue.latestChange(for: F.id("a"))?.isDelete == (secondName == "delete"), "\(label)")
                #expect(queue.latestChange(for: F.id("a"))?.sequence == 4, "\(label)")
            }
        }
    }

    @Test func changesOfTheSameKindJoinTheLastCommand() {
        let mutations = (0..<10_000).map { i in [F.save("article-\(i % 100)", ["n": .int(Int64(i))])] }
        let queue = queue(mutations)
        #expect(queue.commandCount == 1)
        #expect(queue.recordCount() == 100)
    }

    /// A batch whose changes alternate saves and deletes makes a command per change (each joins the last
    /// command only if it is of its kind). Each new command once reserved room for every change left in the
    /// batch: 4,000 such changes reserved 12 million slots (3 GB of address space). Now the room
    /// reserved in a batch is at most one slot per change, and a batch of one kind still gets it all at once.
    @Test func aBatchAlternatingKindsReservesNoMoreThanItsChanges() {
        func reserved(_ queue: PendingCommands) -> Int {
            queue.allCommands.reduce(0) { $0 + $1.slots.capacity }
        }
        let alternating = (0..<4_000).map { i in
            i.isMultiple(of: 2) ? F.save("article-\(i)", ["n": .int(Int64(i))]) : F.delete("article-\(i)")
        }
        let mixed = queue([alternating])
        #expect(mixed.commandCount == 4_000)
        #expect(mixed.recordCount() == 4_000)
        #expect(reserved(mixed) <= 4 * 4_000, "\(reserved(mixed)) slots for 4,000 changes")

        let uniform = queue([(0..<4_000).map { F.save("article-\($0)", ["n": .int(Int64($0))]) }])
        #expect(uniform.commandCount == 1)
        #expect(reserved(uniform) >= 4_000)
        #expect(reserved(uniform) <= 2 * 4_000 + 16)
    }

    @Test func zonesKeepSeparateQueues() {
        var queue = PendingCommands()
        queue.enqueue(Mutation(sequence: 1, zone: .readingList, changes: [F.save("a", ["n": .int(1)])]))
        queue.enqueue(
            Mutation(sequence: 2, zone: .readingHistory, changes: [F.save("a", in: .readingHistory, ["n": .int(1)])])
        )
        #expect(queue.commands(in: .readingList).count == 1)
        #expect(queue.commands(in: .readingHistory).count == 1)
        #expect(queue.recordCount() == 2)
    }

    // MARK: - Rounds of sending

    @Test func aChangeMadeWhileARoundIsOutNeverTouchesTheSealedCommand() throws {
        var queue = queue([[F.save("a", ["n": .int(1)])]])
        let sealed = queue.seal(.readingList)
        #expect(sealed.count == 1)
        queue.enqueue(Mutation(sequence: 2, zone: .readingList, changes: [F.save("a", ["n": .int(2)])]))
        #expect(queue.commandCount == 2, "the new change is a new command")
        #expect(queue.command(sealed[0].id)?.changes[F.id("a")]?.record?.fields == ["n": .int(1)])
        #expect(queue.latestChange(for: F.id("a"))?.record?.fields == ["n": .int(2)])
        let secondRound = queue.seal(.readingList)
        #expect(secondRound.isEmpty, "one round at a time")
    }

    @Test func aCommandLeavesOnlyWhenEveryRecordIsAcknowledged() {
        var queue = queue([[F.save("a", ["n": .int(1)]), F.save("b", ["n": .int(1)])]])
        let command = queue.seal(.readingList)[0]
        let finishedAfterA = queue.acknowledge([F.id("a")], in: command.id)
        #expect(!finishedAfterA)
        #expect(queue.commandCount == 1)
        let finishedAfterB = queue.acknowledge([F.id("b")], in: command.id)
        #expect(finishedAfterB)
        #expect(queue.isEmpty)
    }

    @Test func unsealingReturnsWhatIsLeftAndKeepsOnlyNewerChanges() throws {
        var queue = queue([[F.save("a", ["n": .int(1)]), F.save("b", ["n": .int(1)]), F.save("c", ["n": .int(1)])]])
        let command = queue.seal(.readingList)[0]
        queue.acknowledge([F.id("a")], in: command.id)
        queue.enqueue(Mutation(sequence: 2, zone: .readingList, changes: [F.delete("b")]))
        queue.unseal(.readingList)
        #expect(queue.command(command.id)?.changes.keys.sorted() == [F.id("c")])
        #expect(try #require(queue.latestChange(for: F.id("b"))).isDelete)
        #expect(queue.recordCount() == 2)
        // After the round, new changes coalesce with the returned command again.
        queue.enqueue(Mutation(sequence: 3, zone: .readingList, changes: [F.save("c", ["n": .int(3)])]))
        #expect(queue.command(command.id)?.changes[F.id("c")]?.record?.fields == ["n": .int(3)])
    }

    @Test func clearingAZoneDropsItsCommandsOnly() {
        var queue = PendingCommands()
        queue.enqueue(Mutation(sequence: 1, zone: .readingList, changes: [F.save("a", ["n": .int(1)])]))
        queue.enqueue(
            Mutation(sequence: 2, zone: .readingHistory, changes: [F.save("h", in: .readingHistory, ["n": .int(1)])])
        )
        _ = queue.seal(.readingList)
        queue.clear(zone: .readingList)
        #expect(queue.commands(in: .readingList).isEmpty)
        #expect(!queue.isSending(.readingList))
        #expect(queue.recordCount() == 1)
        queue.clearAll()
        #expect(queue.isEmpty)
        #expect(queue.nextCommandID == 3, "IDs are never reused")
    }

    // MARK: - Long random sequences against a model server

    /// A server that replaces a record with each save and forgets it on delete.
    private struct ModelServer: Equatable {
        var records: [RecordID: [String: FieldValue]] = [:]

        mutating func apply(_ change: RecordChange) {
            switch change.operation {
            case .save(let record): records[change.recordID] = record.fields
            case .delete: records[change.recordID] = nil
            }
        }
    }

    @Test(arguments: 0..<300)
    func coalescedQueueReachesTheSameServerStateAsTheRawSequence(seed: Int) {
        runAgainstModelServer(seed: seed, records: 6, changesPerMutation: 1...3, steps: 200)
    }

    /// The same with many records and large mutations: commands grow past the size at which the queue
    /// closes the gaps that acknowledged and re-kinded records leave in them, so that moves records'
    /// places while rounds are out. The bookkeeping is checked after every step.
    @Test func aQueueOfLargeCommandsReachesTheSameServerStateAsTheRawSequence() {
        var closedUp = 0
        for seed in 0..<40 {
            let queue = runAgainstModelServer(
                seed: seed &+ 5000, records: 120, changesPerMutation: 1...60, steps: 300)
            if queue.compactionCount > 0 { closedUp += 1 }
        }
        // 34 of the 40 runs close a command up at least once (the others never leave one mostly empty).
        #expect(closedUp >= 30, "\(closedUp) of 40 runs closed a command up")
    }

    @discardableResult
    private func runAgainstModelServer(
        seed: Int, records: Int, changesPerMutation: ClosedRange<Int>, steps: Int
    ) -> PendingCommands {
        var random = SeededRandomNumberGenerator(seed: UInt64(seed))
        let zones: [ZoneID] = [.readingList, .readingHistory]
        var local: [RecordID: [String: FieldValue]] = [:]
        var rawServer = ModelServer()
        var server = ModelServer()
        var queue = PendingCommands()
        var sequence: UInt64 = 0
        var sealedRound: [ZoneID: [Command]] = [:]

        for _ in 0..<steps {
            let zone = zones.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6:
                sequence += 1
                var changes: [RecordChange] = []
                var touched = Set<RecordID>()
                for _ in 0..<Int.random(in: changesPerMutation, using: &random) {
                    let id = F.id("r\(Int.random(in: 0..<records, using: &random))", in: zone)
                    guard touched.insert(id).inserted else { continue }
                    if Bool.random(using: &random), local[id] != nil {
                        local[id] = nil
                        changes.append(.delete(id))
                    } else {
                        let key = ["a", "b", "c"].randomElement(using: &random)!
                        local[id, default: [:]][key] = .int(Int64(sequence))
                        changes.append(.save(Record(id: id, type: "T", fields: local[id]!), changedKeys: [key]))
                    }
                }
                let mutation = Mutation(sequence: sequence, zone: zone, changes: changes)
                mutation.changes.forEach { rawServer.apply($0) }
                queue.enqueue(mutation)
            case 6:
                if sealedRound[zone] == nil { sealedRound[zone] = queue.seal(zone) }
            case 7, 8:
                // The server applies some of what the round sent (the sealed content, not whatever the
                // queue holds now); some acknowledgements get lost on the way back.
                for command in sealedRound[zone] ?? [] {
                    for change in command.orderedChanges
                    where queue.change(of: change.recordID, in: command.id) != nil && Bool.random(using: &random) {
                        server.apply(change)
                        if Int.random(in: 0..<4, using: &random) > 0 {
                            queue.acknowledge([change.recordID], in: command.id)
                        }
                    }
                }
            default:
                if sealedRound.removeValue(forKey: zone) != nil { queue.unseal(zone) }
            }
            #expect(queue.inconsistencies() == [], "seed \(seed)")
        }
        // Faults stop: finish every round and drain what is left.
        for zone in zones {
            queue.unseal(zone)
            for command in queue.seal(zone) {
                for change in command.orderedChanges {
                    server.apply(change)
                    queue.acknowledge([change.recordID], in: command.id)
                }
            }
            #expect(queue.commands(in: zone).isEmpty, "seed \(seed)")
        }
        #expect(queue.inconsistencies() == [], "seed \(seed)")
        #expect(server == rawServer, "seed \(seed)")
        #expect(rawServer.records == local, "seed \(seed)")
        return queue
    }

    /// A large batch (which takes the paths that reserve room and reuse the previous change's command)
    /// leaves the same queue as its changes enqueued one at a time.
    @Test(arguments: 0..<40)
    func aLargeBatchQueuesLikeItsChangesOneByOne(seed: Int) {
        var random = SeededRandomNumberGenerator(seed: UInt64(seed) &+ 7000)
        var batched = PendingCommands()
        var single = PendingCommands()
        for sequence in 1...6 {
            var changes: [RecordChange] = []
            for _ in 0..<Int.random(in: 17...60, using: &random) {
                let id = F.id("r\(Int.random(in: 0..<25, using: &random))")
                changes.append(
                    Int.random(in: 0..<3, using: &random) == 0
                        ? .delete(id) : F.save(id.name, ["n": .int(Int64.random(in: 0..<9, using: &random))])
                )
            }
            let mutation = Mutation(sequence: UInt64(sequence), zone: .readingList, changes: changes)
            batched.enqueue(mutation)
            for change in mutation.changes {
                single.enqueue(Mutation(sequence: UInt64(sequence), zone: .readingList, changes: [change]))
            }
            if sequence == 3 {
                // A round out while the next batches come in.
                #expect(batched.seal(.readingList) == single.seal(.readingList))
            }
            #expect(batched.allCommands == single.allCommands, "seed \(seed), batch \(sequence)")
        }
    }

    @Test(arguments: 0..<50)
    func noRecordAppearsTwiceInTheCommandsOfARound(seed: Int) {
        var random = SeededRandomNumberGenerator(seed: UInt64(seed) &+ 1000)
        var queue = PendingCommands()
        for sequence in 1...300 {
            let id = F.id("r\(Int.random(in: 0..<10, using: &random))")
            let change =
                Bool.random(using: &random) ? RecordChange.delete(id) : F.save(id.name, ["n": .int(Int64(sequence))])
            queue.enqueue(Mutation(sequence: UInt64(sequence), zone: .readingList, changes: [change]))
            if Int.random(in: 0..<20, using: &random) == 0 {
                let round = queue.seal(.readingList)
                let ids = round.flatMap { $0.changes.keys }
                #expect(ids.count == Set(ids).count, "seed \(seed)")
                queue.unseal(.readingList)
            }
        }
    }

    // MARK: - Slots

    /// A record whose change moves between a save command and a remove command leaves a gap in the command
    /// it left; the queue closes the gaps once most of a command's slots are empty, so a record changing
    /// kind back and forth does not grow its command without end.
    @Test func aRecordChangingKindBackAndForthDoesNotGrowItsCommand() {
        var queue = queue([(0..<40).map { F.save("r\($0)", ["n": .int(0)]) }])
        for round in 1...1_000 {
            let change = round.isMultiple(of: 2) ? F.save("r0", ["n": .int(Int64(round))]) : F.delete("r0")
            queue.enqueue(Mutation(sequence: UInt64(round + 1), zone: .readingList, changes: [change]))
        }
        #expect(queue.inconsistencies() == [])
        #expect(queue.recordCount() == 40)
        #expect(queue.latestChange(for: F.id("r0"))?.record?.fields == ["n": .int(1_000)])
        let slots = queue.allCommands.reduce(0) { $0 + $1.slots.count }
        #expect(slots <= 2 * 40 + 64, "\(slots) slots for 40 records")
    }

    /// Acknowledging most of a round closes the gaps of its commands, moving the places of the records
    /// still out; acknowledging and unsealing them afterwards still finds each of them.
    @Test func acknowledgingMostOfARoundKeepsTheRestInPlace() throws {
        var queue = queue([(0..<100).map { F.save("r\($0)", ["n": .int(0)]) }])
        let round = queue.seal(.readingList)
        let command = try #require(round.first)
        queue.acknowledge((0..<80).map { F.id("r\($0)") }, in: command.id)
        #expect(queue.inconsistencies() == [])
        // Closed up whenever it was half empty: 100 slots, then 49, then 24, for the 20 records left.
        #expect(try #require(queue.command(command.id)).slots.count == 24)
        // Changed again while out: the newer change is kept when the round ends.
        queue.enqueue(Mutation(sequence: 2, zone: .readingList, changes: [F.save("r90", ["n": .int(2)])]))
        queue.acknowledge([F.id("r85")], in: command.id)
        queue.unseal(.readingList)
        #expect(queue.inconsistencies() == [])
        #expect(queue.recordCount() == 19)
        #expect(queue.latestChange(for: F.id("r90"))?.record?.fields == ["n": .int(2)])
        #expect(queue.latestChange(for: F.id("r85")) == nil)
        #expect(queue.latestChange(for: F.id("r99"))?.record?.fields == ["n": .int(0)])
        for command in queue.seal(.readingList) {
            queue.acknowledge(command.orderedChanges.map(\.recordID), in: command.id)
        }
        #expect(queue.isEmpty && queue.inconsistencies() == [])
    }

    // MARK: - Deletes a cascade made

    /// A cascade's deletes are found by their owner, and the owner counts as being deleted while its delete,
    /// or a save that stands for it, is pending, waiting or being sent.
    @Test func aCascadesDeletesAreFoundByTheirOwnerWhileItsDeleteIsPending() throws {
        var queue = queue([
            [F.delete("p"), .cascadedDelete(F.id("c"), owner: "p"), .cascadedDelete(F.id("d"), owner: "x")]
        ])
        #expect(queue.cascadedDeletes(of: F.id("p")).map(\.recordID) == [F.id("c")])
        #expect(queue.hasPendingDeleteOrReplace(of: F.id("p")))
        _ = queue.seal(.readingList)
        queue.enqueue(Mutation(sequence: 2, zone: .readingList, changes: [F.save("p", [:])]))
        #expect(queue.hasPendingDeleteOrReplace(of: F.id("p")), "the delete is out, and may yet go through")
        queue.unseal(.readingList)
        #expect(queue.latestChange(for: F.id("p"))?.replacesRecord == true)
        #expect(queue.hasPendingDeleteOrReplace(of: F.id("p")), "the save that replaces the record stands for it")
        #expect(queue.cascadedDeletes(of: F.id("p")).map(\.recordID) == [F.id("c")])
        queue.enqueue(Mutation(sequence: 3, zone: .readingList, changes: [F.delete("c")]))
        #expect(queue.cascadedDeletes(of: F.id("p")).isEmpty, "the user's own delete of c took its place")
        #expect(queue.latestChange(for: F.id("c"))?.cascadeOwner == nil)
        #expect(queue.inconsistencies() == [])
    }

    /// A compacted log restores the cascade's deletes with their owners.
    @Test func aRestoredCascadeIsFoundByItsOwner() throws {
        var queue = PendingCommands()
        queue.restore(
            Command(
                id: CommandID(1), zone: .readingList, kind: .removeRecords,
                slots: [F.delete("p").withSequence(1), .cascadedDelete(F.id("c"), owner: "p", sequence: 1)]))
        #expect(queue.cascadedDeletes(of: F.id("p")).map(\.cascadeOwner) == ["p"])
        for command in queue.seal(.readingList) { queue.acknowledge([F.id("p"), F.id("c")], in: command.id) }
        #expect(queue.cascadedDeletes(of: F.id("p")).isEmpty && queue.isEmpty)
    }

    /// A compacted log written by this code never holds a record twice in a command; a damaged one might.
    /// The command is restored with the record's later change, as reading it into a dictionary did.
    @Test func aRestoredCommandHoldingARecordTwiceKeepsItsLaterChange() throws {
        var queue = PendingCommands()
        let first = F.save("a", ["n": .int(1)])
        let later = F.save("a", ["n": .int(2)])
        queue.restore(
            Command(
                id: CommandID(7), zone: .readingList, kind: .modifyRecords, slots: [first, F.save("b", [:]), later]))
        #expect(queue.inconsistencies() == [])
        #expect(queue.recordCount() == 2)
        #expect(queue.latestChange(for: F.id("a")) == later)
        #expect(try #require(queue.command(CommandID(7))).changes == [F.id("a"): later, F.id("b"): F.save("b", [:])])
        #expect(queue.nextCommandID == 8)
    }

    /// A damaged log may also name a record in two commands: the command restored later keeps it (as a
    /// change enqueued later would), the earlier one lets it go, and each change stays where the index says.
    @Test func aRecordRestoredInTwoCommandsIsKeptByTheLaterOne() throws {
        var queue = PendingCommands()
        let first = F.save("a", ["n": .int(1)])
        let later = F.save("a", ["n": .int(2)])
        queue.restore(
            Command(id: CommandID(3), zone: .readingList, kind: .modifyRecords, slots: [first, F.save("b", [:])]))
        queue.restore(Command(id: CommandID(5), zone: .readingList, kind: .modifyRecords, slots: [later]))
        queue.restore(Command(id: CommandID(6), zone: .readingList, kind: .modifyRecords, slots: [F.save("b", [:])]))
        #expect(queue.inconsistencies() == [])
        #expect(queue.command(CommandID(3)) == nil, "both its records were named again later")
        #expect(queue.latestChange(for: F.id("a")) == later)
        #expect(queue.recordCount() == 2 && queue.commandCount == 2)
        for command in queue.seal(.readingList) {
            queue.acknowledge(command.orderedChanges.map(\.recordID), in: command.id)
        }
        #expect(queue.isEmpty, "every restored change can be acknowledged")
        queue.restore(Command(id: CommandID(9), zone: .readingList, kind: .modifyRecords, slots: [nil]))
        #expect(queue.isEmpty && queue.nextCommandID == 10, "an empty command is not kept")
    }
}

extension PendingCommands {
    /// A copy with each of `mutations` enqueued, numbered from `sequence`.
    fileprivate func enqueuing(_ mutations: [[RecordChange]], zone: ZoneID = .readingList, sequence: UInt64 = 1)
        -> PendingCommands
    {
        var queue = self
        for (index, changes) in mutations.enumerated() {
            queue.enqueue(Mutation(sequence: sequence + UInt64(index), zone: zone, changes: changes))
        }
        return queue
    }

    /// A copy with `changes` enqueued as one mutation numbered `sequence`.
    fileprivate func enqueuing(_ changes: [RecordChange], sequence: UInt64) -> PendingCommands {
        enqueuing([changes], sequence: sequence)
    }
}

import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// The common ancestor a host's merge gets (`SyncableRecord.merge(_:_:ancestor:changedFields:)`) where it is
/// easy to get wrong: a lost response, a discard, an edit sent in another change's request, a kill after a
/// merge, a record made again. Found by a review of the first version, each with its own case.
@Suite struct MergeAncestorTests {
    private let configure: (inout SyncContext.Configuration) -> Void = { $0.recordTypes = [Tally.self] }

    /// A save committed by the server whose response was lost is resent and meets itself: the server's
    /// version, this device's own write, is the ancestor, so the increment is not counted twice.
    @Test func aLostResponseIsNotCountedTwice() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false, configure: configure)
            try await a.records(Tally.self).save(Tally(id: "t", count: 5))
            #expect(try await a.syncNow().isComplete)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2
            await harness.cloud.setFaultPlan(
                FaultPlan.loseResponses(1).then(.failNext(1, .fetchDatabaseChanges, with: .networkUnavailable)))
            #expect(try await !a.syncNow().isComplete)
            do { let v = await harness.serverTally(); #expect(v == .int(7), "server has \(String(describing: v))") }
            #expect(try await a.syncNow().isComplete)
            do {
                let v = await a.records(Tally.self).value("t")?.count; #expect(v == 7, "A has \(String(describing: v))")
            }
            do { let v = await harness.serverTally(); #expect(v == .int(7), "server has \(String(describing: v))") }
            try await a.close()
        }
    }

    /// A save whose answer was lost may be on the server under another device's newer version, or not: the
    /// merge is told it does not know the ancestor, rather than given the version before the save (over
    /// which the other device's version, holding A's increment, counted it twice: 10), also after A is killed
    /// in between (the snapshot keeps what the failure taught).
    @Test(arguments: [false, true])
    func aSaveWhoseAnswerWasLostUnderAnotherDevicesWriteHasNoKnownAncestor(killed: Bool) async throws {
        try await SyncHarness.run { harness in
            var a = try await harness.device("A", start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2, reaches the server unanswered
            await harness.cloud.setFaultPlan(
                FaultPlan.loseResponses(1).then(.failNext(1, .fetchDatabaseChanges, with: .networkUnavailable)))
            #expect(try await !a.syncNow().isComplete)
            if killed {
                await a.abandon()
                a = try await harness.device("A", start: false, configure: configure)
            }
            try await incrementOnB(then: a, b, settleAt: 8, harness: harness, "the larger, for no ancestor")
        }
    }

    /// A save answered by a gateway's 502 or 504 (`serviceUnavailable`), a 500 or an unreadable answer after
    /// the server applied it is as doubtful as one whose answer was lost: under another device's version that
    /// holds it, the merge is told the ancestor is unknown (the larger count, 8; with the version before the
    /// save, 10); a request the server refused before acting (a throttle) keeps its ancestor, so both
    /// increments count (8; with none, 7).
    @Test(arguments: [
        FaultPlan.failAfterApplying(with: .serviceUnavailable), .failAfterApplying(with: .internalError),
        .failAfterApplying(with: .unexpectedServerResponse), .failNext(1, .modifyRecords, with: .requestRateLimited),
    ])
    func aSaveAnsweredByAnErrorAfterTheServerAppliedItHasNoKnownAncestor(fault: FaultPlan) async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2
            await harness.cloud.setFaultPlan(
                fault.then(.failNext(1, .fetchDatabaseChanges, with: .networkUnavailable)))
            #expect(try await !a.syncNow().isComplete)
            try await incrementOnB(then: a, b, settleAt: 8, "\(fault)")
        }
    }

    /// A refused change discarded leaves no merge base behind, nor does an acknowledgement: a later merge
    /// starts from the version the later change was made over, not from one long gone.
    @Test func aDiscardedChangeLeavesNoAncestorBehind() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            var schema = CloudSchema.flatSync(adding: [Tally.self])
            schema.recordTypes[Tally.recordType] = nil
            await harness.cloud.setProductionSchema(schema)
            try await a.records(Tally.self).save(Tally(id: "t", count: 6))
            #expect(try await a.syncNow().refused.map(\.recordID.name) == ["t"])
            await harness.cloud.setProductionSchema(nil)
            #expect(try await a.discardRefusedChanges().map(\.name) == ["t"])
            #expect(await a.localStore.zones.mergeBase(of: Tally.recordID("t")) == nil, "nothing is pending")

            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2
            #expect(try await a.syncNow().isComplete)
            #expect(await a.localStore.zones.mergeBase(of: Tally.recordID("t")) == nil, "acknowledged")
            try await a.records(Tally.self).save(Tally(id: "t", count: 8))  // +1
            #expect(try await b.syncNow().isComplete)
            try await b.records(Tally.self).save(Tally(id: "t", count: 10))  // +3
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            do {
                let v = await a.records(Tally.self).value("t")?.count;
                #expect(v == 11, "A has \(String(describing: v))")
            }
            try await a.close()
            try await b.close()
        }
    }

    /// An edit made while a round is on the wire goes out in a later batch of that round (the request reads
    /// the record as it is now) and stays pending: its ancestor is then the version that batch saved, so the
    /// conflict of its own resend does not count it twice.
    @Test func anEditSentInAnEarlierChangesRequestIsNotCountedTwice() async throws {
        try await SyncHarness.run { harness in
            let configure = configure
            let devices = Mutex<[String: SyncContext]>([:])
            let transport = InterceptingTransport(harness.cloud) { kind, number in
                guard kind == .modifyRecords, let a = devices.withLock({ $0["A"] }),
                    let b = devices.withLock({ $0["B"] })
                else { return }
                if number == 3 {
                    // While the batch of "u" is on the wire, A edits "t", whose change is in the next batch.
                    _ = try? await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +1
                }
                if number == 5 {
                    // B takes the version A's round left (7) and adds 3 before A's next round lands.
                    _ = try? await b.syncNow()
                    _ = try? await b.records(Tally.self).save(Tally(id: "t", count: 10))  // +3
                    _ = try? await b.syncNow()
                }
            }
            let a = try await harness.device("A", transport: transport, start: false) {
                configure(&$0)
                $0.batchSize = 1
            }
            let b = try await harness.device("B", start: false, configure: configure)
            try await a.records(Tally.self).save(Tally(id: "u", count: 0))
            try await a.records(Tally.self).save(Tally(id: "t", count: 5))
            #expect(try await a.syncNow().isComplete)
            #expect(transport.count(.modifyRecords) == 2)
            #expect(try await b.syncNow().isComplete)
            devices.withLock { $0 = ["A": a, "B": b] }
            try await a.records(Tally.self).save(Tally(id: "u", count: 1))
            try await a.records(Tally.self).save(Tally(id: "t", count: 6))  // +1
            #expect(try await a.syncNow().isComplete)
            devices.withLock { $0 = [:] }
            #expect(await b.records(Tally.self).value("t")?.count == 10)
            do {
                let v = await a.records(Tally.self).value("t")?.count;
                #expect(v == 10, "A has \(String(describing: v))")
            }
            do { let v = await harness.serverTally(); #expect(v == .int(10), "server has \(String(describing: v))") }
            try await a.close()
            try await b.close()
        }
    }

    /// A merge done by a push conflict lives in memory until a snapshot, and a later edit carries the merged
    /// record in the log: killed before a snapshot or not, the next push merges over the same ancestor, and
    /// the other device's increment is counted once.
    @Test(arguments: [false, true])
    func aKillAfterAPushMergeGivesTheSameAncestor(killed: Bool) async throws {
        try await SyncHarness.run { harness in
            let failing = InterceptingTransport(harness.cloud) { kind, number in
                // The resend of the merge fails, and so does the fetch after it: nothing writes the snapshot.
                if kind == .modifyRecords, number == 3 {
                    await harness.cloud.setFaultPlan(
                        FaultPlan.failNext(1, .modifyRecords, with: .networkUnavailable).then(
                            .failNext(3, .fetchDatabaseChanges, with: .networkUnavailable)))
                }
            }
            var a = try await harness.device("A", transport: failing, start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2
            try await b.records(Tally.self).save(Tally(id: "t", count: 6))  // +1
            #expect(try await b.syncNow().isComplete)
            #expect(try await !a.syncNow().isComplete)
            do {
                let v = await a.records(Tally.self).value("t")?.count; #expect(v == 8, "A has \(String(describing: v))")
            }
            do { let v = await harness.serverTally(); #expect(v == .int(6), "server has \(String(describing: v))") }
            try await a.records(Tally.self).save(Tally(id: "t", count: 9))  // +1
            await harness.cloud.setFaultPlan(.none)
            if killed {
                await a.abandon()
                a = try await harness.device("A", start: false, configure: configure)
            }
            do {
                let v = await a.records(Tally.self).value("t")?.count; #expect(v == 9, "A has \(String(describing: v))")
            }
            #expect(try await a.syncNow().isComplete)
            do { let v = await harness.serverTally(); #expect(v == .int(9), "server has \(String(describing: v))") }
            try await a.close()
            try await b.close()
        }
    }

    /// A record this device deleted and made again has no ancestor, also after an earlier fetch merge.
    @Test func aRecordDeletedAndMadeAgainAfterAMergeHasNoAncestor() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))
            try await b.records(Tally.self).save(Tally(id: "t", count: 6))
            #expect(try await b.syncNow().isComplete)
            await a.handleRemoteNotification(zones: [Tally.zone])
            await a.waitUntilIdle()
            do {
                let v = await a.records(Tally.self).value("t")?.count; #expect(v == 8, "A has \(String(describing: v))")
            }
            try await a.records(Tally.self).delete("t")
            try await a.records(Tally.self).save(Tally(id: "t", count: 1))  // made again
            try await b.records(Tally.self).save(Tally(id: "t", count: 9))
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            // nil ancestor: max(1, 9) = 9; with the stale merge base (6): 9 + 1 - 6 = 4.
            do {
                let v = await a.records(Tally.self).value("t")?.count; #expect(v == 9, "A has \(String(describing: v))")
            }
            try await a.close()
            try await b.close()
        }
    }
}

/// Saves tally "t" at 5 on `a` and syncs `a`, then `b`: both hold it, and the server has it, the version
/// each ancestor case starts from.
func startTally(on a: SyncContext, _ b: SyncContext) async throws {
    try await a.records(Tally.self).save(Tally(id: "t", count: 5))
    #expect(try await a.syncNow().isComplete)
    #expect(try await b.syncNow().isComplete)
}

/// B adds 1 to tally "t" (5 → 6 on B) and sends it, merged over whatever A's save left on the server (which
/// then holds 8 when `harness` is given); then A and B sync, each must hold `expected`, and both are closed.
func incrementOnB(
    then a: SyncContext, _ b: SyncContext, settleAt expected: Int64, harness: SyncHarness? = nil,
    _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation
) async throws {
    try await b.records(Tally.self).save(Tally(id: "t", count: 6))  // +1
    #expect(try await b.syncNow().isComplete, sourceLocation: sourceLocation)
    if let harness { #expect(await harness.serverTally() == .int(8), sourceLocation: sourceLocation) }
    #expect(try await a.syncNow().isComplete, sourceLocation: sourceLocation)
    #expect(try await b.syncNow().isComplete, sourceLocation: sourceLocation)
    for device in [a, b] {
        let count = await device.records(Tally.self).value("t")?.count
        #expect(count == expected, "\(comment): \(String(describing: count))", sourceLocation: sourceLocation)
        try await device.close()
    }
}

extension SyncHarness {
    /// The server's count of tally "t".
    func serverTally() async -> FieldValue? {
        await cloud.records(in: Tally.zone).first { $0.id.name == "t" }?["count"]
    }
}

/// A tally whose merge adds up both sides' increments since their common ancestor (the larger count when
/// there is none); its changes wait an hour, so that a test decides when they go.
struct Tally: SyncableRecord, Codable {
    static let zone = ZoneID("Tallies")
    static let recordType = "Tally"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["count": .int64]
    static let sendDebounce = Duration.seconds(3_600)
    var id: String
    var count: Int64
    static func merge(_ mine: Tally, _ server: Tally, ancestor: Tally?, changedFields: Set<String>) -> Tally {
        guard let ancestor else { return Tally(id: mine.id, count: max(mine.count, server.count)) }
        return Tally(id: mine.id, count: server.count + mine.count - ancestor.count)
    }
}

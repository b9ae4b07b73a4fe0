import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// A change the server refuses for good is parked on the device, never dropped: still applied and pending,
/// reported, sent again only when asked, and dropped only by an explicit discard.
///
/// The refusal is the one production CloudKit gives a field its deployed schema lacks (`BAD_REQUEST`,
/// "Cannot create or modify field … in production schema"), made by a production schema without
/// `likingChangedAt` (a field history records carry only once liked or disliked); every test runs against the in-memory cloud directly and through CloudKit Web Services.
@Suite struct SyncRefusalTests {
    static let routes: [SyncHarness.Route] = [.direct, .http]

    /// The server answering a request's first record "later": an internal error with a 10-second
    /// `retryAfter`, which would park the change but for its wait.
    static let answerLater = FaultEffect.recordError(.internalError, retryAfter: .seconds(10))

    /// ``answerLater`` to the next `count` modify requests.
    static func answeringLater(_ count: Int) -> FaultPlan {
        FaultPlan(scripted: [ScriptedFault(kind: .modifyRecords, count: count, effect: answerLater)])
    }

    /// FlatSync's schema without the history's `likingChangedAt`: a like is refused, a visit is not.
    static let schemaWithoutLiking: CloudSchema = {
        var schema = CloudSchema.flatSync
        schema.recordTypes[ReadingHistoryItem.recordType]!["likingChangedAt"] = nil
        return schema
    }()

    private let liked = ReadingHistoryItem.recordID(for: "liked")

    private func serverItem(_ cloud: InMemoryCloud, _ id: String) async throws -> ReadingHistoryItem? {
        try await DeviceView(server: cloud).history[id]
    }

    @Test(arguments: Self.routes)
    func aRefusedChangeIsParkedStillAppliedAndPending(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            let events = a.events()
            try await a.history.setLiking("liked", .liked)
            try await a.readingList.add("saved")
            let summary = try await a.syncNow()

            let refusal = try #require(summary.refused.first)
            #expect(summary.refused.count == 1)
            #expect(refusal.recordID == liked && !refusal.isDelete)
            #expect(refusal.code == .invalidArguments && refusal.serverErrorCode == "BAD_REQUEST")
            #expect(refusal.reason.contains("Cannot create or modify field 'likingChangedAt'"), "\(refusal.reason)")
            #expect(!summary.isComplete)
            #expect(await a.localStore.refusedChanges() == [refusal])
            #expect(await a.history.item("liked")?.liking == .liked, "still applied locally")
            #expect(await a.localStore.pendingRecordCount() == 1, "still pending")
            #expect(await a.status().refusedRecords == 1)
            #expect(try await serverItem(harness.cloud, "liked") == nil)
            #expect(
                await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-saved"], "the rest got through")
            try await a.close()
            #expect(await collect(events).contains(.changeRefused(refusal)))
        }
    }

    /// An article ID makes a record name CloudKit does not take (CloudKit documents only printable ASCII,
    /// at most 255 characters) when it holds other characters or is longer than 252 bytes: its change is
    /// parked, naming the rule, and never sent (the transport refuses it; the emulators refuse it as CloudKit
    /// would), while the rest of the request goes through. Removing the entry then is done at once: no
    /// record of that name can be on the server.
    @Test(arguments: Self.routes)
    func aRecordNameCloudKitDoesNotTakeIsParkedAndItsRemovalIsDone(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            let accented = "café-1"
            let long = String(repeating: "x", count: ArticleID.maximumUTF8Length)
            for id in [accented, long, "plain"] { try await a.readingList.add(id) }
            let summary = try await a.syncNow()
            #expect(Set(summary.refused.map(\.recordID.name)) == ["rl-\(accented)", "rl-\(long)"])
            for refusal in summary.refused {
                #expect(refusal.code == .invalidArguments)
                #expect(refusal.reason.contains("CloudKit"), "\(refusal.reason)")
            }
            #expect(await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-plain"])
            #expect(await a.readingList.count() == 3, "kept on the device")

            #expect(try await a.readingList.remove(accented))
            let removed = try await a.syncNow()
            #expect(removed.refused.map(\.recordID.name) == ["rl-\(long)"], "the removal was not refused")
            #expect(await a.localStore.refusedChanges().map(\.recordID.name) == ["rl-\(long)"])
            #expect(await a.localStore.pendingRecordCount() == 1)

            // Discarding it asks the server for its version without asking for the name it does not take.
            _ = try await a.discardRefusedChanges()
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(await a.readingList.entries().map(\.articleID) == ["plain"], "the server has none of it")
            try await a.close()
        }
    }

    @Test(arguments: Self.routes)
    func aParkedChangeIsNotSentAgainUntilSomeoneAsks(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            let before = await harness.cloud.counters()

            // Time passes and other history changes are sent: the parked one stays out of every request.
            try await a.history.visit("visited")
            harness.clock.advance(by: .seconds(3_600))
            await a.waitUntilIdle()
            let after = await harness.cloud.counters()
            #expect(after.modifyRequests == before.modifyRequests + 1)
            #expect(after.recordsSaved == before.recordsSaved + 1, "only the visit")
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [liked])
            #expect(await a.status().retrying.isEmpty, "no retry loop is scheduled")
            try await a.close()
        }
    }

    @Test(arguments: Self.routes)
    func syncNowSendsItOnceEachTimeAndItGoesThroughOnceTheSchemaIsFixed(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            let before = await harness.cloud.counters().modifyRequests

            let again = try await a.syncNow()
            #expect(await harness.cloud.counters().modifyRequests == before + 1, "one try, not a loop")
            #expect(again.refused.map(\.recordID) == [liked])
            #expect(await a.localStore.pendingRecordCount() == 1)

            await harness.cloud.setProductionSchema(.flatSync)
            let fixed = try await a.syncNow()
            #expect(fixed.isComplete && fixed.refused.isEmpty)
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(try await serverItem(harness.cloud, "liked")?.liking == .liked)
            try await a.close()
        }
    }

    @Test(arguments: Self.routes, [false, true])
    func aParkedChangeSurvivesARestartOrAKillAndStartSendsIt(route: SyncHarness.Route, killed: Bool) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            let refusal = try #require(try await a.syncNow().refused.first)
            if killed { await a.abandon() } else { try await a.close() }

            let reopened = try await harness.device("A", start: false)
            #expect(await reopened.localStore.refusedChanges() == [refusal], "the refusal and its reason are kept")
            #expect(await reopened.localStore.pendingRecordCount() == 1)
            #expect(await reopened.history.item("liked")?.liking == .liked)
            await harness.cloud.setProductionSchema(nil)
            try await reopened.start()
            await reopened.waitUntilIdle()
            #expect(await reopened.localStore.pendingRecordCount() == 0)
            #expect(await reopened.localStore.refusedChanges().isEmpty)
            #expect(try await serverItem(harness.cloud, "liked")?.liking == .liked)
            try await reopened.close()
        }
    }

    @Test(arguments: Self.routes)
    func anExpiredTokenResetKeepsAParkedChange(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            await harness.cloud.expireAllChangeTokens()
            let summary = try await a.syncNow()
            #expect(summary.resets.contains(SyncSummary.ZoneReset(zone: .readingHistory, reason: .tokenExpired)))
            #expect(await a.history.item("liked")?.liking == .liked, "the reset keeps the refused local change")
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [liked])
            try await a.close()
        }
    }

    @Test(arguments: Self.routes)
    func discardingPutsTheServersVersionBackAndForgetsTheChange(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.history.visit("liked", version: 3)
            _ = try await a.syncNow()
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            try await a.history.setLiking("new", .liked)  // never on the server
            let refused = try await a.syncNow().refused.map(\.recordID).sorted()
            #expect(refused == [liked, ReadingHistoryItem.recordID(for: "new")])

            let dropped = try await a.discardRefusedChanges([liked, ReadingListEntry.recordID(for: "unrelated")])
            #expect(dropped == [liked], "only refused changes are dropped")
            #expect(await a.history.item("liked")?.liking == ReadingHistoryItem.Liking.none, "the server's version")
            #expect(await a.history.item("liked")?.maxVersionSeen == 3)
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [ReadingHistoryItem.recordID(for: "new")])
            #expect(try await a.discardRefusedChanges() == [ReadingHistoryItem.recordID(for: "new")])
            #expect(await a.history.item("new") == nil, "the server has none, so the record goes")
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.close()

            let reopened = try await harness.device("A", start: false)
            #expect(await reopened.localStore.pendingRecordCount() == 0)
            #expect(await reopened.localStore.refusedChanges().isEmpty)
            #expect(await reopened.history.item("liked")?.liking == ReadingHistoryItem.Liking.none)
            #expect(await reopened.history.item("new") == nil)
            try await reopened.close()
        }
    }

    @Test func discardingChangesNothingWhenTheServerCannotBeAsked() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            await harness.cloud.setFaultPlan(.failNext(1, .lookupRecords, with: .networkUnavailable))
            await #expect(throws: CloudError.self) { try await a.discardRefusedChanges() }
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [liked])
            #expect(await a.history.item("liked")?.liking == .liked)
            #expect(await a.localStore.pendingRecordCount() == 1)
            try await a.close()
        }
    }

    @Test(arguments: Self.routes)
    func aRequestRefusedAsAWholeIsHalvedAndNothingGoodIsParked(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .invalidArguments))
            try await a.readingList.apply((0..<4).map { .add(articleID: "a\($0)") })
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == 3, "refused whole, then two halves")
            #expect(await harness.cloud.records(in: .readingList).count == 4)
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.close()
        }
    }

    @Test func aZoneTheUserDeletedTakesItsParkedChangesWithIt() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            try await harness.cloud.deleteZoneAsUser(.readingHistory)
            _ = try await a.syncNow()
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.close()
        }
    }

    @Test func aDamagedRefusalFileIsQuarantinedAndItsChangesAreSentAgain() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            try await a.close()
            let file = harness.directory.appendingPathComponent("A").appendingPathComponent(
                RefusedChangesFile.fileName)
            var bytes = try Data(contentsOf: file)
            bytes[bytes.count / 2] ^= 0xFF
            try bytes.write(to: file)

            let reopened = try await harness.device("A", start: false)
            let events = reopened.events()
            #expect(await reopened.localStore.refusedChanges().isEmpty)
            #expect(await reopened.localStore.pendingRecordCount() == 1, "the change itself is in the log")
            await harness.cloud.setProductionSchema(nil)
            try await reopened.start()
            await reopened.waitUntilIdle()
            #expect(try await serverItem(harness.cloud, "liked")?.liking == .liked)
            try await reopened.close()
            let quarantined = await collect(events).contains { event in
                if case .fileQuarantined(let original, _, _) = event { return original == file.path }
                return false
            }
            #expect(quarantined)
        }
    }

    /// A refusal holds back the change it refused, not the record: the user's next change of it goes out as
    /// any change does, without waiting for someone to ask.
    @Test(arguments: Self.routes)
    func aNewerChangeOfAParkedRecordGoesOutAtOnce(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [liked])
            await harness.cloud.setProductionSchema(nil)
            try await a.history.visit("liked", version: 2)
            harness.clock.advance(by: .seconds(5))  // the history debounce, no syncNow
            await a.waitUntilIdle()
            let server = try #require(try await serverItem(harness.cloud, "liked"))
            #expect(server.liking == .liked && server.maxVersionSeen == 2)
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.close()
        }
    }

    @Test func discardingLeavesARecordChangedAgainSinceItsRefusalPending() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false)
            await harness.cloud.setProductionSchema(Self.schemaWithoutLiking)
            try await a.history.setLiking("liked", .liked)
            _ = try await a.syncNow()
            try await a.history.visit("liked", version: 2)  // not sent: the device is not started
            let dropped = try await a.discardRefusedChanges()
            #expect(dropped.isEmpty, "the newer change is the user's latest word")
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(await a.localStore.pendingRecordCount() == 1)
            #expect(await a.history.item("liked")?.maxVersionSeen == 2)
            try await a.close()
        }
    }

    /// Apple documents a record's `retryAfter` as "the suggested time to wait before trying this operation
    /// again": an error that would park the change waits that long and sends it again instead. The record's
    /// error comes inside a success, the other record of the request saved (a 200 over CKWS).
    @Test(arguments: Self.routes, [CloudError.Code.internalError, .invalidArguments])
    func aRefusalWithRetryAfterIsSentAgainOnceItIsOverNotParked(route: SyncHarness.Route, code: CloudError.Code)
        async throws
    {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A", start: false)
            try await a.readingList.add("one")
            try await a.readingList.add("two")
            try await a.start()
            await a.waitUntilIdle()
            let fault = FaultEffect.recordError(code, retryAfter: .seconds(20))
            await harness.cloud.setFaultPlan(
                FaultPlan(scripted: [ScriptedFault(kind: .modifyRecords, count: 1, effect: fault)]))
            try await a.readingList.apply([.add(articleID: "later"), .add(articleID: "now")])
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == 1)
            #expect(await harness.cloud.records(in: .readingList).count == 3, "the other record was saved")
            #expect(await a.localStore.refusedChanges().isEmpty, "not parked")
            #expect(await a.localStore.pendingRecordCount() == 1)
            #expect(await a.status().retrying == [.readingList])
            let requests = await harness.cloud.counters().modifyRequests
            harness.clock.advance(by: .seconds(20) - .milliseconds(1))
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == requests, "not before the server's time")
            harness.clock.advance(by: .milliseconds(1))
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == requests + 1)
            #expect(await harness.cloud.records(in: .readingList).count == 4)
            #expect(await a.localStore.pendingRecordCount() == 0)
            #expect(await a.status().retrying.isEmpty)
            try await a.close()
        }
    }

    /// A server that answers one record "later" every time cannot hold its zone back for good: after five
    /// pushes in a row that waited, the next parks the change, as if no `retryAfter` had come, and the
    /// zone's other changes go on. Asked to retry, it goes through once the server takes it.
    @Test(arguments: Self.routes)
    func aRefusalThatKeepsSayingLaterIsParkedAfterFiveWaits(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.readingList.add("first")
            await a.waitUntilIdle()
            let limit = SyncContext.refusalWaitLimit
            let fault = Self.answerLater
            await harness.cloud.setFaultPlan(Self.answeringLater(limit + 1))
            try await a.readingList.add("stuck")
            await a.waitUntilIdle()
            for wait in 1..<limit {
                harness.clock.advance(by: .seconds(10))
                await a.waitUntilIdle()
                #expect(await a.localStore.refusedChanges().isEmpty, "still waiting after \(wait + 1) answers")
            }
            #expect(await a.status().retrying == [.readingList])
            harness.clock.advance(by: .seconds(10))
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == limit + 1)
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [ReadingListEntry.recordID(for: "stuck")])
            #expect(await a.status().retrying.isEmpty, "parked: nothing holds the zone")
            try await a.readingList.add("after")
            await a.waitUntilIdle()
            #expect(Set(await harness.cloud.records(in: .readingList).map(\.id.name)) == ["rl-first", "rl-after"])
            #expect(try await a.syncNow().isComplete, "asked to retry, the server takes it")
            #expect(await harness.cloud.records(in: .readingList).count == 3)
            try await a.close()
        }
    }
    /// A server answer the engine cannot act on says whose it is, with its code: the server's here, where a
    /// failure of the device's storage says `deviceError` (PushIOFailureTests).
    @Test(arguments: Self.routes)
    func aServerErrorInTheSummaryCarriesItsCode(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A", start: false)
            await harness.cloud.setFaultPlan(.failNext(1, .fetchZoneChanges, with: .invalidArguments))
            let summary = try await a.syncNow()
            #expect(summary.problems.map(\.kind) == [.serverError(.invalidArguments)], "\(summary.problems)")
            #expect(summary.problems.first?.zone == nil, "a fetch's problem")
            #expect(try await a.syncNow().isComplete)
            try await a.close()
        }
    }

    /// A request refused as a whole with `retryAfter` waits too, up to five pushes of its zone in a row; the
    /// next halves it as if no `retryAfter` had come, down to the one record, which is parked.
    @Test(arguments: Self.routes)
    func aRequestRefusedAsAWholeThatKeepsSayingLaterIsParkedAfterFiveWaits(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            let limit = SyncContext.refusalWaitLimit
            await harness.cloud.setFaultPlan(
                .failNext(limit + 1, .modifyRecords, with: .invalidArguments, retryAfter: .seconds(10)))
            try await a.readingList.add("stuck")
            await a.waitUntilIdle()
            for wait in 1..<limit {
                #expect(await a.localStore.refusedChanges().isEmpty, "still waiting after \(wait) answers")
                harness.clock.advance(by: .seconds(10))
                await a.waitUntilIdle()
            }
            #expect(await a.localStore.refusedChanges().isEmpty)
            #expect(await a.status().retrying == [.readingList])
            harness.clock.advance(by: .seconds(10))
            await a.waitUntilIdle()
            #expect(
                await harness.cloud.counters().faultsInjected[FaultEffect.error(.invalidArguments).counterKey] == limit
                    + 1)
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [ReadingListEntry.recordID(for: "stuck")])
            #expect(try await a.syncNow().isComplete, "asked to retry, the server takes it")
            try await a.close()
        }
    }

    /// The counts go with the account: a change of account wipes the records they were about, and a record of
    /// the same name in the next account has its five waits again. Kept, the old count parked it at once.
    @Test func waitsAreForgottenWithTheAccount() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            let a = try await harness.device("A")
            let limit = SyncContext.refusalWaitLimit
            let fault = Self.answerLater
            let script = Self.answeringLater(limit - 1)
            await harness.cloud.setFaultPlan(script)
            try await a.readingList.add("stuck")
            await a.waitUntilIdle()
            for _ in 1..<(limit - 1) {
                harness.clock.advance(by: .seconds(10))
                await a.waitUntilIdle()
            }
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == limit - 1)
            try await a.accountDidChange(to: CloudAccount(id: "other", transport: harness.transport("A")))
            await a.waitUntilIdle()
            await harness.cloud.setFaultPlan(script)
            try await a.readingList.add("stuck")
            await a.waitUntilIdle()
            for _ in 1..<limit {
                #expect(await a.localStore.refusedChanges().isEmpty)
                harness.clock.advance(by: .seconds(10))
                await a.waitUntilIdle()
            }
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == 2 * (limit - 1))
            #expect(await a.localStore.refusedChanges().isEmpty, "waited four times in this account, not parked")
            #expect(await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-stuck"])
            try await a.close()
        }
    }

    /// The waits are kept in `device.plist`: an app used in short sessions, restarted between the server's
    /// answers, still parks the change after five, where counting in memory would wait for good.
    @Test func waitsAreCountedAcrossRestarts() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            var a = try await harness.device("A")
            let limit = SyncContext.refusalWaitLimit
            let fault = Self.answerLater
            await harness.cloud.setFaultPlan(Self.answeringLater(limit + 1))
            try await a.readingList.add("stuck")
            await a.waitUntilIdle()
            harness.clock.advance(by: .seconds(10))
            await a.waitUntilIdle()
            try await a.close()
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == 2)

            a = try await harness.device("A")  // starts, and sends: the third answer
            await a.waitUntilIdle()
            for _ in 3..<limit {
                harness.clock.advance(by: .seconds(10))
                await a.waitUntilIdle()
            }
            #expect(await a.localStore.refusedChanges().isEmpty, "waited five times")
            harness.clock.advance(by: .seconds(10))
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == limit + 1)
            #expect(await a.localStore.refusedChanges().map(\.recordID) == [ReadingListEntry.recordID(for: "stuck")])
            #expect(await a.localStore.deviceFile.refusalWaits == nil, "forgotten once parked")
            try await a.close()
        }
    }

    /// The bound is per record: a server that answers a different record "later" in each push parks none
    /// of them, however many pushes of the zone in a row wait. Here the fault takes each request's first
    /// save, which is the newest article, and the one refused before it is unsaved meanwhile, so no article
    /// waits more than twice. Counted by zone, the third was parked.
    @Test(arguments: Self.routes)
    func waitsAreCountedByRecordNotByZone(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            let limit = SyncContext.refusalWaitLimit
            let fault = Self.answerLater
            await harness.cloud.setFaultPlan(Self.answeringLater(limit + 3))
            let names = (0..<(limit + 3)).map { "article-\($0)" }
            for (index, name) in names.enumerated() {
                try await a.readingList.add(name)
                if index > 0 { try await a.readingList.remove(names[index - 1]) }
                await a.waitUntilIdle()
                harness.clock.advance(by: .seconds(10))
                await a.waitUntilIdle()
                #expect(await a.localStore.refusedChanges().isEmpty, "nothing parked once \(name) waited")
            }
            #expect(await harness.cloud.counters().faultsInjected[fault.counterKey] == limit + 3)
            #expect(await a.localStore.pendingRecordCount() == 0)
            #expect(await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-" + names.last!])
            try await a.close()
        }
    }
    /// A wait on `retryAfter` says why in the summary: the server's message, for a record's error and for a
    /// request's, so a host can tell a throttled push from a record the server keeps refusing.
    @Test(arguments: Self.routes)
    func aSummaryThatWaitsSaysWhatTheServerSaid(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A", start: false)
            try await a.readingList.add("one")
            await harness.cloud.setFaultPlan(
                FaultPlan(scripted: [
                    ScriptedFault(
                        kind: .modifyRecords, count: 1, effect: .recordError(.internalError, retryAfter: .seconds(20))),
                    ScriptedFault(
                        kind: .fetchZoneChanges, count: 1, effect: .error(.invalidArguments, retryAfter: .seconds(20))),
                ]))
            let summary = try await a.syncNow()
            #expect(!summary.isComplete)
            let pushProblem = summary.problems.first { $0.zone == .readingList }
            #expect(pushProblem?.kind == .retryLater(after: .seconds(20)), "\(summary.problems)")
            #expect(pushProblem?.message.hasPrefix("the server asked to retry later (rl-one: ") == true)
            #expect(pushProblem?.message.contains("Injected fault") == true, "\(summary.problems)")
            let fetchProblem = summary.problems.first { $0.zone == nil }
            #expect(fetchProblem?.kind == .retryLater(after: .seconds(20)), "\(summary.problems)")
            #expect(fetchProblem?.message.hasPrefix("the server asked to retry later (") == true)
            #expect(fetchProblem?.message.contains("fetchZoneChanges") == true, "the fetch's own reason")
            #expect(summary.problems.count == 2)
            #expect(await a.localStore.refusedChanges().isEmpty)
            harness.clock.advance(by: .seconds(20))
            #expect(try await a.syncNow().isComplete)
            try await a.close()
        }
    }
}

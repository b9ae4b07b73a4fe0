import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// The deletes a `deleteSelf` cascade makes on a device: never sent, they wait for their owner's delete and
/// then take the server's word, so records go with their owner only where the owner went (CloudKit deletes
/// them itself when it does). Sent with the owner's delete, as they once were, they went through where the
/// owner's delete lost or was refused: the owner came back without them (the second newcomer's albums).
@Suite struct CascadedDeleteSyncTests {
    static let routes: [SyncHarness.Route] = [.direct, .http]

    private func device(
        _ harness: SyncHarness, _ name: String, types: [any SyncableRecord.Type] = testRecordTypes
    ) async throws -> SyncContext {
        try await harness.device(name) { $0.recordTypes = types }
    }

    /// ``twoDevicesWithARecipe(_:types:)`` with `StepPhoto` registered and `photos` (photo ID → step ID)
    /// saved on A and on the server, and fetched by B: a third level of `deleteSelf` owners.
    private func twoDevicesWithPhotos(
        _ harness: SyncHarness, _ photos: [String: String]
    ) async throws -> (SyncContext, SyncContext) {
        let (a, b) = try await twoDevicesWithARecipe(harness, types: testRecordTypes + [StepPhoto.self])
        try await a.records(StepPhoto.self).save(
            photos.sorted { $0.key < $1.key }.map { StepPhoto(id: $0, stepID: $1) })
        #expect(try await a.syncNow().isComplete)
        #expect(try await b.syncNow().isComplete)
        return (a, b)
    }

    private func serverNames(_ harness: SyncHarness) async -> [String] {
        await harness.cloud.records(in: TestRecipe.zone).map(\.id.name).sorted()
    }

    private func steps(_ device: SyncContext) async -> [String] {
        await device.records(TestStep.self).values().map(\.id).sorted()
    }

    @Test(arguments: Self.routes)
    func aRecipeWhoseDeleteLosesToAnEditKeepsItsSteps(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
            #expect(try await a.syncNow().isComplete)

            try await b.records(TestRecipe.self).delete("r1")  // B has not seen A's edit
            #expect(await steps(b).isEmpty, "the steps go with the recipe at once here")
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)

            #expect(await serverNames(harness) == ["r1", "r2", "s1", "s2"], "the edit beat the delete, steps too")
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).value("r1")?.title == "Leek soup")
                #expect(await steps(device) == ["s1", "s2"])
                #expect(await device.localStore.pendingRecordCount() == 0)
            }
            try await a.close()
            try await b.close()
        }
    }

    @Test(arguments: Self.routes)
    func aRecipeWhoseDeleteGoesTakesItsStepsEverywhereWithoutSendingTheirDeletes(route: SyncHarness.Route)
        async throws
    {
        try await SyncHarness.run(via: route) { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            let events = b.events()
            try await b.records(TestRecipe.self).delete("r1")
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r2"], "CloudKit deleted the steps with the recipe")
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).values().map(\.id) == ["r2"])
                #expect(await steps(device).isEmpty)
                #expect(await device.localStore.pendingRecordCount() == 0)
            }
            try await b.close()
            var sentDeletes = 0
            for await event in events {
                if case .willSend(_, _, let deletes) = event { sentDeletes += deletes }
            }
            #expect(sentDeletes == 1, "only the recipe's delete was sent")
            try await a.close()
        }
    }

    /// The server refuses the recipe's delete: the steps' deletes wait with it, and discarding it brings the
    /// recipe back with its steps; the server never lost them.
    @Test(arguments: Self.routes)
    func aRefusedDeleteHoldsItsStepsAndDiscardingItBringsThemBack(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            await harness.cloud.setFaultPlan(.failRecords(1, with: .invalidArguments))
            try await a.records(TestRecipe.self).delete("r1")
            _ = try await a.syncNow()
            #expect(await a.refusedChanges().map(\.recordID.name) == ["r1"])
            #expect(await serverNames(harness) == ["r1", "r2", "s1", "s2"], "the steps' deletes were not sent")
            #expect(await a.localStore.pendingRecordCount() == 3, "the steps' deletes wait for the recipe's")

            #expect(try await a.discardRefusedChanges().map(\.name) == ["r1"])
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).value("r1")?.title == "Soup")
                #expect(await steps(device) == ["s1", "s2"])
                #expect(await device.localStore.pendingRecordCount() == 0)
            }
            try await a.close()
            try await b.close()
        }
    }

    /// A moves s1 to r2; B, which still has s1 in r1, deletes r1. CloudKit does not take s1 with r1, and
    /// neither does B in the end.
    @Test(arguments: Self.routes)
    func aStepMovedToAnotherRecipeSurvivesItsOldRecipesDelete(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            try await a.records(TestStep.self).save(TestStep(id: "s1", recipeID: "r2", text: "Chop"))
            #expect(try await a.syncNow().isComplete)

            try await b.records(TestRecipe.self).delete("r1")
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r2", "s1"])
            for device in [a, b] {
                #expect(await device.records(TestStep.self).value("s1")?.recipeID == "r2")
                #expect(await steps(device) == ["s1"])
            }
            try await a.close()
            try await b.close()
        }
    }

    /// Deleted and saved again before it was sent: the new recipe replaces the old one on the server, which
    /// deletes nothing, so the steps' deletes are sent as the user's own.
    @Test(arguments: Self.routes)
    func aRecipeDeletedAndSavedAgainLeavesItsOldStepsDeleted(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            try await a.records(TestRecipe.self).delete("r1")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "New soup"))
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r1", "r2"])
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).value("r1")?.title == "New soup")
                #expect(await steps(device).isEmpty)
            }
            try await a.close()
            try await b.close()
        }
    }

    /// Discarding the refused delete brings the steps back with the recipe, as the server has them (a review
    /// found them left deleted until something else pushed the zone).
    @Test func discardingARefusedDeleteBringsTheStepsBackWithoutAnotherSync() async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            await harness.cloud.setFaultPlan(.failRecords(1, with: .invalidArguments))
            try await a.records(TestRecipe.self).delete("r1")
            await a.waitUntilIdle()
            #expect(await a.refusedChanges().map(\.recordID.name) == ["r1"])
            #expect(try await a.discardRefusedChanges().map(\.name) == ["r1"])
            // Back when the discard returns, as the recipe is (a newcomer found them back only after a push).
            #expect(await a.records(TestRecipe.self).value("r1")?.title == "Soup")
            #expect(await steps(a) == ["s1", "s2"])
            #expect(await a.localStore.pendingRecordCount() == 0)
            await a.waitUntilIdle()
            #expect(await steps(a) == ["s1", "s2"])
            try await a.close()
            try await b.close()
        }
    }

    /// Deleted, then saved again while the delete was out, and the round failed: the save that now stands
    /// for the delete meets an edit this device had not seen, and goes out merged, as an update. The delete
    /// lost, so the steps stay, as they do when the delete alone meets that edit. (Released as soon as the
    /// save was made, their deletes once went through.)
    @Test(arguments: Self.routes)
    func aSaveStandingForTheDeleteThatLosesToAnEditKeepsTheSteps(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
            #expect(try await a.syncNow().isComplete)
            await harness.cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .networkFailure))
            try await b.records(TestRecipe.self).delete("r1")
            await b.waitUntilIdle()
            try await b.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "New soup"))
            await harness.cloud.setFaultPlan(.none)
            let events = b.events()
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r1", "r2", "s1", "s2"])
            for device in [a, b] { #expect(await steps(device) == ["s1", "s2"]) }
            try await b.close()
            var conflicts: [String] = []
            for await event in events {
                if case .conflictResolved(let id) = event { conflicts.append(id.name) }
            }
            #expect(conflicts == ["r1"], "the save met A's edit")
            try await a.close()
        }
    }

    /// As above, but a fetch merges the save standing for the delete with the edit before it goes, and the
    /// app restarts before it goes: the edit still beats the delete, so the steps stay. (The merge turns the
    /// save into an update in memory only; the log still says "replace", and a request that sent a replace
    /// for every such save, merged whole or not, replaced the recipe and released the steps' deletes: they
    /// went from every device.)
    @Test(arguments: [false, true])
    func aSaveStandingForTheDeleteMergedWithAnEditKeepsTheStepsAcrossARestart(restarts: Bool) async throws {
        try await SyncHarness.run { harness in
            var (a, b) = try await twoDevicesWithARecipe(harness)
            try await b.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
            #expect(try await b.syncNow().isComplete)
            await harness.cloud.setFaultPlan(.failNext(1_000, .modifyRecords, with: .networkUnavailable))
            try await a.records(TestRecipe.self).delete("r1")
            await a.waitUntilIdle()
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "New soup"))
            await a.waitUntilIdle()
            await a.handleRemoteNotification(zones: [TestRecipe.zone])
            await a.waitUntilIdle()
            if restarts {
                try await a.close()
                a = try await device(harness, "A")
            }
            await harness.cloud.setFaultPlan(.none)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r1", "r2", "s1", "s2"])
            for device in [a, b] { #expect(await steps(device) == ["s1", "s2"]) }
            try await a.close()
            try await b.close()
        }
    }

    /// A lookup that keeps failing holds back only the deletes it would settle: the zone's other changes
    /// still go (a review found every push of the zone stopped before sending).
    @Test func aLookupThatKeepsFailingDoesNotHoldBackTheZonesOtherChanges() async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            await harness.cloud.setFaultPlan(.failNext(1_000, .lookupRecords, with: .internalError))
            try await a.records(TestRecipe.self).delete("r1")
            #expect(try await a.syncNow().isComplete == false)
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r2", title: "Irish stew"))
            _ = try await a.syncNow()
            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(TestRecipe.self).value("r2")?.title == "Irish stew")
            #expect(await a.localStore.pendingRecordCount() == 2, "only the steps wait")
            await harness.cloud.setFaultPlan(.none)
            #expect(try await a.syncNow().isComplete)
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.close()
            try await b.close()
        }
    }

    /// The lookup that settles the steps fails: they stay pending (deleted here) and settle on the next sync.
    @Test func aFailedLookupLeavesTheStepsToSettleOnTheNextSync() async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            try await b.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
            #expect(try await b.syncNow().isComplete)
            await harness.cloud.setFaultPlan(.failNext(1, .lookupRecords, with: .networkFailure))
            try await a.records(TestRecipe.self).delete("r1")
            await a.waitUntilIdle()  // the delete's own push: the recipe's delete lost, the lookup failed
            #expect(await harness.cloud.counters().faultsInjected == ["networkFailure": 1])
            #expect(await a.localStore.pendingRecordCount() == 2, "the steps wait to settle")
            #expect(await steps(a).isEmpty)
            #expect(try await a.syncNow().isComplete)
            #expect(await steps(a) == ["s1", "s2"])
            #expect(await a.records(TestRecipe.self).value("r1")?.title == "Leek soup")
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.close()
            try await b.close()
        }
    }

    /// The log refuses the entry that lets the settled deletes go, after the snapshot with the steps the
    /// server still has was written, and the process dies: the deletes are pending again when the directory
    /// opens, over that snapshot, and settle again to the same end.
    @Test func aSettleTheLogCannotAcknowledgeSettlesAgainAfterARestart() async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness)
            try await b.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
            #expect(try await b.syncNow().isComplete)
            try await a.close()
            let faulty = FaultyFileSystem()
            let transport = InterceptingTransport(harness.cloud) { kind, _ in
                // The next log write after the lookup is the settle's acknowledgement (its snapshot goes to
                // a file of its own).
                guard kind == .lookupRecords else { return }
                faulty.failNext(.write, with: .ioError, pathSuffix: "commands.log")
            }
            let failing = try await harness.device("A", transport: transport, start: false) {
                $0.recordTypes = testRecordTypes
                $0.fileSystem = FileSystem(faulty)
            }
            try await failing.records(TestRecipe.self).delete("r1")
            let summary = try await failing.syncNow()
            #expect(summary.problems.contains { $0.kind == .deviceError(.ioFailed) }, "\(summary.problems)")
            await failing.abandon()

            let reopened = try await device(harness, "A")
            #expect(try await reopened.syncNow().isComplete)
            #expect(await reopened.records(TestRecipe.self).value("r1")?.title == "Leek soup")
            #expect(await steps(reopened) == ["s1", "s2"])
            #expect(await reopened.localStore.pendingRecordCount() == 0)
            #expect(await serverNames(harness) == ["r1", "r2", "s1", "s2"])
            try await reopened.close()
            try await b.close()
        }
    }

    /// The cascade's deletes are in the command log as such: a restart (here with the log compacted, so
    /// read back from its commands) still holds them back, and a delete that loses after it brings them back.
    @Test(arguments: [false, true])
    func aRestartKeepsTheStepsWaitingForTheirRecipe(compacted: Bool) async throws {
        try await SyncHarness.run { harness in
            var (a, b) = try await twoDevicesWithARecipe(harness)
            try await b.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
            #expect(try await b.syncNow().isComplete)
            await harness.cloud.setFaultPlan(.failNext(10, .modifyRecords, with: .networkFailure))
            try await a.records(TestRecipe.self).delete("r1")
            _ = try await a.syncNow()
            if compacted { try await a.localStore.compact() }
            try await a.close()
            await harness.cloud.setFaultPlan(.none)
            a = try await device(harness, "A")
            #expect(try await a.syncNow().isComplete)
            #expect(await steps(a) == ["s1", "s2"])
            #expect(await serverNames(harness) == ["r1", "r2", "s1", "s2"])
            try await a.close()
            try await b.close()
        }
    }

    /// B edits a step that A deletes: the edit beats the delete, and the step comes back with the photo it
    /// owns, which CloudKit deleted with it (a newcomer found the step back without it). B hears of the
    /// delete either when its save meets it or from a fetch before that.
    @Test(arguments: [false, true])
    func anEditThatBeatsADeleteBringsBackWhatTheRecordOwns(fetchesFirst: Bool) async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithPhotos(harness, ["p1": "s1"])

            try await a.records(TestStep.self).delete("s1")
            #expect(try await a.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r1", "r2", "s2"], "CloudKit took the photo with the step")
            if fetchesFirst {
                await harness.cloud.setFaultPlan(.failNext(1_000, .modifyRecords, with: .networkUnavailable))
            }
            try await b.records(TestStep.self).save(TestStep(id: "s1", recipeID: "r1", text: "Chop finely"))
            if fetchesFirst {
                await b.waitUntilIdle()
                await b.handleRemoteNotification(zones: [TestRecipe.zone])
                await b.waitUntilIdle()
                #expect(await b.records(StepPhoto.self).value("p1") != nil, "kept with the step it belongs to")
                await harness.cloud.setFaultPlan(.none)
            }
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(await serverNames(harness) == ["p1", "r1", "r2", "s1", "s2"])
            for device in [a, b] {
                #expect(await device.records(TestStep.self).value("s1")?.text == "Chop finely")
                #expect(await device.records(StepPhoto.self).value("p1")?.stepID == "s1")
                #expect(await device.localStore.pendingRecordCount() == 0)
            }
            try await a.close()
            try await b.close()
        }
    }

    /// A moves a step (with its photo) to r2; B, which has not seen the move, deletes r1 and syncs first:
    /// CloudKit takes the step and its photo with r1. A's move then brings the step back, in r2, and the
    /// photo with it.
    @Test func aStepMovedAwayFromARecipeDeletedFirstComesBackWithItsPhoto() async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithPhotos(harness, ["p1": "s1"])
            await harness.cloud.setFaultPlan(.failNext(1_000, .modifyRecords, with: .networkUnavailable))
            try await a.records(TestStep.self).save(TestStep(id: "s1", recipeID: "r2", text: "Chop"))
            await a.waitUntilIdle()
            await harness.cloud.setFaultPlan(.none)

            try await b.records(TestRecipe.self).delete("r1")
            #expect(try await b.syncNow().isComplete)
            #expect(await serverNames(harness) == ["r2"])
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await serverNames(harness) == ["p1", "r2", "s1"])
            for device in [a, b] {
                #expect(await device.records(TestStep.self).value("s1")?.recipeID == "r2")
                #expect(await device.records(StepPhoto.self).value("p1") != nil)
                #expect(await device.records(TestRecipe.self).value("r1") == nil)
            }
            try await a.close()
            try await b.close()
        }
    }

    /// A step owns its photos: deleting the recipe takes three levels here. When the delete loses, each level
    /// comes back once the one above it has; when it goes, none is left anywhere.
    @Test(arguments: [false, true])
    func aChainOfOwnersSettlesLevelByLevel(deleteLoses: Bool) async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithPhotos(harness, ["p1": "s1", "p2": "s2"])
            if deleteLoses {
                try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Leek soup"))
                #expect(try await a.syncNow().isComplete)
            }
            try await b.records(TestRecipe.self).delete("r1")
            #expect(await b.records(StepPhoto.self).count() == 0)
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            let expected = deleteLoses ? ["p1", "p2", "r1", "r2", "s1", "s2"] : ["r2"]
            #expect(await serverNames(harness) == expected)
            for device in [a, b] {
                #expect(
                    await device.records(StepPhoto.self).values().map(\.id).sorted()
                        == (deleteLoses ? ["p1", "p2"] : []))
                #expect(await steps(device) == (deleteLoses ? ["s1", "s2"] : []))
                #expect(await device.localStore.pendingRecordCount() == 0)
            }
            try await a.close()
            try await b.close()
        }
    }
}

/// A photo of a recipe's step, owned by the step: a third level of `deleteSelf` references.
private struct StepPhoto: SyncableRecord {
    static let zone = TestRecipe.zone
    static let recordType = "StepPhoto"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["step": .reference]

    var id: String
    var stepID: String

    init(id: String, stepID: String) {
        self.id = id
        self.stepID = stepID
    }

    var fields: [String: FieldValue] { ["step": .reference(TestStep.reference(to: stepID, action: .deleteSelf))] }

    init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        stepID = try fields.reference("step").recordName
    }
}

/// A (with B) holding recipe r1 with steps s1 and s2, and recipe r2, all on the server; both started unless
/// `start` is false.
func twoDevicesWithARecipe(
    _ harness: SyncHarness, start: Bool = true, types: [any SyncableRecord.Type] = testRecordTypes
) async throws -> (SyncContext, SyncContext) {
    let a = try await harness.device("A", start: start) { $0.recordTypes = types }
    let b = try await harness.device("B", start: start) { $0.recordTypes = types }
    var batch = RecordBatch()
    try batch.save([TestRecipe(id: "r1", title: "Soup"), TestRecipe(id: "r2", title: "Stew")])
    try batch.save([
        TestStep(id: "s1", recipeID: "r1", text: "Chop"), TestStep(id: "s2", recipeID: "r1", text: "Simmer"),
    ])
    try await a.apply(batch)
    #expect(try await a.syncNow().isComplete)
    #expect(try await b.syncNow().isComplete)
    #expect(await b.records(TestStep.self).count() == 2)
    return (a, b)
}

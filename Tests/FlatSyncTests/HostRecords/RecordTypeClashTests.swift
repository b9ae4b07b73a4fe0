import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// A record of another type under the name a save holds (red team 10, and a read-only review of its fix).
/// A name is unique in its zone whatever the type, and the two cannot merge: a save that meets another
/// device's record of another type is parked, never dropped, and the server's record is never changed into
/// this device's type; but a replace that meets this device's own version of another type still replaces it.
@Suite struct RecordTypeClashTests {
    private func device(
        _ harness: SyncHarness, _ name: String, transport: (any CloudTransport)? = nil
    ) async throws -> SyncContext {
        try await harness.device(name, transport: transport, start: false) { $0.recordTypes = testRecordTypes }
    }

    /// A's delete of recipe x is on the wire when A makes recipe x again (a later command), and another
    /// client has meanwhile put a step under the name. The delete loses to the step, as to any version it
    /// never saw; the waiting save keeps A's recipe, and meets the step when it is sent: parked. Taking the
    /// step sent its fields back as A's save, and A's new recipe was gone without a word.
    @Test func aSaveWaitingBehindADeleteIsParkedNotReplacedByTheOtherType() async throws {
        try await SyncHarness.run { harness in
            let cloud = harness.cloud
            let armed = Mutex(false)
            let again = Mutex<SyncContext?>(nil)
            let transport = InterceptingTransport(cloud) { kind, _ in
                guard kind == .modifyRecords,
                    armed.withLock({
                        let was = $0; $0 = false; return was
                    })
                else { return }
                // Another client: recipe x deleted, a step x made (of recipe r).
                _ = try? await cloud.modifyRecords(
                    saving: [], deleting: [RecordDeletion(TestRecipe.recordID("x"), policy: .force)], atomically: false)
                let step = Record(
                    id: TestStep.recordID("x"), type: TestStep.recordType,
                    fields: TestStep(id: "x", recipeID: "r", text: "Chop").fields)
                _ = try? await cloud.modifyRecords(saving: [RecordSave(step)], deleting: [], atomically: false)
                // A makes recipe x again while its delete is on the wire.
                _ = try? await again.withLock({ $0 })?.records(TestRecipe.self).save(
                    TestRecipe(id: "x", title: "Again"))
            }
            let a = try await device(harness, "A", transport: transport)
            again.withLock { $0 = a }
            try await a.records(TestRecipe.self).save([
                TestRecipe(id: "r", title: "Soup"), TestRecipe(id: "x", title: "X"),
            ])
            #expect(try await a.syncNow().isComplete)
            #expect(try await a.records(TestRecipe.self).delete("x"))
            armed.withLock { $0 = true }
            var summary = try await a.syncNow()
            if summary.refused.isEmpty { summary = try await a.syncNow() }
            #expect(summary.refused.map(\.recordID.name) == ["x"])
            #expect(summary.refused.first?.serverErrorCode == nil, "refused by the engine, not the server")
            #expect(await a.records(TestRecipe.self).value("x")?.title == "Again", "kept while parked")
            let server = await cloud.records(in: TestRecipe.zone).first { $0.id.name == "x" }
            #expect(server?.type == TestStep.recordType, "the other client's step is untouched")
            #expect(try await a.discardRefusedChanges().map(\.name) == ["x"])
            #expect(await a.records(TestStep.self).value("x")?.text == "Chop")
            #expect(await a.records(TestRecipe.self).value("x") == nil)
            try await a.close()
        }
    }

    /// A saves step x; the server applies it but the answer is lost. A then deletes the step and makes a
    /// recipe x: one replace, sent as a create, which meets the step A itself wrote. The replace saw that
    /// version, so it replaces it (directly and over the fetch that brings it first), rather than being
    /// parked against this device's own record.
    @Test(arguments: [false, true])
    func aReplaceThatMeetsItsOwnVersionOfAnotherTypeReplacesIt(fetchFirst: Bool) async throws {
        try await SyncHarness.run { harness in
            let cloud = harness.cloud
            let a = try await device(harness, "A")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup"))
            #expect(try await a.syncNow().isComplete)
            await cloud.setFaultPlan(
                .loseResponses(1).then(.failNext(1, .fetchDatabaseChanges, with: .networkUnavailable)))
            try await a.records(TestStep.self).save(TestStep(id: "x", recipeID: "r", text: "Chop"))
            _ = try await a.syncNow()
            await cloud.setFaultPlan(.none)
            #expect(await cloud.records(in: TestRecipe.zone).first { $0.id.name == "x" }?.type == TestStep.recordType)

            #expect(try await a.records(TestStep.self).delete("x"))
            #expect(try await a.records(TestRecipe.self).save(TestRecipe(id: "x", title: "X")))
            if fetchFirst {
                // The fetch brings the step under the pending replace first.
                await cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .networkUnavailable))
                _ = try await a.syncNow()
                await cloud.setFaultPlan(.none)
            }
            let summary = try await a.syncNow()
            #expect(summary.isComplete, "\(summary)")
            #expect(summary.refused.isEmpty)
            let server = await cloud.records(in: TestRecipe.zone).first { $0.id.name == "x" }
            #expect(server?.type == TestRecipe.recordType)
            #expect(server?.fields["title"] == .string("X"))
            #expect(await a.records(TestRecipe.self).value("x")?.title == "X")
            try await a.close()
        }
    }
}

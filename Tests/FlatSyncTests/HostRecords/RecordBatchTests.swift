import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite("Batches of host records of several types")
struct RecordBatchTests {
    private let options = LocalStore.Options(durability: .buffered, recordTypes: testRecordTypes)

    /// A recipe and its steps in one batch: one mutation, so a kill leaves all of them or none; a step's
    /// `deleteSelf` target may be saved in the same batch, which a `RecordStore` of steps alone refuses.
    @Test func aRecordAndTheRecordsThatBelongToItAreOneMutation() async throws {
        try await withTemporaryDirectory { directory in
            var store = try LocalStore(directory: directory, options: options)
            await #expect(throws: FlatSyncError.self) {
                try await store.records(TestStep.self).save(TestStep(id: "s1", recipeID: "soup", text: "Chop"))
            }
            var batch = RecordBatch()
            #expect(batch.isEmpty && batch.zone == nil)
            try batch.save([
                TestStep(id: "s1", recipeID: "soup", text: "Chop"),
                TestStep(id: "s2", recipeID: "soup", text: "Boil", after: "s1"),
            ])
            try batch.save(TestRecipe(id: "soup", title: "Soup"))
            #expect(batch.zone == TestRecipe.zone)
            let sequence = await store.nextMutationSequence
            #expect(try await store.apply(batch) == 3)
            #expect(await store.nextMutationSequence == sequence + 1, "one mutation")
            let order = try #require(
                await store.pending.commands(in: TestRecipe.zone).last?.slots.compactMap { $0?.recordID.name })
            #expect(order.first == "soup", "the recipe goes before its steps: \(order)")
            #expect(try await store.apply(batch) == 0, "the same values again change nothing")
            await store.abandon()
            store = try LocalStore(directory: directory, options: options)
            #expect(await store.records(TestRecipe.self).value("soup")?.title == "Soup")
            #expect(Set(await store.records(TestStep.self).values().map(\.id)) == ["s1", "s2"])
            try await store.close()
        }
    }

    @Test func theLaterChangeOfARecordWinsAndADeleteCascades() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: options)
            try await store.records(TestRecipe.self).save([
                TestRecipe(id: "soup", title: "Soup"), TestRecipe(id: "tea", title: "Tea"),
                TestRecipe(id: "stew", title: "Stew"),
            ])
            try await store.records(TestStep.self).save(TestStep(id: "s1", recipeID: "soup", text: "Chop"))
            var batch = RecordBatch()
            try batch.save(TestRecipe(id: "bread", title: "Bread"))
            try batch.delete(TestRecipe.self, id: "bread")  // saved, then deleted: not saved
            try batch.delete(TestRecipe.self, id: "tea")
            try batch.save(TestRecipe(id: "tea", title: "Green tea"))  // deleted, then saved: saved
            try batch.delete(TestRecipe.self, id: "soup")
            try batch.delete(TestStep.self, id: "stew")  // the stew is a recipe, not a step: left alone
            #expect(try await store.apply(batch) == 3, "tea saved, soup deleted and its step with it")
            #expect(Set(await store.records(TestRecipe.self).values().map(\.title)) == ["Green tea", "Stew"])
            #expect(await store.records(TestStep.self).count() == 0)
            try await store.close()
        }
    }

    @Test func badInputThrowsATypedErrorAndWritesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(
                directory: directory, options: .init(durability: .buffered, recordTypes: [TestRecipe.self]))
            var batch = RecordBatch()
            try batch.save(TestRecipe(id: "soup", title: "Soup"))
            // Checked as they are added: another zone, a bad name, a record too large.
            #expect(throws: FlatSyncError.self) { try batch.save(TestNote(id: "n1", articleID: "a1", text: "x")) }
            #expect(throws: FlatSyncError.self) { try batch.delete(TestRecipe.self, id: "_hidden") }
            #expect(throws: FlatSyncError.self) {
                try batch.save([
                    TestRecipe(id: "fine", title: "x"),
                    TestRecipe(id: "big", title: String(repeating: "x", count: 1_000_001)),
                ])
            }
            #expect(batch.saves.keys.sorted() == ["soup"], "a refused array adds none of its values")
            // Checked when applied, before anything is written: the step's type is not registered here.
            try batch.save(TestStep(id: "s1", recipeID: "soup", text: "Chop"))
            let before = await store.nextMutationSequence
            do {
                try await store.apply(batch)
                Issue.record("an unregistered type in a batch must be refused")
            } catch let error as FlatSyncError {
                #expect(error.code == .invalidArgument && error.message.contains("Step"), "\(error)")
            }
            #expect(await store.nextMutationSequence == before)
            #expect(await store.records(TestRecipe.self).count() == 0, "the recipe was not saved either")
            #expect(try await store.apply(RecordBatch()) == 0)
            try await store.close()
        }
    }

    /// A save that a delete of the same batch would take with it (its owner's owner goes) is refused, not
    /// saved and deleted in one mutation; a delete that names a record of another type takes nothing, and
    /// so keeps nothing from being saved (the review).
    @Test func aSaveTheBatchsOwnDeleteWouldTakeIsRefused() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: options)
            try await store.records(TestRecipe.self).save(TestRecipe(id: "k", title: "Kitchen"))
            // A step may own another step: a reference names a record of the zone, whatever its type.
            try await store.records(TestStep.self).save(TestStep(id: "r", recipeID: "k", text: "Stock"))
            var batch = RecordBatch()
            try batch.save(TestStep(id: "s", recipeID: "r", text: "Skim"))
            try batch.delete(TestRecipe.self, id: "k")
            let before = await store.nextMutationSequence
            do {
                try await store.apply(batch)
                Issue.record("s would be saved and deleted at once")
            } catch let error as FlatSyncError {
                #expect(error.code == .invalidArgument, "\(error)")
            }
            #expect(await store.nextMutationSequence == before)
            #expect(await store.records(TestStep.self).count() == 1)

            var wrongType = RecordBatch()
            try wrongType.delete(TestStep.self, id: "k")  // k is a recipe: nothing to delete
            try wrongType.save(TestStep(id: "s", recipeID: "k", text: "Skim"))
            #expect(try await store.apply(wrongType) == 1)
            #expect(await store.records(TestRecipe.self).value("k") != nil)
            try await store.close()
        }
    }

    @Test func aStoreOfATypeNotRegisteredRefusesEvenAnEmptySave() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(
                directory: directory, options: .init(durability: .buffered, recordTypes: [TestRecipe.self]))
            await #expect(throws: FlatSyncError.self) { try await store.records(TestStep.self).save([]) }
            try await store.close()
        }
    }

    /// Through a context: the batch is sent once, recipe before steps, and another device gets all of it.
    @Test func aContextSendsTheBatchAndAnotherDeviceGetsAllOfIt() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            var configuration = SyncContext.Configuration()
            configuration.recordTypes = testRecordTypes
            func open(_ name: String) async throws -> SyncContext {
                try await SyncContext.open(
                    directory: directory.appendingPathComponent(name),
                    account: CloudAccount(id: "user", transport: cloud), configuration: configuration)
            }
            let a = try await open("a")
            let b = try await open("b")
            var batch = RecordBatch()
            try batch.save(TestRecipe(id: "soup", title: "Soup"))
            try batch.save([
                TestStep(id: "s1", recipeID: "soup", text: "Chop"), TestStep(id: "s2", recipeID: "soup", text: "Boil"),
            ])
            #expect(try await a.apply(batch) == 3)
            let sent = try await a.syncNow()
            #expect(sent.sent == 3)
            _ = try await b.syncNow()
            #expect(await b.records(TestRecipe.self).value("soup")?.title == "Soup")
            #expect(Set(await b.records(TestStep.self).values().map(\.id)) == ["s1", "s2"])
            try await a.close()
            try await b.close()
        }
    }
}

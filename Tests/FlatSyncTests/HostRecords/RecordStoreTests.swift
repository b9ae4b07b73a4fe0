import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite("Host-defined record stores, on one device")
struct RecordStoreTests {
    private func withStore<R>(_ body: (LocalStore) async throws -> R) async throws -> R {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(
                directory: directory,
                options: .init(durability: .buffered, recordTypes: testRecordTypes + [Loose.self]))
            let result = try await body(store)
            try await store.close()
            return result
        }
    }

    @Test func savedValuesReadBackAndSurviveReopening() async throws {
        try await withTemporaryDirectory { directory in
            let options = LocalStore.Options(durability: .buffered, recordTypes: testRecordTypes)
            var store = try LocalStore(directory: directory, options: options)
            try await store.readingList.add("a1")
            #expect(try await store.records(TestNote.self).save(TestNote(id: "n1", articleID: "a1", text: "Tea")))
            #expect(
                try await store.records(TestNote.self).save(TestNote(id: "n1", articleID: "a1", text: "Tea")) == false)
            try await store.records(TestRecipe.self).save([
                TestRecipe(id: "r1", title: "Soup"), TestRecipe(id: "r2", title: "Bread"),
            ])
            #expect(Set(await store.records(TestRecipe.self).values().map(\.title)) == ["Soup", "Bread"])
            #expect(await store.records(TestNote.self).count() == 1)
            #expect(await store.readingList.count() == 1, "a note is not an entry")
            #expect(await store.pendingRecordCount() == 4)
            // Killed: nothing written but the log.
            await store.abandon()
            store = try LocalStore(directory: directory, options: options)
            #expect(await store.records(TestNote.self).value("n1")?.text == "Tea")
            #expect(await store.records(TestRecipe.self).values().count == 2)
            #expect(await store.pendingRecordCount() == 4)
            // Closed: from the snapshots.
            try await store.close()
            #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("zone-Recipes.plist").path))
            store = try LocalStore(directory: directory, options: options)
            #expect(await store.records(TestNote.self).value("n1")?.articleID == "a1")
            #expect(await store.records(TestRecipe.self).value("r2")?.title == "Bread")
            #expect(await store.readingList.contains("a1"))
            try await store.close()
        }
    }

    @Test func changesToOneRecordCoalesceFieldByField() async throws {
        try await withStore { store in
            let recipes = store.records(TestRecipe.self)
            try await recipes.save(TestRecipe(id: "r1", title: "Soup"))
            try await recipes.save(TestRecipe(id: "r1", title: "Soup", servings: 4))
            try await recipes.save(TestRecipe(id: "r1", title: "Stew", servings: 4))
            let change = try #require(await store.pending.latestChange(for: TestRecipe.recordID("r1")))
            #expect(await store.pendingRecordCount() == 1)
            #expect(change.changedKeys == ["title", "servings"])
            #expect(change.record?.fields["title"] == .string("Stew"))
        }
    }

    @Test func deletingAnEntryDeletesItsNotesInTheSameMutation() async throws {
        try await withTemporaryDirectory { directory in
            let options = LocalStore.Options(durability: .buffered, recordTypes: testRecordTypes)
            var store = try LocalStore(directory: directory, options: options)
            try await store.readingList.add("a1")
            try await store.readingList.add("a2")
            let notes = store.records(TestNote.self)
            try await notes.save([
                TestNote(id: "n1", articleID: "a1", text: "one"), TestNote(id: "n2", articleID: "a1", text: "two"),
                TestNote(id: "n3", articleID: "a2", text: "three"),
            ])
            let sequence = await store.nextMutationSequence
            #expect(try await store.readingList.remove("a1"))
            #expect(await store.nextMutationSequence == sequence + 1, "one mutation")
            #expect(await notes.values().map(\.id) == ["n3"])
            let pending = await store.pending
            #expect(pending.latestChange(for: TestNote.recordID("n1"))?.isDelete == true)
            await store.abandon()
            store = try LocalStore(directory: directory, options: options)
            #expect(await store.records(TestNote.self).values().map(\.id) == ["n3"])
            try await store.close()
        }
    }

    @Test func deletingARecipeDeletesItsStepsButNotWhatMerelyRefersToThem() async throws {
        try await withStore { store in
            try await store.records(TestRecipe.self).save([
                TestRecipe(id: "r1", title: "Soup"), TestRecipe(id: "r2", title: "Bread"),
            ])
            try await store.records(TestStep.self).save([
                TestStep(id: "s1", recipeID: "r1", text: "Chop"),
                TestStep(id: "s2", recipeID: "r1", text: "Boil", after: "s1"),
                TestStep(id: "s3", recipeID: "r2", text: "Knead", after: "s1"),
            ])
            #expect(try await store.records(TestRecipe.self).delete("r1"))
            #expect(await store.records(TestStep.self).values().map(\.id) == ["s3"])
            #expect(await store.records(TestStep.self).value("s3")?.after == "s1", "a `none` reference is left alone")
            #expect(try await store.records(TestRecipe.self).delete("r1") == false)
        }
    }

    @Test func badInputThrowsATypedErrorAndWritesNothing() async throws {
        try await withStore { store in
            let before = await store.nextMutationSequence
            func expectRefused(_ code: FlatSyncError.Code, _ body: () async throws -> Void) async {
                do {
                    try await body()
                    Issue.record("expected \(code)")
                } catch let error as FlatSyncError {
                    #expect(error.code == code, "\(error)")
                } catch {
                    Issue.record("unexpected \(error)")
                }
            }
            await expectRefused(.invalidArgument) {
                try await store.records(TestNote.self).save(TestNote(id: "n1", articleID: "never-saved", text: "x"))
            }
            await expectRefused(.invalidArgument) {
                try await store.records(TestNote.self).save(TestNote(id: "rl-x", articleID: "x", text: "x"))
            }
            // CloudKit's rule for record names (CKRecord.ID): ASCII, at most 255, not starting with _.
            for name in ["", "_hidden", "crème", "tab\there", String(repeating: "n", count: 256)] {
                await expectRefused(.invalidArgument) {
                    try await store.records(TestRecipe.self).save(TestRecipe(id: name, title: "x"))
                }
                await expectRefused(.invalidArgument) { try await store.records(TestRecipe.self).delete(name) }
            }
            await expectRefused(.recordTooLarge) {
                try await store.records(TestRecipe.self).save(
                    TestRecipe(id: "big", title: String(repeating: "x", count: 1_000_001)))
            }
            await expectRefused(.invalidArgument) {
                try await store.records(Unregistered.self).save(Unregistered(id: "u"))
            }
            await expectRefused(.invalidArgument) {
                try await store.records(WrongField.self).save(WrongField(id: "w"))
            }
            await expectRefused(.invalidArgument) {
                try await store.records(Loose.self).save(
                    Loose(
                        id: "l1",
                        reference: RecordReference(
                            recordName: "x", zoneName: "Elsewhere", action: .none)))
            }
            await expectRefused(.invalidArgument) {
                try await store.records(Loose.self).save(
                    Loose(
                        id: "l2",
                        reference: RecordReference(
                            recordName: "x", action: .validate)))
            }
            #expect(await store.nextMutationSequence == before)
            #expect(await store.pendingRecordCount() == 0)
            // The longest name CloudKit takes, and printable ASCII of every kind but a leading _, are fine.
            let longest = String(repeating: "n", count: 255)
            let saved = try? await store.records(TestRecipe.self).save([
                TestRecipe(id: longest, title: "x"), TestRecipe(id: "a_b-c.d~e:f/g h", title: "y"),
            ])
            #expect(saved == 2)
        }
    }

    /// A number JSON cannot carry is refused before anything is written: the CKWS transport could never
    /// send the record, and it would wait on the device, refused, for good (the newcomer's finding: the
    /// in-memory cloud took it, so a host's tests passed).
    @Test func aNumberJSONCannotCarryIsRefusedAtTheSave() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(
                directory: directory, options: .init(durability: .buffered, recordTypes: [Measurement.self]))
            let measurements = store.records(Measurement.self)
            for bad in [
                Measurement(id: "m", value: .nan), Measurement(id: "m", value: .infinity),
                Measurement(id: "m", value: 1, samples: [2, -.infinity]),
                Measurement(id: "m", value: 1, taken: Date(timeIntervalSinceReferenceDate: .nan)),
                Measurement(id: "m", value: 1, taken: Date(timeIntervalSince1970: 1e16)),  // beyond a TIMESTAMP
            ] {
                await #expect(throws: FlatSyncError.self) { try await measurements.save(bad) }
            }
            #expect(await store.pendingRecordCount() == 0)
            #expect(try await measurements.save(Measurement(id: "m", value: 1.5, samples: [0, -2.25])))
            try await store.close()
        }
    }

    @Test func aLooseReferenceNeedsNoTargetAndTheTypesCheckIsPerRecordType() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(
                directory: directory, options: .init(durability: .buffered, recordTypes: [Loose.self]))
            // A `none` reference may point at nothing (CloudKit keeps it so too).
            #expect(try await store.records(Loose.self).save(Loose(id: "l", reference: Loose.reference(to: "nowhere"))))
            #expect(await store.records(Loose.self).value("l")?.reference.recordName == "nowhere")
            try await store.close()
        }
    }

    /// CloudKit takes at most 750 deleteSelf references to one record: the 751st step of a recipe is refused
    /// before anything is written; a step moved to another recipe, or deleted, makes room.
    @Test func aRecordTakesAtMost750DeleteSelfReferences() async throws {
        try await withStore { store in
            let limit = LocalStore.maximumDeleteSelfReferences
            let steps = store.records(TestStep.self)
            try await store.records(TestRecipe.self).save([
                TestRecipe(id: "soup", title: "Soup"), TestRecipe(id: "tea", title: "Tea"),
            ])
            #expect(
                try await steps.save((0..<limit).map { TestStep(id: "s\($0)", recipeID: "soup", text: "x") }) == limit)
            let before = await store.nextMutationSequence
            do {
                try await steps.save(TestStep(id: "one-more", recipeID: "soup", text: "x"))
                Issue.record("the 751st reference must be refused")
            } catch let error as FlatSyncError {
                #expect(error.code == .invalidArgument && error.message.contains("751"), "\(error)")
            }
            #expect(await store.nextMutationSequence == before)
            #expect(await steps.count() == limit)
            // Saving a step again, unchanged in its reference, is no new reference.
            try await steps.save(TestStep(id: "s0", recipeID: "soup", text: "edited"))
            // One step moved to the tea, one deleted: room for two.
            try await steps.save(TestStep(id: "s1", recipeID: "tea", text: "x"))
            try await steps.delete("s2")
            #expect(
                try await steps.save([
                    TestStep(id: "more-1", recipeID: "soup", text: "x"),
                    TestStep(id: "more-2", recipeID: "soup", text: "x"),
                ]) == 2)
            #expect(await store.zones.hostRecords(in: TestRecipe.zone).dependents(of: "soup").count == limit)
        }
    }

    @Test func registrationIsChecked() throws {
        try withTemporaryDirectory { directory in
            for types in [
                [TestRecipe.self, TestRecipe.self], [BadZone.self], [ReservedZone.self], [Grid.self],
                [EncryptedLink.self],
            ] as [[any SyncableRecord.Type]] {
                #expect(throws: FlatSyncError.self) {
                    _ = try LocalStore(directory: directory, options: .init(recordTypes: types))
                }
            }
        }
    }

    @Test func parentsGoBeforeChildren() {
        let zone = ZoneID("Z")
        func record(_ name: String, _ refs: [String]) -> Record {
            Record(
                id: RecordID(zone: zone, name: name), type: "T",
                fields: Dictionary(
                    uniqueKeysWithValues: refs.enumerated().map {
                        (
                            "r\($0.offset)",
                            FieldValue.reference(RecordReference(recordName: $0.element, action: .deleteSelf))
                        )
                    }))
        }
        let ordered = RecordOrder.parentsFirst([
            record("a", ["b"]), record("b", ["c"]), record("c", []), record("d", ["zz"]), record("e", ["e"]),
        ]).map(\.id.name)
        #expect(ordered.firstIndex(of: "c")! < ordered.firstIndex(of: "b")!)
        #expect(ordered.firstIndex(of: "b")! < ordered.firstIndex(of: "a")!)
        #expect(Set(ordered) == ["a", "b", "c", "d", "e"])
    }

    @Test func changesStreamNamesWhatChanged() async throws {
        try await withStore { store in
            let recipes = store.records(TestRecipe.self)
            var changes = recipes.changes().makeAsyncIterator()
            try await recipes.save(TestRecipe(id: "r1", title: "Soup"))
            #expect(await changes.next() == ["r1"])
            try await store.records(TestStep.self).save(TestStep(id: "s1", recipeID: "r1", text: "Chop"))
            try await recipes.delete("r1")
            #expect(await changes.next() == ["r1"], "a step's save is not a recipe's change")
        }
    }
}

private struct Unregistered: SyncableRecord {
    static let zone = ZoneID("Other")
    static let recordType = "Unregistered"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["x": .string]
    var id: String
    init(id: String) { self.id = id }
    var fields: [String: FieldValue] { [:] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) { self.id = id }
}

private struct WrongField: SyncableRecord {
    static let zone = ZoneID("Recipes")
    static let recordType = "Recipe"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["title": .string]
    var id: String
    init(id: String) { self.id = id }
    var fields: [String: FieldValue] { ["title": .int(3)] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) { self.id = id }
}

/// CloudKit's zone names do not start with an underscore (`_defaultZone` is the server's).
private struct ReservedZone: SyncableRecord {
    static let zone = ZoneID("_private")
    static let recordType = "ReservedZone"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["x": .string]
    var id: String
    var fields: [String: FieldValue] { [:] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) { self.id = id }
}

private struct BadZone: SyncableRecord {
    static let zone = ZoneID("no spaces")
    static let recordType = "BadZone"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["x": .string]
    var id: String
    var fields: [String: FieldValue] { [:] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) { self.id = id }
}

private struct Loose: SyncableRecord {
    static let zone = ZoneID("Loose")
    static let recordType = "Loose"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["ref": .reference]
    var id: String
    var reference: RecordReference
    init(id: String, reference: RecordReference) {
        self.id = id
        self.reference = reference
    }
    var fields: [String: FieldValue] { ["ref": .reference(reference)] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        reference = try fields.reference("ref")
    }
}

/// A measurement, whose numbers JSON (and so CloudKit Web Services) must be able to carry.
private struct Measurement: SyncableRecord, Codable {
    static let zone = ZoneID("Measurements")
    static let recordType = "Measurement"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "value": .double, "samples": .list(.double), "taken": .timestamp,
    ]
    var id: String
    var value: Double
    var samples: [Double] = []
    var taken = Date(timeIntervalSinceReferenceDate: 0)
}

/// A type that declares a list of lists, which CloudKit has no type for.
private struct Grid: SyncableRecord, Codable {
    static let zone = ZoneID("Grids")
    static let recordType = "Grid"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["rows": .list(.list(.int64))]
    var id: String
}

/// A type that declares an encrypted reference, which CloudKit cannot encrypt.
private struct EncryptedLink: SyncableRecord, Codable {
    static let zone = ZoneID("Links")
    static let recordType = "Link"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["target": .encrypted(.reference)]
    var id: String
}

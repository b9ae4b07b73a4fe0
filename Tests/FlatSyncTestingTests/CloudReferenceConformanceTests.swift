import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The transport conformance suite, references: what the server does about a record's references when the
// record is saved and when its target is deleted. Each rule and its source are in
// CloudDatabase+References.swift.

@Suite("Cloud conformance: references")
struct CloudReferenceConformanceTests {
    /// A record in `.notes` whose `owner` field refers to `target` with `action`.
    private func child(_ name: String, of target: String, _ action: RecordReference.Action = .deleteSelf) -> Record {
        makeRecord(name, ["owner": .reference(RecordReference(recordName: target, action: action))])
    }

    @Test(arguments: CloudUnderTest.allCases)
    func deletingARecordDeletesWhatItOwnsAndWhatThoseOwn(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.save([makeRecord("car"), makeRecord("bystander")])
            try await cloud.save([
                child("note", of: "car"), child("loose", of: "car", .none), child("reply", of: "note"),
                makeRecord(
                    "tagged",
                    [
                        "owners": .list([
                            .reference(RecordReference(recordName: "bystander", action: .deleteSelf)),
                            .reference(RecordReference(recordName: "car", action: .deleteSelf)),
                        ])
                    ]),
            ])
            let token = try await cloud.currentToken()

            let result = try await cloud.forceDelete(["car"])
            #expect(result.deleted == [recordID("car")], "the response lists the request's own records only")
            #expect(result.failed.isEmpty)

            let left = Set(try await cloud.records(in: .notes).map(\.id.name))
            #expect(left == ["bystander", "loose"], "a `none` reference keeps its record; every owned one went")
            let changes = try await cloud.fetchAll(since: token)
            #expect(changes.deleted == Set(["car", "note", "reply", "tagged"].map { recordID($0) }))
            #expect(changes.changed.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aChildWhoseOwnerIsMissingIsSavedAsCloudKitDocuments(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let orphan = try await cloud.saveOne(child("orphan", of: "never-saved"))
            #expect(orphan.fields["owner"]?.referenceValue?.recordName == "never-saved")
            _ = try await cloud.saveOne(child("loose", of: "never-saved", .none))
            #expect(try await cloud.records(in: .notes).count == 2)

            // The owner arriving later makes the tie real: deleting it cascades.
            _ = try await cloud.saveOne(makeRecord("never-saved"))
            try await cloud.forceDelete(["never-saved"])
            #expect(try await cloud.records(in: .notes).map(\.id.name) == ["loose"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aChildSavedInTheRequestThatDeletesItsOwnerGoesWithIt(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("car"))
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(child("note", of: "car"), policy: .ifServerRecordUnchanged)],
                deleting: [RecordDeletion(recordID("car"), policy: .force)], atomically: false)
            #expect(result.failed.isEmpty)
            #expect(try await cloud.records(in: .notes).isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func anAtomicRequestThatFailsCascadesNothing(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let car = try await cloud.saveOne(makeRecord("car"))
            _ = try await cloud.saveOne(child("note", of: "car"))
            _ = try await cloud.saveOne(car)  // a newer tag, so the stale delete below fails
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(makeRecord("other"), policy: .ifServerRecordUnchanged)],
                deleting: [RecordDeletion(recordID("car"), changeTag: car.changeTag, policy: .ifServerRecordUnchanged)],
                atomically: true)
            #expect(result.failed[recordID("car")]?.code == .serverRecordChanged)
            #expect(Set(try await cloud.records(in: .notes).map(\.id.name)) == ["car", "note"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aReferenceIntoAnotherZoneIsRefusedForThatRecordOnly(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            _ = try await cloud.saveOne(makeRecord("picture", in: .photos))
            let stray = makeRecord(
                "stray", ["owner": .reference(RecordReference(recordName: "picture", zoneName: "Photos"))])
            let same = makeRecord(
                "same", ["owner": .reference(RecordReference(recordName: "kept", zoneName: "Notes"))])
            let result = try await cloud.save([stray, same, makeRecord("kept")])
            #expect(result.failed[recordID("stray")]?.code == .invalidArguments)
            #expect(result.failed.count == 1, "\(result.failed)")
            #expect(Set(try await cloud.records(in: .notes).map(\.id.name)) == ["kept", "same"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aValidatingReferenceNeedsItsTargetAfterTheRequest(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("going"))
            let result = try await cloud.modifyRecords(
                saving: [
                    child("missing", of: "nowhere", .validate), child("together", of: "new", .validate),
                    makeRecord("new"), child("late", of: "going", .validate),
                ].map { RecordSave($0, policy: .ifServerRecordUnchanged) },
                deleting: [RecordDeletion(recordID("going"), policy: .force)], atomically: false)
            #expect(Set(result.failed.keys) == [recordID("missing"), recordID("late")])
            for error in result.failed.values {
                #expect(error.code == .invalidArguments)
                #expect(error.serverErrorCode == "VALIDATING_REFERENCE_ERROR")
            }
            #expect(Set(try await cloud.records(in: .notes).map(\.id.name)) == ["new", "together"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aRecordMayOwnAtMostSevenHundredFiftyRecords(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("car"))
            let limit = CloudDatabase.maximumOwningReferencesPerRecord
            let children = (0..<limit).map { child("note\($0)", of: "car") }
            for start in stride(from: 0, to: limit, by: 150) {
                let result = try await cloud.save(Array(children[start..<min(start + 150, limit)]))
                #expect(result.failed.isEmpty)
            }
            let over = try await cloud.save([child("one-too-many", of: "car"), child("elsewhere", of: "note0")])
            #expect(over.failed[recordID("one-too-many")]?.code == kind.seen(.limitExceeded))
            #expect(over.failed.count == 1)
            // Saving an owned record again does not count it twice.
            _ = try await cloud.saveOne(children[0], policy: .allKeys)
            try await cloud.forceDelete(["car"])
            #expect(try await cloud.records(in: .notes).isEmpty, "all 750 and the one they own went with it")
        }
    }
}

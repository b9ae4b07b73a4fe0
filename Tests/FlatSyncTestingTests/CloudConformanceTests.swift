import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The transport conformance suite, part 1: zones, change tags, save and delete policies, atomic and
// non-atomic modifies, lookups and malformed requests. Every test runs against every `CloudUnderTest`.
// Changes and tokens are in CloudChangesConformanceTests, counters and faults in
// CloudFaultConformanceTests.

@Suite("Cloud conformance: records and zones")
struct CloudConformanceTests {
    // MARK: - Zones

    @Test(arguments: CloudUnderTest.allCases)
    func createListAndDeleteZones(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            #expect(try await cloud.listZones() == [])
            try await cloud.createZones([.photos, .notes])
            try await cloud.createZones([.notes])  // creating an existing zone is not an error
            #expect(try await cloud.listZones() == [.notes, .photos])

            _ = try await cloud.saveOne(makeRecord("a"))
            try await cloud.createZones([.notes])
            #expect(try await cloud.records(in: .notes).map(\.id.name) == ["a"], "re-creating kept the records")

            try await cloud.deleteZones([.notes])
            #expect(try await cloud.listZones() == [.photos])
            #expect(try await cloud.records(in: .notes) == [])
            try await cloud.deleteZones([.notes])  // deleting a missing zone does nothing

            try await cloud.createZones([.notes])
            #expect(try await cloud.records(in: .notes) == [], "a zone created again starts empty")
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func emptyZoneNamesAreInvalid(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            await expectCloudError(.invalidArguments) { try await cloud.createZones([.notes, ZoneID("")]) }
            let zones = try await cloud.listZones()
            #expect(zones == [], "nothing was created")
            await expectCloudError(.invalidArguments) { try await cloud.deleteZones([ZoneID("")]) }
        }
    }

    // MARK: - Change tags and save policies

    @Test(arguments: CloudUnderTest.allCases)
    func everySaveGetsANewServerAssignedTag(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            var tags: [ChangeTag] = []
            var current = try await cloud.saveOne(makeRecord("a"))
            tags.append(try #require(current.changeTag))
            for value in 1...3 {
                current["value"] = .string("\(value)")
                current = try await cloud.saveOne(current)
                tags.append(try #require(current.changeTag))
            }
            let other = try await cloud.saveOne(makeRecord("a", in: .photos))
            tags.append(try #require(other.changeTag))
            #expect(Set(tags).count == tags.count, "tags repeat: \(tags)")
            #expect(current["value"] == .string("3"))
            #expect(try await cloud.records(in: .notes) == [current], "the server holds what it returned")
        }
    }

    /// A development environment creates a field when a record first carries it, and refuses a value of
    /// another type later, record by record ("Invalid value, expected type …", MistKit #375; that
    /// development keeps the type is an inference). New fields, and the type's other records, go on.
    @Test(arguments: CloudUnderTest.allCases)
    func developmentFixesAFieldsTypeOnItsFirstSave(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("a", ["count": .int(1), "tags": .list([])]))
            let result = try await cloud.save([
                makeRecord("b", ["count": .string("one")]),
                makeRecord("c", ["count": .int(2), "title": .string("new field")]),
                makeRecord("d", ["tags": .list([.string("first element")])]),
            ])
            let refusal = try #require(result.failed[recordID("b")])
            #expect(refusal.code == .invalidArguments)
            #expect(refusal.message.contains("expected type INT64"), "\(refusal.message)")
            #expect(result.saved.keys.map(\.name).sorted() == ["c", "d"], "an empty list fixed no element type")
            let again = try await cloud.save([makeRecord("e", ["tags": .list([.int(1)])])])
            #expect(again.failed[recordID("e")]?.message.contains("expected type STRING_LIST") == true)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func ifUnchangedWithNilTagCreatesButRefusesAnExistingRecord(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let saved = try await cloud.saveOne(makeRecord("a", ["value": .int(1)]))
            let result = try await cloud.save([makeRecord("a", ["value": .int(2)])])
            let error = try #require(result.failed[recordID("a")])
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord == saved)
            #expect(result.saved.isEmpty)
            #expect(try await cloud.records(in: .notes) == [saved])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func ifUnchangedWithAStaleTagFailsWithTheServerRecord(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a", ["value": .int(1)]))
            var second = first
            second["value"] = .int(2)
            second = try await cloud.saveOne(second)

            var stale = first
            stale["value"] = .int(3)
            let result = try await cloud.save([stale])
            let error = try #require(result.failed[recordID("a")])
            #expect(error.code == .serverRecordChanged)
            #expect(error.serverRecord == second)
            #expect(try await cloud.records(in: .notes) == [second])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func ifUnchangedWithTheCurrentTagChangesOnlyTheFieldsSent(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a", ["change": .int(1), "other": .int(2)]))
            let update = makeRecord("a", ["change": .int(10), "new": .string("n")], tag: first.changeTag)
            let saved = try await cloud.saveOne(update)
            #expect(
                saved.fields == ["change": .int(10), "other": .int(2), "new": .string("n")],
                "a field not sent keeps its value (another client's, say)")
            #expect(saved.changeTag != first.changeTag)
            #expect(try await cloud.records(in: .notes).first?.fields == saved.fields)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func replaceIfUnchangedWithTheCurrentTagReplacesEveryField(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a", ["keep": .int(1), "drop": .int(2)]))
            let replacement = makeRecord("a", ["keep": .int(10)], tag: first.changeTag)
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(replacement, policy: .replaceIfServerRecordUnchanged)], deleting: [],
                atomically: true)
            let saved = try #require(result.saved[replacement.id])
            #expect(saved.fields == ["keep": .int(10)], "fields not sent are gone")
            let stale = try await cloud.modifyRecords(
                saving: [RecordSave(replacement, policy: .replaceIfServerRecordUnchanged)], deleting: [],
                atomically: true)
            #expect(stale.failed[replacement.id]?.code == .serverRecordChanged, "the tag is checked")
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func ifUnchangedWithATagForAMissingRecordIsUnknownItem(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let never = try await cloud.save([makeRecord("never", tag: ChangeTag("1.abc"))])
            #expect(never.failed[recordID("never")]?.code == .unknownItem)

            let saved = try await cloud.saveOne(makeRecord("gone"))
            try await cloud.forceDelete(["gone"])
            let gone = try await cloud.save([saved])
            #expect(gone.failed[recordID("gone")]?.code == .unknownItem)
            #expect(try await cloud.records(in: .notes) == [])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func changedKeysMergesFieldsWhateverTheTag(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a", ["a": .int(1), "b": .int(2)]))
            _ = try await cloud.saveOne(makeRecord("a", ["a": .int(5)], tag: first.changeTag))  // moves the tag on

            let stale = makeRecord("a", ["b": .int(7), "c": .int(3)], tag: first.changeTag)
            let merged = try await cloud.saveOne(stale, policy: .changedKeys)
            #expect(merged.fields == ["a": .int(5), "b": .int(7), "c": .int(3)])

            let created = try await cloud.saveOne(makeRecord("fresh", ["x": .int(1)]), policy: .changedKeys)
            #expect(created.fields == ["x": .int(1)], "changedKeys creates a missing record")
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func allKeysReplacesWhateverTheTag(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a", ["a": .int(1), "b": .int(2)]))
            _ = try await cloud.saveOne(makeRecord("a", ["a": .int(5)], tag: first.changeTag))

            let stale = makeRecord("a", ["c": .int(3)], tag: first.changeTag)
            let replaced = try await cloud.saveOne(stale, policy: .allKeys)
            #expect(replaced.fields == ["c": .int(3)])

            let created = try await cloud.saveOne(
                makeRecord("fresh", ["x": .int(1)], tag: ChangeTag("9.zz")), policy: .allKeys)
            #expect(created.fields == ["x": .int(1)], "allKeys creates a missing record, even with a tag")
            #expect(try await cloud.records(in: .notes).count == 2)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func savedFieldValuesRoundTripExactly(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            // Dates at the millisecond, the precision CloudKit keeps (a TIMESTAMP is whole milliseconds).
            let fields: [String: FieldValue] = [
                "text": .string("héllo 👋\n\u{0}"), "empty": .string(""), "min": .int(.min), "max": .int(.max),
                "date": .date(Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7).roundedToMilliseconds),
                "epoch": .date(Date(timeIntervalSince1970: 0)), "before1970": .date(Date(timeIntervalSince1970: -1.5)),
                "double": .double(-0.1), "bytes": .bytes(Data([0, 0xFF, 0x80])), "emptyBytes": .bytes(Data()),
                "list": .list([.string("a"), .string("")]),
                "dates": .list([.date(Date(timeIntervalSince1970: 86_400))]),
            ]
            let saved = try await cloud.saveOne(makeRecord("a", fields))
            #expect(saved.fields == fields)
            #expect(try await cloud.records(in: .notes).first?.fields == fields)
            #expect(try await cloud.lookupRecords([recordID("a")])[recordID("a")]?.fields == fields)
        }
    }

    // MARK: - Delete policies

    @Test(arguments: CloudUnderTest.allCases)
    func deleteIfUnchangedNeedsTheCurrentTag(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a"))
            let current = try await cloud.saveOne(first)

            for sent in [first.changeTag, nil] {
                let result = try await cloud.delete([RecordDeletion(recordID("a"), changeTag: sent)])
                let error = try #require(result.failed[recordID("a")], "tag \(String(describing: sent))")
                #expect(error.code == .serverRecordChanged)
                #expect(error.serverRecord == current)
                #expect(result.deleted.isEmpty)
            }
            #expect(try await cloud.records(in: .notes) == [current])

            let result = try await cloud.delete([RecordDeletion(recordID("a"), changeTag: current.changeTag)])
            #expect(result.deleted == [recordID("a")])
            #expect(result.failed.isEmpty)
            #expect(try await cloud.records(in: .notes) == [])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func forceDeleteIgnoresTheTag(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let first = try await cloud.saveOne(makeRecord("a"))
            _ = try await cloud.saveOne(first)
            let result = try await cloud.delete([
                RecordDeletion(recordID("a"), changeTag: first.changeTag, policy: .force)
            ])
            #expect(result.deleted == [recordID("a")])
            #expect(try await cloud.records(in: .notes) == [])
        }
    }

    @Test(arguments: CloudUnderTest.allCases, DeletePolicy.allCases)
    func deletingAMissingRecordSucceeds(_ kind: CloudUnderTest, _ policy: DeletePolicy) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let result = try await cloud.delete([
                RecordDeletion(recordID("never"), policy: policy),
                RecordDeletion(recordID("tagged"), changeTag: ChangeTag("3.abc"), policy: policy),
            ])
            #expect(result.deleted == [recordID("never"), recordID("tagged")])
            #expect(result.failed.isEmpty)
            #expect(try await cloud.counters().recordsDeleted == 0, "nothing was removed")
        }
    }

    // MARK: - Atomic and non-atomic requests

    @Test(arguments: CloudUnderTest.allCases)
    func anAtomicRequestWithAFailureAppliesNothing(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let existing = try await cloud.saveOne(makeRecord("existing"))
            let doomed = try await cloud.saveOne(makeRecord("doomed"))
            let before = try await cloud.records(in: .notes)

            let result = try await cloud.modifyRecords(
                saving: [RecordSave(makeRecord("new")), RecordSave(makeRecord("existing"))],  // nil tag: conflict
                deleting: [RecordDeletion(doomed.id, changeTag: doomed.changeTag)],
                atomically: true
            )
            #expect(result.saved.isEmpty)
            #expect(result.deleted.isEmpty)
            #expect(result.failed[existing.id]?.code == .serverRecordChanged)
            #expect(result.failed[existing.id]?.serverRecord == existing)
            #expect(result.failed[recordID("new")]?.code == .batchRequestFailed)
            #expect(result.failed[doomed.id]?.code == .batchRequestFailed)
            #expect(result.partialFailure?.code == .partialFailure)
            #expect(try await cloud.records(in: .notes) == before)
            #expect(try await cloud.counters().recordsSaved == 2)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func anAtomicRequestWithoutFailuresAppliesEverything(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            let doomed = try await cloud.saveOne(makeRecord("doomed"))
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(makeRecord("a")), RecordSave(makeRecord("b", in: .photos))],
                deleting: [RecordDeletion(doomed.id, changeTag: doomed.changeTag)],
                atomically: true
            )
            #expect(result.failed.isEmpty)
            #expect(Set(result.saved.keys) == [recordID("a"), recordID("b", in: .photos)])
            #expect(result.deleted == [doomed.id])
            #expect(try await cloud.records(in: .notes).map(\.id.name) == ["a"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aNonAtomicRequestAppliesWhatItCan(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let existing = try await cloud.saveOne(makeRecord("existing"))
            let doomed = try await cloud.saveOne(makeRecord("doomed"))
            let result = try await cloud.modifyRecords(
                saving: [
                    RecordSave(makeRecord("new")), RecordSave(makeRecord("existing")),
                    RecordSave(makeRecord("x", in: .photos)),
                ],
                deleting: [RecordDeletion(doomed.id, changeTag: doomed.changeTag)],
                atomically: false
            )
            #expect(Set(result.saved.keys) == [recordID("new")])
            #expect(result.deleted == [doomed.id])
            #expect(result.failed[existing.id]?.code == .serverRecordChanged)
            #expect(result.failed[recordID("x", in: .photos)]?.code == .zoneNotFound)
            #expect(result.failed.count == 2)
            #expect(try await cloud.records(in: .notes).map(\.id.name) == ["existing", "new"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func recordsInAMissingZoneFailWithZoneNotFound(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(makeRecord("a")), RecordSave(makeRecord("b", in: .photos))],
                deleting: [RecordDeletion(recordID("c", in: .photos), policy: .force)],
                atomically: false
            )
            #expect(result.failed[recordID("b", in: .photos)]?.code == .zoneNotFound)
            #expect(result.failed[recordID("c", in: .photos)]?.code == .zoneNotFound)
            #expect(Set(result.saved.keys) == [recordID("a")])
            #expect(try await cloud.listZones() == [.notes], "a save does not create its zone")
        }
    }

    // MARK: - Lookup

    @Test(arguments: CloudUnderTest.allCases)
    func lookupReturnsOnlyRecordsThatExist(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let a = try await cloud.saveOne(makeRecord("a"))
            let b = try await cloud.saveOne(makeRecord("b"))
            _ = try await cloud.saveOne(makeRecord("deleted"))
            try await cloud.forceDelete(["deleted"])
            try await cloud.resetCounters()

            let found = try await cloud.lookupRecords([
                a.id, b.id, recordID("deleted"), recordID("never"), recordID("a", in: .photos),
            ])
            #expect(found == [a.id: a, b.id: b])
            #expect(try await cloud.lookupRecords([]) == [:])
            #expect(try await cloud.counters().recordsReturned == 2)
            await expectCloudError(.invalidArguments) { _ = try await cloud.lookupRecords([recordID("")]) }
        }
    }

    // MARK: - Malformed requests

    /// Requests the server refuses whole, changing nothing.
    enum BadRequest: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case emptyRecordName, emptyNameInDelete, emptyZoneName, emptyRecordType
        case duplicateSave, duplicateSaveAndDelete, duplicateDelete
        case tooManyOperations, recordOverOneMegabyte

        var testDescription: String { rawValue }

        /// True when `kind`'s client refuses the request without sending it (the CKWS transport does for
        /// anything the server could misread: an empty name would make CloudKit invent one or use its
        /// default zone), so the server never counts it.
        func isRefusedBeforeSending(by kind: CloudUnderTest) -> Bool {
            kind.refusesMalformedRequests && self != .recordOverOneMegabyte
        }

        var expectedCode: CloudError.Code {
            switch self {
            case .tooManyOperations, .recordOverOneMegabyte: return .limitExceeded
            default: return .invalidArguments
            }
        }

        /// The request: each one also carries a valid save and a valid delete that must not happen.
        var request: (saves: [RecordSave], deletes: [RecordDeletion]) {
            let valid = RecordSave(makeRecord("valid"))
            let doomed = RecordDeletion(recordID("existing"), policy: .force)
            switch self {
            case .emptyRecordName:
                return ([valid, RecordSave(makeRecord(""))], [doomed])
            case .emptyNameInDelete:
                return ([valid], [doomed, RecordDeletion(recordID(""), policy: .force)])
            case .emptyZoneName:
                return ([valid, RecordSave(makeRecord("x", in: ZoneID("")))], [doomed])
            case .emptyRecordType:
                var untyped = makeRecord("untyped")
                untyped.type = ""
                return ([valid, RecordSave(untyped)], [doomed])
            case .duplicateSave:
                return ([valid, RecordSave(makeRecord("twice")), RecordSave(makeRecord("twice"))], [doomed])
            case .duplicateSaveAndDelete:
                return (
                    [valid, RecordSave(makeRecord("twice"))],
                    [doomed, RecordDeletion(recordID("twice"), policy: .force)]
                )
            case .duplicateDelete:
                return ([valid], [doomed, doomed])
            case .tooManyOperations:
                let saves = (0..<300).map { RecordSave(makeRecord("r\($0)")) }
                return (
                    [valid] + saves, [doomed] + (0..<100).map { RecordDeletion(recordID("d\($0)"), policy: .force) }
                )
            case .recordOverOneMegabyte:
                let large = makeRecord("large", ["blob": .string(String(repeating: "x", count: 1_048_577))])
                return ([valid, RecordSave(large)], [doomed])
            }
        }
    }

    @Test(arguments: CloudUnderTest.allCases, BadRequest.allCases)
    func aMalformedRequestChangesNothing(_ kind: CloudUnderTest, _ bad: BadRequest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("existing"))
            let token = try await cloud.currentToken()
            let before = try await cloud.records(in: .notes)
            let countersBefore = try await cloud.counters()

            let (saves, deletes) = bad.request
            for atomically in [true, false] {
                await expectCloudError(
                    bad.isRefusedBeforeSending(by: kind) ? bad.expectedCode : kind.seen(bad.expectedCode)
                ) {
                    _ = try await cloud.modifyRecords(saving: saves, deleting: deletes, atomically: atomically)
                }
            }
            #expect(try await cloud.records(in: .notes) == before)
            let counters = try await cloud.counters()
            #expect(counters.recordsSaved == countersBefore.recordsSaved)
            #expect(counters.recordsDeleted == countersBefore.recordsDeleted)
            let sent = bad.isRefusedBeforeSending(by: kind) ? 0 : 2
            #expect(counters.modifyRequests == countersBefore.modifyRequests + sent, "refused requests still count")
            let changes = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 100)
            #expect(changes.changedRecords.isEmpty && changes.deletedRecordIDs.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func exactlyTheLimitsAreAccepted(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            // 400 for CloudKit.framework-style servers, 200 for CloudKit Web Services.
            let limit = cloud.maximumOperationsPerRequest
            #expect(limit == kind.operationLimit)
            let saves = (0..<limit * 3 / 4).map { RecordSave(makeRecord("r\($0)")) }
            let deletes = (0..<limit / 4).map { RecordDeletion(recordID("d\($0)"), policy: .force) }
            let result = try await cloud.modifyRecords(saving: saves, deleting: deletes, atomically: true)
            #expect(result.saved.count == limit * 3 / 4)
            #expect(result.deleted.count == limit / 4)

            // Exactly 1 MB by Record.approximateSize: name "big" + type "Note" + key "blob" + the string.
            let size = 1_048_576 - "big".utf8.count - "Note".utf8.count - "blob".utf8.count
            let big = makeRecord("big", ["blob": .string(String(repeating: "y", count: size))])
            #expect(big.approximateSize == 1_048_576)
            _ = try await cloud.saveOne(big)
        }
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// A `Codable` host type: its fields come from its conformance, not from a hand-written mapping.
private struct CodableBookmark: SyncableRecord, Codable {
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Bookmark"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "url": .string, "visits": .int64, "starred": .int64, "added": .timestamp, "tags": .list(.string),
        "note": .string, "thumbnail": .bytes, "rating": .double, "folder": .reference,
    ]

    var id: String
    var url: String
    var visits: Int
    var starred: Bool
    var added: Date
    var tags: [String]
    var note: String?
    var thumbnail: Data?
    var rating: Double
    var folder: RecordReference?
}

/// A `Codable` type with a property no CloudKit field type holds.
private struct Nested: SyncableRecord, Codable {
    struct Point: Codable, Equatable {
        var x = 0
        var y = 0
    }
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Nested"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["point": .string]
    var id: String
    var point = Point()
}

@Suite struct CodableRecordTests {
    private let bookmark = CodableBookmark(
        id: "b1", url: "https://example.com", visits: 3, starred: true,
        added: Date(timeIntervalSince1970: 1_700_000_000),
        tags: ["swift", "sync"], note: nil, thumbnail: Data([1, 2, 3]), rating: 4.5,
        folder: CodableBookmark.reference(to: "f1"))

    @Test func aCodableValueIsItsPropertiesAsFieldsAndBack() throws {
        let fields = try bookmark.fields
        #expect(
            fields == [
                "url": .string("https://example.com"), "visits": .int(3), "starred": .int(1),
                "added": .date(Date(timeIntervalSince1970: 1_700_000_000)),
                "tags": .list([.string("swift"), .string("sync")]), "thumbnail": .bytes(Data([1, 2, 3])),
                "rating": .double(4.5), "folder": .reference(RecordReference(recordName: "f1")),
            ], "no `id`, and no field for a nil optional")
        let back = try CodableBookmark(id: "b1", fields: RecordFields(fields, recordName: "b1"))
        #expect(back == bookmark)
        // CloudKit drops an empty list: a missing list field reads as an empty one.
        var bare = fields
        bare["tags"] = nil
        #expect(try CodableBookmark(id: "b1", fields: RecordFields(bare, recordName: "b1")).tags == [])
    }

    @Test func aFieldOfTheWrongTypeIsAMalformedRecord() {
        var fields = (try? bookmark.fields) ?? [:]
        fields["visits"] = .string("three")
        #expect {
            _ = try CodableBookmark(id: "b1", fields: RecordFields(fields, recordName: "b1"))
        } throws: { ($0 as? FlatSyncError)?.code == .malformedRecord }
        fields["visits"] = nil
        #expect { _ = try CodableBookmark(id: "b1", fields: RecordFields(fields, recordName: "b1")) } throws: {
            ($0 as? FlatSyncError)?.message.contains("visits") == true
        }
    }

    @Test func aCodableStoreSavesSyncsAndRefusesWhatCloudKitCannotHold() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A") { $0.recordTypes = [CodableBookmark.self, Nested.self] }
            #expect(try await a.records(CodableBookmark.self).save(bookmark))
            var changed = bookmark
            changed.visits = 4
            try await a.records(CodableBookmark.self).save(changed)
            // Still one pending create, naming every field the value has (a nil optional has none).
            #expect(
                await a.localStore.pendingChange(for: CodableBookmark.recordID("b1"))?.changedKeys
                    == Set(try changed.fields.keys))
            #expect(await a.localStore.pendingRecordCount() == 1)
            do {
                try await a.records(Nested.self).save(Nested(id: "n"))
                Issue.record("a nested struct must be refused")
            } catch let error as FlatSyncError {
                #expect(error.code == .invalidArgument)
                #expect(error.message.contains("point"))
            }
            #expect(try await a.syncNow().isComplete)
            let b = try await harness.device("B") { $0.recordTypes = [CodableBookmark.self, Nested.self] }
            #expect(await b.records(CodableBookmark.self).value("b1") == changed)
            try await a.close()
            try await b.close()
        }
    }
}

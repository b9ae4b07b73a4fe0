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

/// A `Codable` type with properties of types no CloudKit field holds: each is stored as its JSON, or as the
/// string or integer it encodes as.
private struct Recipe: SyncableRecord, Codable {
    struct Ingredient: Codable, Equatable {
        var name: String
        var grams: Double
        var optional: Bool?
    }
    enum Course: String, Codable { case starter, main, dessert }
    enum Spice: Int, Codable { case mild = 1, hot = 3 }
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Recipe"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "ingredients": .bytes, "course": .string, "spice": .int64, "source": .string, "ratings": .bytes,
        "nested": .bytes, "courses": .bytes, "labels": .list(.string),
    ]
    var id: String
    var ingredients: [Ingredient] = []
    var course = Course.main
    var spice: Spice? = nil
    var source = URL(string: "https://example.com/soup")!
    var ratings: [String: Int] = [:]
    var nested: Ingredient? = nil
    var courses: [Course] = []
    var labels: Set<String> = []
}

/// A type whose nested value is declared as a string, and one that JSON cannot hold when it is NaN: the save
/// is refused before anything is written.
private struct Nested: SyncableRecord, Codable {
    struct Point: Codable, Equatable {
        var x = 0
        var y = 0
    }
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Nested"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["point": .string, "scale": .bytes]
    var id: String
    var point = Point()
    var scale: Scale? = nil

    struct Scale: Codable, Equatable { var factor: Double }
}

/// A `Codable` type whose optional `due` its field types forget.
private struct UndeclaredDue: SyncableRecord, Codable {
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Reminder"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["title": .string]

    var id: String
    var title: String
    var due: Date?
}

/// A `Codable` type whose optional 128-bit `total` its field types forget: `Int128?` has its own
/// `encodeIfPresent` requirement (Swift 6), whose default skips a nil without a word.
private struct UndeclaredTotal: SyncableRecord, Codable {
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Ledger"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["title": .string]

    var id: String
    var title: String
    var total: Int128?
}

/// A `Codable` type whose optional `due` its field types forget, with two declared fields, as changes an older
/// FlatSync logged for it (before an undeclared nil property was refused) come back to be merged.
private struct LegacyReminder: SyncableRecord, Codable {
    static let zone = ZoneID("Bookmarks")
    static let recordType = "LegacyReminder"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["title": .string, "note": .string]

    var id: String
    var title: String
    var note: String
    var due: Date?

    /// Saves `fields` of record r1 as a mutation logged without today's check, as an older FlatSync did.
    static func logSave(_ fields: [String: FieldValue], on device: SyncContext) async throws {
        let record = Record(id: recordID("r1"), type: recordType, fields: fields)
        _ = try await device.localStore.applyDurably { store in
            try store.applyHostMutation(in: zone, saves: [record], deletes: [:])
        }
    }
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

    @Test func propertiesOfOtherTypesAreTheirJSONAndBack() throws {
        let recipe = Recipe(
            id: "soup",
            ingredients: [.init(name: "leek", grams: 250.5), .init(name: "salt", grams: 2, optional: true)],
            course: .starter, spice: .hot, ratings: ["ann": 5, "bob": 3], nested: .init(name: "x", grams: -1),
            courses: [.main, .dessert], labels: ["winter", "quick", "vegan", "cheap"])
        let fields = try recipe.fields
        #expect(fields["labels"] == .list(["cheap", "quick", "vegan", "winter"].map(FieldValue.string)), "sorted")
        #expect(fields["course"] == .string("starter") && fields["spice"] == .int(3))
        #expect(fields["source"] == .string("https://example.com/soup"))
        #expect(
            fields["ratings"] == .bytes(Data(#"{"ann":5,"bob":3}"#.utf8)), "JSON with sorted keys, the same every time")
        #expect(fields["courses"] == .bytes(Data(#"["main","dessert"]"#.utf8)))
        guard case .bytes = fields["ingredients"] else {
            Issue.record("ingredients as \(String(describing: fields["ingredients"]))")
            return
        }
        #expect(try recipe.fields == fields, "encoding again gives equal fields")
        #expect(try Recipe(id: "soup", fields: RecordFields(fields, recordName: "soup")) == recipe)
        // Left out when nil; defaults read back.
        let plain = Recipe(id: "plain")
        #expect(try plain.fields["spice"] == nil && plain.fields["nested"] == nil)
        #expect(try Recipe(id: "plain", fields: RecordFields(plain.fields, recordName: "plain")) == plain)

        // Bytes that are not the type's JSON, or a value that is not a case, are a malformed record.
        for (key, value) in [
            ("ingredients", FieldValue.bytes(Data("[{}]".utf8))), ("course", .string("brunch")),
            ("spice", .int(2)), ("ratings", .string("many")),
        ] {
            var broken = fields
            broken[key] = value
            #expect {
                _ = try Recipe(id: "soup", fields: RecordFields(broken, recordName: "soup"))
            } throws: { error in
                (error as? FlatSyncError)?.code == .malformedRecord && "\(error)".contains(key)
            }
        }
    }

    @Test func aValueWithNestedPropertiesSyncsWhole() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A") { $0.recordTypes = [Recipe.self] }
            var soup = Recipe(
                id: "soup", ingredients: [.init(name: "leek", grams: 250)], spice: .mild, ratings: ["ann": 4])
            try await a.records(Recipe.self).save(soup)
            #expect(try await a.syncNow().isComplete)
            let b = try await harness.device("B") { $0.recordTypes = [Recipe.self] }
            #expect(await b.records(Recipe.self).value("soup") == soup)
            // Saving an equal value changes nothing: the same JSON, so no field differs.
            #expect(try await !a.records(Recipe.self).save(soup))
            soup.ingredients.append(.init(name: "salt", grams: 2, optional: true))
            try await b.records(Recipe.self).save(soup)
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(await a.records(Recipe.self).value("soup") == soup)
            try await a.close()
            try await b.close()
        }
    }

    /// As above for an `Int128?` (and `UInt128?`), whose `encodeIfPresent` is a requirement of its own: the
    /// nil save passed, and the first with a value was refused.
    @Test func anUndeclaredOptional128BitPropertyIsRefusedWhileItIsNil() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false) { $0.recordTypes = [UndeclaredTotal.self] }
            for value in [
                UndeclaredTotal(id: "r1", title: "Rent"), UndeclaredTotal(id: "r1", title: "Rent", total: 12),
            ] {
                do {
                    try await a.records(UndeclaredTotal.self).save(value)
                    Issue.record("\(value) must be refused")
                } catch let error as FlatSyncError {
                    #expect(error.code == .invalidArgument)
                    #expect(error.message.contains("total"), "\(error)")
                }
            }
            #expect(await a.records(UndeclaredTotal.self).count() == 0)
            try await a.close()
        }
    }

    /// An optional property its type's `fieldTypes` do not declare is refused on the first save, nil or not,
    /// not on the first save where it holds a value (found by a newcomer, in production that would be).
    @Test func anUndeclaredOptionalPropertyIsRefusedWhileItIsNil() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false) { $0.recordTypes = [UndeclaredDue.self] }
            for value in [
                UndeclaredDue(id: "r1", title: "Call back"), UndeclaredDue(id: "r1", title: "Call back", due: .now),
            ] {
                do {
                    try await a.records(UndeclaredDue.self).save(value)
                    Issue.record("\(value) must be refused")
                } catch let error as FlatSyncError {
                    #expect(error.code == .invalidArgument)
                    #expect(error.message.contains("due"), "\(error)")
                }
            }
            #expect(await a.localStore.pendingRecordCount() == 0)
            #expect(await a.records(UndeclaredDue.self).count() == 0)
            try await a.close()
        }
    }

    /// A change logged for such a type before that check, meeting another device's edit of another field: the
    /// merged value no longer encodes, so the merge falls back to the record's fields, keeping this device's
    /// changed field (it used to give way to the server's version whole, losing the acknowledged edit).
    @Test func aLoggedChangeOfATypeThatNoLongerEncodesKeepsItsFieldsInAMerge() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false) { $0.recordTypes = [LegacyReminder.self] }
            let b = try await harness.device("B", start: false) { $0.recordTypes = [LegacyReminder.self] }
            try await LegacyReminder.logSave(["title": .string("Call"), "note": .string("-")], on: a)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            try await LegacyReminder.logSave(["title": .string("Call back"), "note": .string("-")], on: a)
            try await LegacyReminder.logSave(["title": .string("Call"), "note": .string("after 5")], on: b)
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            for device in [a, b] {
                let value = await device.records(LegacyReminder.self).value("r1")
                #expect(value?.title == "Call back", "A's edit is kept")
                #expect(value?.note == "after 5", "B's edit is kept")
                try await device.close()
            }
        }
    }

    @Test func aCodableStoreSavesSyncsAndRefusesWhatCloudKitCannotHold() async throws {
        try await SyncHarness.run { harness in
            // Not started until the saves are checked: a started device sends the first save at once, and the
            // second would race it into a command of its own.
            let a = try await harness.device("A", start: false) {
                $0.recordTypes = [CodableBookmark.self, Nested.self]
            }
            #expect(try await a.records(CodableBookmark.self).save(bookmark))
            var changed = bookmark
            changed.visits = 4
            try await a.records(CodableBookmark.self).save(changed)
            // Still one pending create, naming every field the value has (a nil optional has none).
            #expect(
                await a.localStore.pendingChange(for: CodableBookmark.recordID("b1"))?.changedKeys
                    == Set(try changed.fields.keys))
            #expect(await a.localStore.pendingRecordCount() == 1)
            // Declared as a string, held as bytes; and a value JSON cannot hold (NaN): refused, nothing written.
            for (nested, field) in [(Nested(id: "n"), "point"), (Nested(id: "n", scale: .init(factor: .nan)), "scale")]
            {
                do {
                    try await a.records(Nested.self).save(nested)
                    Issue.record("\(nested) must be refused")
                } catch let error as FlatSyncError {
                    #expect(error.code == .invalidArgument)
                    #expect(error.message.contains(field), "\(error)")
                }
            }
            #expect(await a.localStore.pendingRecordCount() == 1)
            try await a.start()
            #expect(try await a.syncNow().isComplete)
            let b = try await harness.device("B") { $0.recordTypes = [CodableBookmark.self, Nested.self] }
            #expect(await b.records(CodableBookmark.self).value("b1") == changed)
            try await a.close()
            try await b.close()
        }
    }
}

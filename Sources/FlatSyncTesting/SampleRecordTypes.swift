import FlatSync
import Foundation

// Host-defined record types for the package's own tests, crash children and benchmarks (package access:
// not part of the testing product's API).

/// A note on a saved article, in the reading list's zone: deleting the entry deletes the note.
package struct TestNote: SyncableRecord {
    package static let zone = ZoneID.readingList
    package static let recordType = "TestNote"
    package static let fieldTypes: [String: CloudSchema.FieldType] = [
        "article": .reference, "text": .string, "created": .timestamp, "tags": .list(.string), "pinned": .int64,
    ]

    package var id: String
    package var articleID: String
    package var text: String
    package var created = Date(timeIntervalSince1970: 1_700_000_000)
    package var tags: [String] = []
    package var pinned = false

    package init(id: String, articleID: String, text: String, tags: [String] = [], pinned: Bool = false) {
        self.id = id
        self.articleID = articleID
        self.text = text
        self.tags = tags
        self.pinned = pinned
    }

    package var fields: [String: FieldValue] {
        var fields: [String: FieldValue] = [
            "article": .reference(ReadingListEntry.reference(to: articleID, action: .deleteSelf)),
            "text": .string(text), "created": .date(created), "pinned": .int(pinned ? 1 : 0),
        ]
        if !tags.isEmpty { fields["tags"] = .list(tags.map(FieldValue.string)) }
        return fields
    }

    package init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        articleID = try ReadingListEntry.articleID(from: fields.reference("article"))
        text = try fields.string("text")
        created = try fields.date("created")
        tags = try fields.list("tags").compactMap(\.stringValue)
        pinned = try fields.optional("pinned", RecordFields.bool) ?? false
    }
}

/// A recipe in a zone of its own.
package struct TestRecipe: SyncableRecord {
    package static let zone = ZoneID("Recipes")
    package static let recordType = "Recipe"
    package static let fieldTypes: [String: CloudSchema.FieldType] = ["title": .string, "servings": .int64]

    package var id: String
    package var title: String
    package var servings: Int64 = 2

    package init(id: String, title: String, servings: Int64 = 2) {
        self.id = id
        self.title = title
        self.servings = servings
    }

    package var fields: [String: FieldValue] { ["title": .string(title), "servings": .int(servings)] }

    package init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        title = try fields.string("title")
        servings = try fields.int("servings")
    }
}

/// A step of a recipe, owned by it; a step may also refer to the step before it without owning it.
package struct TestStep: SyncableRecord {
    package static let zone = ZoneID("Recipes")
    package static let recordType = "Step"
    package static let fieldTypes: [String: CloudSchema.FieldType] = [
        "recipe": .reference, "text": .string, "after": .reference,
    ]

    package var id: String
    package var recipeID: String
    package var text: String
    package var after: String?

    package init(id: String, recipeID: String, text: String, after: String? = nil) {
        self.id = id
        self.recipeID = recipeID
        self.text = text
        self.after = after
    }

    package var fields: [String: FieldValue] {
        var fields: [String: FieldValue] = [
            "recipe": .reference(TestRecipe.reference(to: recipeID, action: .deleteSelf)), "text": .string(text),
        ]
        if let after { fields["after"] = .reference(TestStep.reference(to: after)) }
        return fields
    }

    package init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        recipeID = try fields.reference("recipe").recordName
        text = try fields.string("text")
        after = try fields.optional("after", RecordFields.reference)?.recordName
    }
}

/// Every host type the tests register.
package let testRecordTypes: [any SyncableRecord.Type] = [TestNote.self, TestRecipe.self, TestStep.self]

/// A photo whose image is an asset, in a zone of its own.
package struct TestPhoto: SyncableRecord, Codable {
    package static let zone = ZoneID("Photos")
    package static let recordType = "Photo"
    package static let fieldTypes: [String: CloudSchema.FieldType] = ["caption": .string, "image": .asset]

    package var id: String
    package var caption: String
    package var image: CloudAsset?

    package init(id: String, caption: String, image: CloudAsset?) {
        self.id = id
        self.caption = caption
        self.image = image
    }

    /// The bytes a crash child's photo of version `version` holds: `version` repeated, 2,000 + `version`
    /// bytes, so that they say which version they are and a torn file shows.
    package static func bytes(version: Int) -> Data {
        Data(repeating: UInt8(version % 256), count: 2_000 + version)
    }
}

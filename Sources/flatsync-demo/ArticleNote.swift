import FlatSync
import Foundation

/// A note on a saved article: the demo's own record type, built only from FlatSync's public host-store API,
/// as an app would build one.
///
/// It lives in the reading list's zone because it refers to the article's entry, and CloudKit allows
/// references within one zone only; the reference is `deleteSelf`, so unsaving the article deletes its notes
/// on every device.
struct ArticleNote: SyncableRecord {
    static let zone = ZoneID.readingList
    static let recordType = "Note"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "article": .reference, "text": .string, "created": .timestamp,
    ]

    /// The record types the demo registers every time it opens a device.
    static let registered: [any SyncableRecord.Type] = [ArticleNote.self]
    /// The schema the demo writes: FlatSync's and the notes'.
    static let schema = CloudSchema.flatSync(adding: registered)

    var id: String
    var articleID: String
    var text: String
    var created: Date

    init(id: String, articleID: String, text: String, created: Date) {
        self.id = id
        self.articleID = articleID
        self.text = text
        self.created = created
    }

    var fields: [String: FieldValue] {
        [
            "article": .reference(ReadingListEntry.reference(to: articleID, action: .deleteSelf)),
            "text": .string(text), "created": .date(created),
        ]
    }

    init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        articleID = try ReadingListEntry.articleID(from: fields.reference("article"))
        text = try fields.string("text")
        created = try fields.date("created")
    }
}

extension SyncContext.Configuration {
    /// The configuration of a device the demo opens: the defaults, with the notes registered.
    static var demo: SyncContext.Configuration {
        var configuration = SyncContext.Configuration()
        configuration.recordTypes = ArticleNote.registered
        return configuration
    }
}

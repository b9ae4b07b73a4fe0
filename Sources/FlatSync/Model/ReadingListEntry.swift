#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An article saved to the reading list.
public struct ReadingListEntry: SyncedItem, Identifiable, CustomStringConvertible {
    /// The saved article.
    public var articleID: String
    /// When the article was saved; the later save wins a conflict.
    public var dateAdded: Date
    /// Where in the app the article was saved from (0–3, as in News).
    public var origin: Int64
    /// The article's title, when the saver knew it.
    public var title: String?

    /// An entry for an article saved at `dateAdded`.
    public init(articleID: String, dateAdded: Date, origin: Int64 = 0, title: String? = nil) {
        self.articleID = articleID
        self.dateAdded = dateAdded
        self.origin = origin
        self.title = title
    }

    /// The article ID.
    public var id: String { articleID }

    /// The reading list's zone.
    public static let zone = ZoneID.readingList
    /// The CloudKit record type of an entry.
    public static let recordType = "ReadingListEntry"
    /// What an entry's record name starts with, before its article ID.
    public static let recordNamePrefix = "rl-"

    /// The entry as a `ReadingListEntry` record: `articleID`, `dateAdded`, `origin`, and `title` when set.
    ///
    /// The record keeps the entry and builds its field dictionary only when its fields are read.
    public var record: Record {
        Record(id: recordID, type: Self.recordType, content: .stored(self))
    }

    /// The fields of ``record``.
    package var recordFields: [String: FieldValue] {
        var fields = [String: FieldValue](minimumCapacity: 4)
        forEachRecordField { fields[$0] = $1 }
        return fields
    }

    /// How many fields ``recordFields`` holds.
    package var recordFieldCount: Int { title == nil ? 3 : 4 }

    /// Calls `body` with each field of ``record``, in a fixed order: what ``recordFields`` holds.
    package func forEachRecordField(_ body: (String, FieldValue) -> Void) {
        body("articleID", .string(articleID))
        body("dateAdded", .date(dateAdded))
        body("origin", .int(origin))
        if let title { body("title", .string(title)) }
    }

    /// The value of one field of ``record``, without building the others.
    package func recordField(_ key: String) -> FieldValue? {
        switch key {
        case "articleID": return .string(articleID)
        case "dateAdded": return .date(dateAdded)
        case "origin": return .int(origin)
        case "title": return title.map { .string($0) }
        default: return nil
        }
    }

    /// True when the records of both hold equal fields (as ``FieldValue`` compares them).
    package func hasSameRecordFields(as other: ReadingListEntry) -> Bool {
        articleID == other.articleID && FieldValue.date(dateAdded) == .date(other.dateAdded)
            && origin == other.origin && title == other.title
    }

    /// Reads an entry from its record, throwing ``FlatSyncError/Code-swift.struct/malformedRecord`` when a
    /// required field is missing or has another type.
    public init(record: Record) throws(FlatSyncError) {
        // A record made by ``record`` holds the entry: take it after the same checks as the fields' path.
        if let entry = record.content.stored(as: ReadingListEntry.self), record.type == Self.recordType,
            record.id == entry.recordID
        {
            try record.checkArticleID(entry.articleID)
            self = entry
            return
        }
        articleID = try record.checkedArticleID(for: Self.self)
        dateAdded = try record.requiredDate("dateAdded")
        origin = try record.int("origin")
        title = try record.optionalString("title")
    }

    /// The entry with the later `dateAdded` wins whole (see <doc:HowSyncWorks>). Equal dates fall back to comparing
    /// origin and title, so the result does not depend on the order of the arguments.
    public func merged(with other: ReadingListEntry) -> ReadingListEntry {
        let mine = (dateAdded, origin, title ?? "")
        let theirs = (other.dateAdded, other.origin, other.title ?? "")
        return mine >= theirs ? self : other
    }

    public var description: String {
        "\(articleID) (added \(dateAdded.formatted(.iso8601))\(title.map { ", \"\($0)\"" } ?? ""))"
    }
}

/// A reading-list entry's record holds the entry (see ``StoredRecordContent``), so that an add or a remove
/// builds no dictionary of four fields for the log to take apart again. The log writes it as fields.
extension ReadingListEntry: StoredRecordContent {}

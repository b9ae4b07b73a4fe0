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

    public static let zone = ZoneID.readingList
    public static let recordType = "ReadingListEntry"
    public static let recordNamePrefix = "rl-"

    /// The entry as a `ReadingListEntry` record: `articleID`, `dateAdded`, `origin`, and `title` when set.
    public var record: Record {
        var fields: [String: FieldValue] = [
            "articleID": .string(articleID), "dateAdded": .date(dateAdded), "origin": .int(origin),
        ]
        if let title { fields["title"] = .string(title) }
        return Record(id: recordID, type: Self.recordType, fields: fields)
    }

    public init(record: Record) throws(FlatSyncError) {
        articleID = try record.checkedArticleID(for: Self.self)
        dateAdded = try record.requiredDate("dateAdded")
        origin = try record.int("origin")
        title = try record.optionalString("title")
    }

    /// The entry with the later `dateAdded` wins whole (DESIGN §7). Equal dates fall back to comparing
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

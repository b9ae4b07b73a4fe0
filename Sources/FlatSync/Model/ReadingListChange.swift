#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One change to the reading list, for ``ReadingList/apply(_:)``.
public enum ReadingListChange: Hashable, Sendable {
    /// Saves an article; saving an article already on the list changes nothing.
    case add(articleID: String, title: String? = nil, origin: Int64 = 0)
    /// Removes an article; removing an article not on the list changes nothing.
    case remove(articleID: String)

    /// The article the change is about.
    public var articleID: String {
        switch self {
        case .add(let id, _, _), .remove(let id): return id
        }
    }

    /// Throws the typed error for bad input, before anything is written.
    func validate() throws(FlatSyncError) {
        try ArticleID.validate(articleID)
        if case .add(_, _, let origin) = self, !(0...3).contains(origin) {
            throw FlatSyncError(.invalidArgument, "The origin of a reading-list entry is 0–3, not \(origin).")
        }
    }

    /// The entry after the change, given the entry before it.
    func applied(to entry: ReadingListEntry?, now: Date) -> ReadingListEntry? {
        switch self {
        case .add(let id, let title, let origin):
            return entry ?? ReadingListEntry(articleID: id, dateAdded: now, origin: origin, title: title)
        case .remove:
            return nil
        }
    }
}

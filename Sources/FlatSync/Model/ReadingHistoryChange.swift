#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One change to the reading history, for ``ReadingHistory/apply(_:)``.
public enum ReadingHistoryChange: Hashable, Sendable {
    /// The user opened the article (optionally a given version of it): it counts as seen and read, its
    /// visit count goes up, and this device becomes the last visitor.
    case visit(articleID: String, version: Int64? = nil)
    /// The article was shown to the user without being opened.
    case markSeen(articleID: String, version: Int64? = nil)
    /// The user read the article.
    case markRead(articleID: String)
    /// The user liked, disliked, or took back either.
    case setLiking(articleID: String, ReadingHistoryItem.Liking)
    /// The user reported the article as offensive.
    case markOffensive(articleID: String)
    /// The user finished the article.
    case markConsumed(articleID: String)
    /// The item must survive pruning.
    case disablePruning(articleID: String)
    /// Forgets the article's history.
    case remove(articleID: String)

    /// The article the change is about.
    public var articleID: String {
        switch self {
        case .visit(let id, _), .markSeen(let id, _), .markRead(let id), .setLiking(let id, _),
            .markOffensive(let id), .markConsumed(let id), .disablePruning(let id), .remove(let id):
            return id
        }
    }

    /// Throws the typed error for bad input, before anything is written.
    func validate() throws(FlatSyncError) {
        try ArticleID.validate(articleID)
        switch self {
        case .visit(_, let version?), .markSeen(_, let version?):
            if version < 0 {
                throw FlatSyncError(.invalidArgument, "An article version cannot be negative (\(version)).")
            }
        default:
            break
        }
    }

    /// The item after the change, given the item before it.
    package func applied(to existing: ReadingHistoryItem?, now: Date, deviceID: String) -> ReadingHistoryItem? {
        applied(to: existing, now: now, device: DeviceName.named(deviceID))
    }

    /// The item after the change, given the item before it; a visit stamps `device` on it.
    package func applied(to existing: ReadingHistoryItem?, now: Date, device: DeviceName) -> ReadingHistoryItem? {
        if case .remove = self { return nil }
        // Not `existing ?? ReadingHistoryItem(...)`: the generic operator copied the new item once more,
        // through its type's metadata, for every new article of a batch.
        var item: ReadingHistoryItem
        if let existing { item = existing } else { item = ReadingHistoryItem(articleID: articleID) }
        if item.firstSeen.map({ now < $0 }) ?? true { item.firstSeen = now }
        switch self {
        case .visit(_, let version):
            if item.lastVisited.map({ now > $0 }) ?? true { item.lastVisited = now }
            item.maxVersionSeen = max(item.maxVersionSeen, version ?? 0)
            item.readCount += 1
            item.setDevice(device)
            item.flags.formUnion([.read, .seen])
        case .markSeen(_, let version):
            item.maxVersionSeen = max(item.maxVersionSeen, version ?? 0)
            item.flags.insert(.seen)
        case .markRead:
            item.flags.insert(.read)
        case .setLiking(_, let liking):
            guard liking != item.liking else { break }
            // Strictly later than the previous setting, so two settings within one clock tick still order.
            let previous = item.likingChangedAt ?? .distantPast
            item.likingChangedAt = max(now, previous.addingTimeInterval(0.001))
            item.liking = liking
        case .markOffensive:
            item.flags.insert(.offensive)
        case .markConsumed:
            item.flags.insert(.consumed)
        case .disablePruning:
            item.flags.insert(.pruningDisabled)
        case .remove:
            return nil
        }
        return item
    }
}

/// One zone's local data, as a value: the items, the change tags the server gave their records, the
/// zone's change token, and how far through the mutation sequence the data goes.
///
/// The token lives beside the data it describes (and is saved in the same snapshot file), so a stale
/// snapshot is always self-consistent: after a crash the engine fetches again from the token it finds.
package struct ZoneState<Item: TableItem>: Sendable {
    /// Items by article ID, and the change tags of the zone's records (see ``changeTag(of:)``).
    package var items = Item.Table()
    /// Where the last fetch of the zone ended; `nil` means fetch everything.
    package var changeToken: ChangeToken?
    /// Every mutation with a sequence number up to this one is reflected in ``items``.
    package var appliedThroughSequence: UInt64 = 0
    /// Records this device created on the server since its last completed fetch. A fetch reports net
    /// changes since the token, so a record created and deleted after the token is reported as nothing:
    /// the next fetch must return each of these, or it was deleted.
    package var createdSinceFetch: Set<String> = []
    /// Versions a fetch returned but did not apply because a delete of the record was pending, by record
    /// name. They are covered by the change token, so if the delete loses to one of them later, the next
    /// fetch will not return it again.
    package var skippedVersions: [String: ChangeTag] = [:]
    /// Fields of the zone's records that the items do not use, by record name: written by another client (a
    /// native app on the same container, a later version of this one), of any type. They are kept, so that
    /// ``fullRecord(forArticle:)`` shows the record whole, but never sent: a save sends only the fields
    /// this device changed, and the server keeps the rest (but for a save that stands for a delete and a new
    /// record, which replaces the record the user deleted).
    package var unknownFields: [String: [String: FieldValue]] = [:]
    /// Records merged with a server version since this device last saved them (on a conflict, or by a fetch
    /// over a pending save), by name: their next save sends every field the item has, as an update, not
    /// only the keys the user changed, since the merge may have changed others the server's version lacks
    /// (a record deleted and created again by another device holds none of this one's older fields). Kept
    /// in the snapshot beside the merged data and the tag.
    package var sendWhole: Set<String> = []

    package init() {}

    /// Keeps the fields of `record`, as the server holds it, that the items do not use (forgetting those of
    /// an earlier version). A record whose content is an item has none to tell.
    package mutating func keepUnknownFields(of record: Record) {
        guard case .fields(let fields) = record.content else { return }
        var unknown: [String: FieldValue] = [:]
        for (key, value) in fields where !Item.knownRecordKeys.contains(key) { unknown[key] = value }
        if unknown.isEmpty {
            if !unknownFields.isEmpty { unknownFields[record.id.name] = nil }
        } else {
            unknownFields[record.id.name] = unknown
        }
    }

    /// The record of an article as the server knows it: the item's fields, the fields other clients wrote
    /// (``unknownFields``) and the change tag last seen.
    package func fullRecord(forArticle articleID: String) -> Record? {
        guard var record = record(forArticle: articleID) else { return nil }
        if let unknown = unknownFields[record.id.name] {
            var fields = record.fields
            for (key, value) in unknown where fields[key] == nil { fields[key] = value }
            record.fields = fields
        }
        return record
    }

    /// The last change tag seen from the server for the record named `name`. A record deleted locally keeps
    /// its tag until the server confirms the delete, because the delete is sent with it. The item table
    /// keeps the tags (``ItemTable/changeTag(of:)``).
    package func changeTag(of name: String) -> ChangeTag? {
        items.changeTag(of: name)
    }

    /// Sets the change tag of the record named `name`, or forgets it (nil).
    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) {
        items.setChangeTag(tag, of: name)
    }

    /// Every change tag by record name (tests).
    package var changeTagsByName: [String: ChangeTag] {
        Dictionary(items.changeTagNames.map { ($0, items.changeTag(of: $0)!) }, uniquingKeysWith: { $1 })
    }

    /// The item's record with the change tag last seen from the server.
    package func record(forArticle articleID: String) -> Record? {
        guard let item = items[articleID] else { return nil }
        let record = item.record
        return record.withChangeTag(changeTag(of: record.id.name))
    }

    /// The current record for a record ID in this zone, with its change tag.
    package func record(for id: RecordID) -> Record? {
        Item.articleID(fromRecordName: id.name).flatMap { record(forArticle: $0) }
    }

    /// Lays a change over the data exactly as the original mutation left it: a save sets the item from
    /// the change's whole record, a delete removes it. Changes whose record does not decode are skipped.
    package mutating func apply(_ change: RecordChange) {
        guard let articleID = Item.articleID(fromRecordName: change.recordID.name) else { return }
        switch change.operation {
        case .save(let record):
            if let item = try? Item(record: record) { items[articleID] = item }
        case .delete:
            items[articleID] = nil
        }
    }
}

extension ZoneState where Item: RecordDiffable {
    /// Replaces an item (or removes it when `item` is nil) and returns the record change that describes
    /// the difference, or nil when nothing changed.
    package mutating func replace(_ articleID: String, with item: Item?, sequence: UInt64) -> RecordChange? {
        var drafts: [ChangeDraft<Item>] = []
        guard appendChange(articleID, to: &drafts, { _ in item }) else { return nil }
        return drafts.removeLast().change(sequence: sequence)
    }

    /// Replaces an article's item with what `transform` makes of it (removing it for nil), finding the
    /// article once, and appends the draft of the record change that describes the difference to `drafts`
    /// (see ``ChangeDraft``); returns false, appending nothing, when nothing changed.
    package mutating func appendChange(
        _ articleID: String, to drafts: inout [ChangeDraft<Item>], _ transform: (Item?) -> Item?
    ) -> Bool {
        items.modify(articleID) { stored -> Bool in
            // The old item is taken out, not copied: copies of items (and the retains and releases of their
            // strings) were a fifth of a burst's time here. (The history's table hands its item over; the
            // reading list's, small, hands over a copy: see `HashedTable.modify`.)
            // (Comparing and passing the optionals whole copied them through their type's metadata.)
            guard let new = transform(stored) else {
                guard stored != nil else { return false }
                stored = nil
                drafts.append(.delete(articleID: articleID))
                return true
            }
            // An equal item stored over an equal one changes nothing. (Compared through the optional in
            // place: `stored.map { $0 == new }` copied the new item into the closure, for every change.)
            if stored?.isEqual(to: new) ?? false { return false }
            let old = stored.take()
            stored = new
            drafts.append(.save(articleID: articleID, old: consume old, new: consume new))
            return true
        }
    }
}

extension Equatable {
    /// `self == other`, callable through an optional in place (`stored?.isEqual(to: new)`).
    fileprivate func isEqual(to other: Self) -> Bool { self == other }
}

/// Both zones' states, kept together so code can reach either through a key path.
package struct ZoneStates: Sendable {
    package var readingList = ZoneState<ReadingListEntry>()
    package var history = ZoneState<ReadingHistoryItem>()

    package init() {}

    /// The sequence number a zone's data covers.
    package func appliedThroughSequence(of zone: ZoneID) -> UInt64 {
        zone == .readingList ? readingList.appliedThroughSequence : history.appliedThroughSequence
    }

    /// Empties a zone (no items, tags or token), as wiped by the mutation numbered `sequence`.
    package mutating func wipe(_ zone: ZoneID, at sequence: UInt64) {
        if zone == .readingList {
            readingList = ZoneState()
            readingList.appliedThroughSequence = sequence
        } else {
            history = ZoneState()
            history.appliedThroughSequence = sequence
        }
    }

    /// The current record for an ID in either zone, with its change tag.
    package func record(for id: RecordID) -> Record? {
        id.zone == .readingList ? readingList.record(for: id) : history.record(for: id)
    }
}

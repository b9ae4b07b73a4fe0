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
    /// Host records whose pending changes stand on another server version than the one they were made
    /// over, by name: that version's fields, which a host's merge gets as the common ancestor (see
    /// `SyncableRecord.merge(_:_:ancestor:changedFields:)`). Set when a change is merged with a newer
    /// version (a conflict, or a fetch over it), and when a save is acknowledged while a newer change of
    /// the record waits (which that save may have carried); forgotten when the record's changes are
    /// acknowledged, discarded or deleted here, and when it takes a server version as it is. Kept in the
    /// snapshot; until that is written, a save made over the merge carries the version in the log
    /// (``RecordChange/rebases``), since the log then holds the merged record.
    package var mergeBases: [String: [String: FieldValue]] = [:]
    /// Host records a save of which may have reached the server unanswered (its request failed with an error
    /// that may follow a commit, `CloudErrorPolicy.mayHaveBeenApplied(afterRequestFailedWith:)`, or was
    /// cancelled; its own entry in the answer did not read; or it was on its way when the context closed or
    /// the process stopped), by name: until the server's version of the record shows (fetched, or met by a
    /// save), a merge does not know which version this device's changes stand on, and gets no ancestor. Kept
    /// in the snapshot.
    package var savesOfUnknownFate: Set<String> = []
    /// The zone's records that belong to host-defined stores (see ``SyncableRecord``) rather than to the
    /// built-in items: every record whose name the item type does not claim (``owns(_:)``).
    package var hostRecords = HostRecordTable()
    /// Set while a reset is under way (a fetch from nil after the server refused the zone's token): the
    /// names of the records this device knew when the reset began that no part of it has returned yet. The
    /// reset's last part deletes them, unless a change to them is pending. Kept in the snapshot beside the
    /// token of the last part taken, so that a reset interrupted midway (the server asking to slow down,
    /// say) resumes after that part instead of starting over.
    package var unconfirmedByReset: Set<String>?

    package init() {}

    /// True when the record named `name` is one of the built-in items' (its name has their prefix), false
    /// when it is a host record.
    package func owns(_ name: String) -> Bool {
        // By bytes, without making the article ID: this runs for every record a sync sends or fetches.
        Item.holdsItems && name.utf8.starts(with: Item.recordNamePrefix.utf8)
    }

    /// Keeps the fields of `record`, as the server holds it, that the items do not use (forgetting those of
    /// an earlier version). A record whose content is an item has none to tell.
    package mutating func keepUnknownFields(of record: Record) {
        // A host record keeps every field itself (see ``HostRecordTable``).
        guard case .fields(let fields) = record.content, owns(record.id.name) else { return }
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
        if hostRecords.isEmpty || owns(name) { return items.changeTag(of: name) }
        return hostRecords.changeTag(of: name)
    }

    /// Sets the change tag of the record named `name`, or forgets it (nil).
    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) {
        if owns(name) {
            items.setChangeTag(tag, of: name)
        } else {
            hostRecords.setChangeTag(tag, of: name)
        }
    }

    /// Every change tag by record name (tests).
    package var changeTagsByName: [String: ChangeTag] {
        Dictionary(items.changeTagNames.map { ($0, items.changeTag(of: $0)!) }, uniquingKeysWith: { $1 })
            .merging(hostRecords.changeTagsByName) { $1 }
    }

    /// The name of every record of the zone, built-in or host, that this device has or has a tag of.
    package var knownRecordNames: Set<String> {
        var names = Set(items.keys.lazy.map { Item.recordNamePrefix + $0 }).union(items.changeTagNames)
        names.formUnion(hostRecords.allNames)
        return names
    }

    /// Stores a record as the zone holds it: a built-in item from the record (when it decodes), or a host
    /// record. Leaves the change tag alone.
    package mutating func store(_ record: Record) {
        let name = record.id.name
        if owns(name) {
            if let articleID = Item.articleID(fromRecordName: name), let item = try? Item(record: record) {
                items[articleID] = item
            }
        } else {
            hostRecords[name] = record
        }
    }

    /// Removes the record named `name`, returning whether there was one. Leaves the change tag alone.
    @discardableResult
    package mutating func removeRecord(named name: String) -> Bool {
        if owns(name) {
            guard let articleID = Item.articleID(fromRecordName: name) else { return false }
            return items.removeValue(forKey: articleID) != nil
        }
        guard hostRecords[name] != nil else { return false }
        hostRecords[name] = nil
        return true
    }

    /// The item's record with the change tag last seen from the server.
    package func record(forArticle articleID: String) -> Record? {
        guard let item = items[articleID] else { return nil }
        let record = item.record
        return record.withChangeTag(changeTag(of: record.id.name))
    }

    /// The current record for a record ID in this zone, with its change tag.
    package func record(for id: RecordID) -> Record? {
        guard owns(id.name) else {
            return hostRecords[id.name].map { $0.withChangeTag(hostRecords.changeTag(of: id.name)) }
        }
        return Item.articleID(fromRecordName: id.name).flatMap { record(forArticle: $0) }
    }

    /// Lays a change over the data exactly as the original mutation left it: a save sets the item from
    /// the change's whole record, a delete removes it. Changes whose record does not decode are skipped.
    package mutating func apply(_ change: RecordChange) {
        guard owns(change.recordID.name) else {
            hostRecords[change.recordID.name] = change.isDelete ? nil : change.carriedRecord
            return
        }
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

/// Every zone's state: the two built-in zones, and the zones only host-defined stores use, kept together so
/// code can reach any of them by its ID (or a built-in one through a key path).
package struct ZoneStates: Sendable {
    package var readingList = ZoneState<ReadingListEntry>()
    package var history = ZoneState<ReadingHistoryItem>()
    /// The zones that hold host records only (see ``HostZoneItem``), by ID.
    package var hostZones: [ZoneID: ZoneState<HostZoneItem>] = [:]

    package init() {}

    /// The sequence number a zone's data covers.
    package func appliedThroughSequence(of zone: ZoneID) -> UInt64 {
        switch zone {
        case .readingList: return readingList.appliedThroughSequence
        case .readingHistory: return history.appliedThroughSequence
        default: return hostZones[zone]?.appliedThroughSequence ?? 0
        }
    }

    /// Empties a zone (no items, tags or token), as wiped by the mutation numbered `sequence`.
    package mutating func wipe(_ zone: ZoneID, at sequence: UInt64) {
        switch zone {
        case .readingList:
            readingList = ZoneState()
            readingList.appliedThroughSequence = sequence
        case .readingHistory:
            history = ZoneState()
            history.appliedThroughSequence = sequence
        default:
            var state = ZoneState<HostZoneItem>()
            state.appliedThroughSequence = sequence
            hostZones[zone] = state
        }
    }

    /// The current record for an ID in any zone, with its change tag.
    package func record(for id: RecordID) -> Record? {
        switch id.zone {
        case .readingList: return readingList.record(for: id)
        case .readingHistory: return history.record(for: id)
        default: return hostZones[id.zone]?.record(for: id)
        }
    }

    /// Runs `body` on the state of the zone of `id`, with no existential in between: the per-record calls of
    /// a sync (tags, bookkeeping) go through here for every record sent or fetched.
    @inline(__always)
    private mutating func update(
        _ zone: ZoneID,
        _ list: (inout ZoneState<ReadingListEntry>) -> Void,
        _ history: (inout ZoneState<ReadingHistoryItem>) -> Void,
        _ host: (inout ZoneState<HostZoneItem>) -> Void
    ) {
        switch zone {
        case .readingList: list(&readingList)
        case .readingHistory: history(&self.history)
        default: host(&hostZones[zone, default: ZoneState()])
        }
    }

    /// The change tag last seen for a record.
    package func changeTag(for id: RecordID) -> ChangeTag? {
        switch id.zone {
        case .readingList: return readingList.changeTag(of: id.name)
        case .readingHistory: return history.changeTag(of: id.name)
        default: return hostZones[id.zone]?.changeTag(of: id.name)
        }
    }

    /// Sets (or forgets, nil) the change tag of a record.
    package mutating func setChangeTag(_ tag: ChangeTag?, for id: RecordID) {
        update(
            id.zone, { $0.setChangeTag(tag, of: id.name) }, { $0.setChangeTag(tag, of: id.name) },
            { $0.setChangeTag(tag, of: id.name) })
    }

    /// True when the record's next save sends every field (see ``ZoneState/sendWhole``).
    package func sendsWhole(_ id: RecordID) -> Bool {
        let names: Set<String>
        switch id.zone {
        case .readingList: names = readingList.sendWhole
        case .readingHistory: names = history.sendWhole
        default: names = hostZones[id.zone]?.sendWhole ?? []
        }
        return !names.isEmpty && names.contains(id.name)
    }

    /// Sets whether the record's next save sends every field.
    package mutating func setSendWhole(_ sends: Bool, _ id: RecordID) {
        func set<Item>(_ state: inout ZoneState<Item>) {
            if sends {
                state.sendWhole.insert(id.name)
            } else if !state.sendWhole.isEmpty {
                state.sendWhole.remove(id.name)
            }
        }
        update(id.zone, { set(&$0) }, { set(&$0) }, { set(&$0) })
    }

    /// Sets (nil: forgets) the server version a host record's pending changes stand on (see
    /// ``ZoneState/mergeBases``).
    package mutating func setMergeBase(_ fields: [String: FieldValue]?, of id: RecordID) {
        func set<Item>(_ state: inout ZoneState<Item>) {
            if fields != nil || !state.mergeBases.isEmpty { state.mergeBases[id.name] = fields }
        }
        update(id.zone, { set(&$0) }, { set(&$0) }, { set(&$0) })
    }

    /// True when a save of the host record may have reached the server unanswered (see
    /// ``ZoneState/savesOfUnknownFate``).
    package func isFateUnknown(of id: RecordID) -> Bool {
        switch id.zone {
        case .readingList: readingList.savesOfUnknownFate.contains(id.name)
        case .readingHistory: history.savesOfUnknownFate.contains(id.name)
        default: hostZones[id.zone]?.savesOfUnknownFate.contains(id.name) ?? false
        }
    }

    /// Notes (or forgets) that a save of the host record may have reached the server unanswered.
    package mutating func setFateUnknown(_ unknown: Bool, of id: RecordID) {
        func set<Item>(_ state: inout ZoneState<Item>) {
            if unknown {
                state.savesOfUnknownFate.insert(id.name)
            } else if !state.savesOfUnknownFate.isEmpty {
                state.savesOfUnknownFate.remove(id.name)
            }
        }
        update(id.zone, { set(&$0) }, { set(&$0) }, { set(&$0) })
    }

    /// Forgets the server version a host record was merged with: the record now is a server version.
    package mutating func forgetMergeBase(of id: RecordID) {
        setMergeBase(nil, of: id)
    }

    /// The server version a host record with pending changes was merged with, if it was (see
    /// ``ZoneState/mergeBases``).
    package func mergeBase(of id: RecordID) -> [String: FieldValue]? {
        switch id.zone {
        case .readingList: readingList.mergeBases[id.name]
        case .readingHistory: history.mergeBases[id.name]
        default: hostZones[id.zone]?.mergeBases[id.name]
        }
    }

    /// Begins a reset of the zone: its token is forgotten, and every record it knows now stays only if a
    /// part of the fetch from nil returns it (see ``ZoneState/unconfirmedByReset``).
    package mutating func beginReset(of zone: ZoneID) {
        func begin<Item>(_ state: inout ZoneState<Item>) {
            state.unconfirmedByReset = state.knownRecordNames
            state.changeToken = nil
        }
        update(zone, { begin(&$0) }, { begin(&$0) }, { begin(&$0) })
    }

    /// True while a reset of the zone is under way (see ``ZoneState/unconfirmedByReset``).
    package func isResetting(_ zone: ZoneID) -> Bool {
        switch zone {
        case .readingList: return readingList.unconfirmedByReset != nil
        case .readingHistory: return history.unconfirmedByReset != nil
        default: return hostZones[zone]?.unconfirmedByReset != nil
        }
    }

    /// Notes that this device created the record on the server since its last fetch.
    package mutating func noteCreated(_ id: RecordID) {
        update(
            id.zone, { $0.createdSinceFetch.insert(id.name) }, { $0.createdSinceFetch.insert(id.name) },
            { $0.createdSinceFetch.insert(id.name) })
    }

    /// The version a fetch skipped for a pending delete of the record, if any.
    package func skippedVersion(for id: RecordID) -> ChangeTag? {
        switch id.zone {
        case .readingList: return readingList.skippedVersions[id.name]
        case .readingHistory: return history.skippedVersions[id.name]
        default: return hostZones[id.zone]?.skippedVersions[id.name]
        }
    }

    /// Sets (or forgets) the version a fetch skipped for a pending delete of the record.
    package mutating func setSkippedVersion(_ tag: ChangeTag?, for id: RecordID) {
        update(
            id.zone, { $0.skippedVersions[id.name] = tag }, { $0.skippedVersions[id.name] = tag },
            { $0.skippedVersions[id.name] = tag })
    }

    /// Keeps the fields of a record the server returned that the zone's items do not use.
    package mutating func keepUnknownFields(of record: Record) {
        update(
            record.id.zone, { $0.keepUnknownFields(of: record) }, { $0.keepUnknownFields(of: record) },
            { $0.keepUnknownFields(of: record) })
    }

    /// Forgets the fields other clients wrote of a record the server deleted.
    package mutating func forgetUnknownFields(of id: RecordID) {
        update(
            id.zone, { $0.unknownFields[id.name] = nil }, { $0.unknownFields[id.name] = nil },
            { $0.unknownFields[id.name] = nil })
    }

    /// Stores a record as its zone holds it (see ``ZoneState/store(_:)``), leaving the tag alone.
    package mutating func store(_ record: Record) {
        update(record.id.zone, { $0.store(record) }, { $0.store(record) }, { $0.store(record) })
    }

    /// Removes a record (leaving its tag alone); returns whether there was one.
    @discardableResult
    package mutating func removeRecord(_ id: RecordID) -> Bool {
        var removed = false
        update(
            id.zone, { removed = $0.removeRecord(named: id.name) }, { removed = $0.removeRecord(named: id.name) },
            { removed = $0.removeRecord(named: id.name) })
        return removed
    }

    /// Lays a change over its zone's data exactly as the original mutation left it (see
    /// ``ZoneState/apply(_:)``), and notes that the zone's data now covers the change's sequence.
    package mutating func replay(_ change: RecordChange) {
        func replay<Item>(_ state: inout ZoneState<Item>) {
            state.apply(change)
            state.appliedThroughSequence = max(state.appliedThroughSequence, change.sequence)
        }
        update(change.recordID.zone, { replay(&$0) }, { replay(&$0) }, { replay(&$0) })
    }

    /// The zone's change token.
    package func changeToken(of zone: ZoneID) -> ChangeToken? {
        switch zone {
        case .readingList: return readingList.changeToken
        case .readingHistory: return history.changeToken
        default: return hostZones[zone]?.changeToken
        }
    }

    /// Sets the sequence number a zone's data covers.
    package mutating func setAppliedThroughSequence(_ sequence: UInt64, of zone: ZoneID) {
        update(
            zone, { $0.appliedThroughSequence = sequence }, { $0.appliedThroughSequence = sequence },
            { $0.appliedThroughSequence = sequence })
    }

    /// Runs `body` with the host records of a zone, in place.
    package mutating func withHostRecords<R>(in zone: ZoneID, _ body: (inout HostRecordTable) throws -> R) rethrows -> R
    {
        switch zone {
        case .readingList: return try body(&readingList.hostRecords)
        case .readingHistory: return try body(&history.hostRecords)
        default: return try body(&hostZones[zone, default: ZoneState()].hostRecords)
        }
    }

    /// The host records of a zone, with their tags.
    package func hostRecords(in zone: ZoneID) -> HostRecordTable {
        switch zone {
        case .readingList: return readingList.hostRecords
        case .readingHistory: return history.hostRecords
        default: return hostZones[zone]?.hostRecords ?? HostRecordTable()
        }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the sync engine asks of the store: records to send, the server's answers, fetched changes.
extension LocalStore {
    /// The zone's change token.
    package func changeToken(for zone: ZoneID) -> ChangeToken? {
        zones.changeToken(of: zone)
    }

    /// Begins a reset of the zone, after the server refused its token: the token is forgotten, and the
    /// records known now stay only if the fetch from nil returns them (see ``ZoneState/unconfirmedByReset``).
    /// Saved with the zone's next snapshot, so a reset interrupted midway resumes.
    package func beginReset(of zone: ZoneID) throws(FlatSyncError) {
        try checkOpen()
        zones.beginReset(of: zone)
        stateDidChange(zone)
    }

    /// True while a reset of the zone, begun by ``beginReset(of:)``, has not taken its last part.
    package func isResetting(_ zone: ZoneID) -> Bool {
        zones.isResetting(zone)
    }

    /// The request for a batch of changes: each save carries the store's current values (which hold the
    /// change and anything merged in since) and each delete the change tag last seen, so the server
    /// refuses either if someone else changed the record meanwhile.
    ///
    /// A save of a record the server has (a change tag is known) sends only the keys this device changed,
    /// so the server keeps every other field — those another client wrote included
    /// (``SavePolicy/ifServerRecordUnchanged``). It sends the whole record, replacing the server's, only
    /// when the change stands for a delete followed by a new record, or removes a field (which only a
    /// replace can do). A record the server does not have yet is created whole.
    package func request(for changes: [RecordChange]) throws(FlatSyncError) -> (
        saves: [RecordSave], deletes: [RecordDeletion]
    ) {
        let session = try writerSession()
        var saves: [RecordSave] = []
        var deletes: [RecordDeletion] = []
        for change in changes {
            let tag = changeTag(for: change.recordID)
            guard !change.isDelete else {
                deletes.append(RecordDeletion(change.recordID, changeTag: tag, policy: .ifServerRecordUnchanged))
                continue
            }
            var current = zones.record(for: change.recordID) ?? change.carriedRecord
            current.changeTag = tag
            // The newest mutation made so far, not the change's own: the values sent are the record's as they
            // are now, which may hold a later mutation (one made while the change was out), and a version
            // must not pass for older than what it holds (see ``OwnWrites``).
            current.lastModifiedBy = OwnWrites.mark(session: session, sequence: nextSequence - 1, deviceID: deviceID)
            var policy = SavePolicy.ifServerRecordUnchanged
            // Merged with a server version since its last save: every field, as an update (what a replace
            // would remove, the merge kept: the delete it stood for lost to that version), unless the merged
            // record still lacks a field the change removed: only a replace removes it from the server's
            // version, which the update would leave holding it. Kept in the snapshot with the tag, so it
            // holds after a restart too.
            let whole = tag != nil && sendsWhole(change.recordID)
            if whole, change.changedKeys.contains(where: { current.content.field($0) == nil }) {
                policy = .replaceIfServerRecordUnchanged
            } else if tag != nil, change.replacesRecord, !whole {
                // Not when merged whole: the merge that made it whole was with a version the delete never
                // saw, which turned the save into an update (``PendingCommands/stopReplacing(_:)``, in memory
                // only: after a restart the log's change says "replace" again, and this mark, kept in the
                // snapshot, is what says otherwise). A merge with this device's own version leaves it replacing
                // and not whole (see ``keepsReplacing(over:)``).
                policy = .replaceIfServerRecordUnchanged
            } else if tag != nil, !whole {
                let keys = change.changedKeys
                var changed = [String: FieldValue](minimumCapacity: keys.count)
                for key in keys {
                    guard let value = current.content.field(key) else {
                        // The change removed this field: only a replace removes one.
                        policy = .replaceIfServerRecordUnchanged
                        break
                    }
                    changed[key] = value
                }
                if policy == .ifServerRecordUnchanged, !changed.isEmpty {
                    current.fields = withAssetPaths(Self.leavingAssetsOut(changed))
                    saves.append(RecordSave(current, policy: policy))
                    continue
                }
            }
            // A transport reads the fields, often more than once: build the dictionary once here.
            var fields = policy == .ifServerRecordUnchanged ? Self.leavingAssetsOut(current.fields) : current.fields
            if whole, policy == .ifServerRecordUnchanged, fields.values.contains(where: CloudAsset.isLocal),
                let base = zones.mergeBase(of: change.recordID)
            {
                // An asset made here that the version merged with held too (its upload, see
                // `keepingOwnUploads(_:)`), in a field this device did not change: the update leaves it to
                // the server, which has those bytes, rather than uploading them again.
                for (key, value) in fields
                where CloudAsset.isLocal(value) && !change.changedKeys.contains(key) && base[key] == value {
                    fields[key] = nil
                }
            }
            current.fields = withAssetPaths(fields)
            saves.append(RecordSave(current, policy: policy))
        }
        // Only a host record holds references: a request of built-in records is left as it is.
        if saves.count > 1, saves.contains(where: { isHostRecord($0.record.id) && !$0.record.references.isEmpty }) {
            let byName = Dictionary(saves.map { ($0.record.id.name, $0) }, uniquingKeysWith: { $1 })
            saves = RecordOrder.parentsFirst(saves.map(\.record)).compactMap { byName[$0.id.name] }
        }
        return (saves, deletes)
    }

    /// `fields` without those holding assets from the server, for an update, which keeps on the server the
    /// fields it does not send: their descriptions (without the receipt of an upload) CloudKit takes only
    /// from an upload or `assets/rereference` (MistKit, live), so sending one back could have the save
    /// refused. An asset made on this device stays, for the transport to upload.
    static func leavingAssetsOut(_ fields: [String: FieldValue]) -> [String: FieldValue] {
        guard fields.values.contains(where: CloudAsset.holdsAssets) else { return fields }
        return fields.filter { !CloudAsset.holdsAssets($0.value) || CloudAsset.isLocal($0.value) }
    }

    /// True when the record's next save sends every field (see ``ZoneState/sendWhole``).
    private func sendsWhole(_ id: RecordID) -> Bool {
        zones.sendsWhole(id)
    }

    private func setSendWhole(_ sends: Bool, _ id: RecordID) {
        zones.setSendWhole(sends, id)
    }

    /// This device's version of a record was merged with `server`: its next save sends every field, and a
    /// host record's pending changes now stand on `server` (``ZoneState/mergeBases``), whose fate is known.
    private func noteMerged(over server: Record) {
        setSendWhole(true, server.id)
        if isHostRecord(server.id) { zones.setMergeBase(server.fields, of: server.id) }
        zones.setFateUnknown(false, of: server.id)
    }

    /// The server's version of a record replaced or answered this device's changes: no merge base is left,
    /// nor a save of unknown fate.
    private func forgetMerge(of id: RecordID) {
        setSendWhole(false, id)
        zones.forgetMergeBase(of: id)
        zones.setFateUnknown(false, of: id)
    }

    /// The change tag last seen for a record.
    package func changeTag(for id: RecordID) -> ChangeTag? {
        zones.changeTag(for: id)
    }

    private func setChangeTag(_ tag: ChangeTag?, for id: RecordID) {
        zones.setChangeTag(tag, for: id)
        stateDidChange(id.zone)
    }

    /// The server saved a record: remember its new tag. The local content stays; if it changed since the
    /// request went out, a newer command sends it again. `created` says the save was sent without a tag,
    /// so it may have created the record after this device's change token.
    ///
    /// A host record changed again while the save was on its way may have been sent with that change too
    /// (a request carries the store's current values): the change that waits then stands on the version
    /// the server just saved, its answer over what the record stood on before, not on what the change
    /// was made over (see ``ZoneState/mergeBases``).
    package func serverSaved(_ record: Record, created: Bool) {
        let id = record.id
        var savedBase: [String: FieldValue]?
        // Only over a save with its keys' earlier values: a delete, or a save of the record made anew, stands
        // on no server version.
        if isHostRecord(id), let waiting = pending.waitingChange(for: id), waiting.baseValues != nil,
            !waiting.replacesRecord, let local = zones.record(for: id)
        {
            var fields =
                Self.versionStoodOn(by: local, mergeBase: zones.mergeBase(of: id), pending: pending)?.fields ?? [:]
            fields.merge(record.fields) { $1 }
            savedBase = fields
        }
        setChangeTag(record.changeTag, for: id)
        keepUnknownFields(of: record)
        forgetMerge(of: id)
        if let savedBase { zones.setMergeBase(savedBase, of: id) }
        if created { noteCreated(id) }
    }

    /// Keeps the fields of a record the server returned that the zone's items do not use.
    private func keepUnknownFields(of record: Record) {
        zones.keepUnknownFields(of: record)
    }

    private func noteCreated(_ id: RecordID) {
        zones.noteCreated(id)
    }

    /// The server deleted a record (or never had it).
    package func serverDeleted(_ id: RecordID) {
        setChangeTag(nil, for: id)
        setSkippedVersion(nil, for: id)
        forgetMerge(of: id)
        zones.forgetUnknownFields(of: id)
    }

    private func setSkippedVersion(_ tag: ChangeTag?, for id: RecordID) {
        zones.setSkippedVersion(tag, for: id)
    }

    private func skippedVersion(for id: RecordID) -> ChangeTag? {
        zones.skippedVersion(for: id)
    }

    /// Notes that saves of these records may have reached the server unanswered (their request failed with an
    /// error that may follow a commit or was cancelled, their own entry in the answer did not read, or the
    /// answer came after the context closed): until the server's
    /// version of each shows, a merge of a host record gets no ancestor (see
    /// ``ZoneState/savesOfUnknownFate``). Written to the snapshot at once, since a restart forgets the failure.
    package func noteSavesOfUnknownFate(_ ids: [RecordID]) async throws {
        let hostRecords = ids.filter(isHostRecord)
        guard !hostRecords.isEmpty else { return }
        for id in hostRecords {
            zones.setFateUnknown(true, of: id)
            stateDidChange(id.zone)
        }
        for zone in Set(hostRecords.map(\.zone)).sorted() { try await persistSnapshot(of: zone) }
    }

    /// A save was sent with a tag, but the record is gone from the server: the next send creates it.
    package func forgetChangeTag(_ id: RecordID) {
        setChangeTag(nil, for: id)
    }

    /// A save met a newer server version: keep the merge of both, with the server's tag. Returns true when
    /// the server already holds everything the merge does (so there is nothing left to send, as when the
    /// server committed this very save but its response was lost).
    ///
    /// `sentWithoutTag` says the save was sent as a create: then the server's version may be this device's
    /// own create whose response was lost, made after its change token (see ``serverSaved(_:created:)``).
    /// A save sent with a tag proves the record existed before; any newer version is reported by the next
    /// fetch, deletions included.
    package func mergeServerRecord(_ server: Record, sentWithoutTag: Bool) -> Bool {
        // Its assets this device uploaded stay this device's own (see `keepingOwnUploads(_:)`), as in a fetch.
        let server = keepingOwnUploads([server])[0]
        let local = zones.record(for: server.id)
        let merged = local.flatMap { merge($0, server) } ?? server
        adopt(merged.withChangeTag(server.changeTag))
        keepUnknownFields(of: server)
        let replacing = keepsReplacing(over: server)
        noteMerged(over: server)
        // A save that stood for a delete met a version the delete never saw: that edit beats the delete, so
        // the merge goes out as an update, keeping whatever else the server's version holds. A version this
        // device wrote was seen by the delete (it may be the very save, applied unanswered): it still replaces,
        // and is not marked to be sent whole, the mark that makes it an update after a restart.
        if replacing { setSendWhole(false, server.id) } else { pending.stopReplacing(server.id) }
        if sentWithoutTag { noteCreated(server.id) }
        // Compared as the zone's items: fields the server holds that the items do not use are not this
        // device's to send.
        return merged.hasSameContent(as: registry.store(of: server)?.known(server) ?? server)
    }

    /// True when a pending save of `server`'s record that stands for a delete still does after meeting
    /// `server`: a version this device wrote, which the delete saw (it may be the very save, applied
    /// unanswered), met by a save not turned into an update already (one merged whole, see
    /// ``request(for:)``).
    private func keepsReplacing(over server: Record) -> Bool {
        Self.keepsReplacing(
            over: server, own: ownWrites(), mergedWhole: sendsWhole(server.id), pending: pending)
    }

    private static func keepsReplacing(
        over server: Record, own: OwnWrites, mergedWhole: Bool, pending: PendingCommands
    ) -> Bool {
        own.wrote(server) && !mergedWhole && pending.hasPendingReplace(of: server.id)
    }

    /// The merge of this device's version of a record with the server's, by the rule of the store the record
    /// belongs to (given the keys every pending change of it changed); nil when this device's does not read.
    ///
    /// A server version that does not read as the store's value (another client left out a field CloudKit
    /// cannot make required, or wrote one of another type) cannot be merged: this device's version, which
    /// does, is kept for every field the store declares, over the server's other fields. Taking the
    /// server's instead replaced a host record's acknowledged save with a version no device of this app
    /// can read, and sent that back.
    private func merge(_ local: Record, _ server: Record) -> Record? {
        guard let store = registry.store(of: server), local.type == server.type else { return nil }
        let ancestor = Self.ancestor(
            of: local, server: server, own: ownWrites(), known: !zones.isFateUnknown(of: local.id),
            mergeBase: zones.mergeBase(of: local.id), pending: pending)
        if let merged = store.merge(local, server, ancestor, pending.changedKeys(of: local.id)) { return merged }
        guard (try? store.check(local)) != nil, (try? store.check(server)) == nil else { return nil }
        var merged = server
        var fields = server.fields.filter { store.fieldTypes[$0.key] == nil }
        fields.merge(local.fields) { $1 }
        merged.fields = fields
        return merged
    }

    /// The type of the record this device holds under `id`, if it holds one.
    package func recordType(of id: RecordID) -> String? {
        zones.record(for: id)?.type
    }

    /// A pending replace met this device's own version of the record, of another type: it takes that
    /// version's tag, to replace it (see ``keepsReplacing(over:)``); false, and nothing changes, otherwise.
    package func replacesOwnVersionOfAnotherType(_ server: Record) -> Bool {
        guard let local = zones.record(for: server.id), local.type != server.type, keepsReplacing(over: server)
        else { return false }
        setChangeTag(server.changeTag, for: server.id)
        zones.setFateUnknown(false, of: server.id)
        return true
    }

    /// True when the record belongs to a host-defined store rather than to a built-in one.
    package func isHostRecord(_ id: RecordID) -> Bool {
        !RecordTypeRegistry.isBuiltIn(id)
    }

    /// A delete met a newer server version: the other device's edit wins, so the record comes back.
    ///
    /// Unless a fetch already delivered this very version (and skipped it for the pending delete), it may
    /// be newer than the change token, created after it even; the next fetch must then confirm it (see
    /// ``ZoneState/createdSinceFetch``).
    ///
    /// A save of the record made while the delete was out, waiting behind it, is laid over the server's
    /// version as a fetch lays a pending save (merged, and sent whole): taking the server's version alone
    /// lost it, here and on the server, since a save sends the store's values of its keys. A delete waiting
    /// behind it was made without seeing that version either: the version is skipped, as a fetch skips it
    /// for a pending delete, and the tag kept, so that the waiting delete meets it and loses in turn (sent
    /// with the version's tag, it deleted the edit that beat the first).
    package func adoptServerRecord(_ server: Record) {
        defer { zones.setFateUnknown(false, of: server.id) }
        let waiting = pending.waitingChange(for: server.id)
        if waiting?.isDelete == true {
            setSkippedVersion(server.changeTag, for: server.id)
            return
        }
        if waiting != nil, let local = zones.record(for: server.id), local.type != server.type {
            // A save waits with a record of another type under the name: neither merges with the other, and the
            // save keeps its own record and tag, to meet the server's record when it is sent, and be parked
            // there (see ``SyncContext``'s push). Taking the server's record sent its fields back as the save.
            return
        }
        if skippedVersion(for: server.id) != server.changeTag { noteCreated(server.id) }
        setSkippedVersion(nil, for: server.id)
        if waiting != nil, let local = zones.record(for: server.id), let merged = merge(local, server) {
            adopt(merged.withChangeTag(server.changeTag))
            keepUnknownFields(of: server)
            noteMerged(over: server)
            return
        }
        adopt(server)
        keepUnknownFields(of: server)
        zones.forgetMergeBase(of: server.id)
    }

    /// The version of a host record that this device's pending changes stand on, to merge them with
    /// `server`: `server` itself when this device wrote it (a save whose answer was lost, or one that held
    /// a change made while it was on its way: the changes were sent from over it); else `local` with each
    /// changed key as it was there: the server version the record was last merged with or saved as
    /// (`mergeBase`), or the one the changes were made over (``RecordChange/baseValues``). Nil when that is
    /// not known (see `SyncableRecord.merge(_:_:ancestor:changedFields:)`): also when `known` is false (a
    /// save of the record may have reached the server unanswered, under `server`).
    static func ancestor(
        of local: Record, server: Record, own: OwnWrites, known: Bool = true, mergeBase: [String: FieldValue]?,
        pending: PendingCommands
    ) -> Record? {
        if own.wrote(server) { return server }
        guard known else { return nil }
        return versionStoodOn(by: local, mergeBase: mergeBase, pending: pending)
    }

    /// `local` with each key its pending changes changed as it was in the version they stand on: `mergeBase`
    /// when there is one, else the values the changes were made over; nil when those are not known.
    static func versionStoodOn(by local: Record, mergeBase: [String: FieldValue]?, pending: PendingCommands)
        -> Record?
    {
        var ancestor = local
        if let mergeBase {
            ancestor.fields = mergeBase
            return ancestor
        }
        guard let fields = pending.baseFields(of: local.id, over: local.fields) else { return nil }
        ancestor.fields = fields
        return ancestor
    }

    /// Puts the server's version of a record back in place of the local one (`nil`: the server has none, so
    /// the record goes), for a local change that is being discarded.
    package func restoreServerVersion(of id: RecordID, server: Record?) {
        setSkippedVersion(nil, for: id)
        if let server {
            adopt(server)
            keepUnknownFields(of: server)
            // No change of it is left to merge: the record is the server's version again.
            zones.forgetMergeBase(of: id)
            zones.setFateUnknown(false, of: id)
            return
        }
        serverDeleted(id)
        if let removed = zones.record(for: id), zones.removeRecord(id), let key = observedKey(of: id, removed.type) {
            recordChangeHub.emit(zone: id.zone, changed: [key])
        }
        setChangeTag(nil, for: id)
    }

    private func adopt(_ record: Record) {
        zones.store(record)
        setChangeTag(record.changeTag, for: record.id)
        if let key = observedKey(of: record.id, record.type) {
            recordChangeHub.emit(zone: record.id.zone, changed: [key])
        }
    }

    /// The key under which ``RecordChangeHub`` tells observers about a change to the record: its type and
    /// name for a host record, the item type's record type and the article's ID for a built-in item.
    func observedKey(of id: RecordID, _ recordType: String) -> (recordType: String, name: String)? {
        guard !isHostRecord(id) else { return (recordType, id.name) }
        switch id.zone {
        case .readingList: return ReadingListEntry.observedKey(ofRecordNamed: id.name)
        case .readingHistory: return ReadingHistoryItem.observedKey(ofRecordNamed: id.name)
        default: return nil
        }
    }

    /// What applying fetched changes did.
    package struct FetchApplication: Sendable, Equatable {
        package var changed = 0
        package var deleted = 0
        package var malformed = 0
    }

    /// Applies a zone's fetched changes with pending changes laid over them, then saves the snapshot with
    /// the new token, in that order.
    ///
    /// A record with a pending save keeps the local change merged with the server's version (a pending
    /// edit beats a remote delete, too); a record with a pending delete is left to the delete, which the
    /// server refuses if the record changed since this device saw it. During a reset (``beginReset(of:)``),
    /// the final part deletes every record known when the reset began that no part returned, unless a
    /// change to it is pending.
    ///
    /// With `isFinal` false, the changes are the first pages of a fetch that goes on: they and their token
    /// are taken in memory, so that a fetch that fails later resumes after them, and the snapshot is written
    /// later (as after a local change). Only the final part decides which records the server no longer has
    /// (this device's creates it did not return, and a reset's unconfirmed records), since a later page may
    /// return them.
    package func applyFetchedChanges(
        in zone: ZoneID,
        changed: [Record],
        deleted: Set<RecordID>,
        token: ChangeToken,
        isFinal: Bool = true
    ) async throws -> FetchApplication {
        try checkOpen()
        let changed = keepingOwnUploads(changed)
        let own = ownWrites()
        var result: FetchApplication
        var malformed: [SyncEvent] = []
        var merged: [RecordID] = []
        var kept: [String] = []
        // What changed, for observers (``RecordStore/changes()``, ``ReadingList/changes()``).
        var observed: [(recordType: String, name: String)]? = recordChangeHub.isObserved ? [] : nil
        switch zone {
        case .readingList:
            result = Self.apply(
                changed, deleted, token, isFinal, zone: zone, to: &zones.readingList, pending: pending,
                registry: registry, own: own, merged: &merged, kept: &kept, observed: &observed,
                events: &malformed)
        case .readingHistory:
            result = Self.apply(
                changed, deleted, token, isFinal, zone: zone, to: &zones.history, pending: pending,
                registry: registry, own: own, merged: &merged, kept: &kept, observed: &observed,
                events: &malformed)
        default:
            result = Self.apply(
                changed, deleted, token, isFinal, zone: zone,
                to: &zones.hostZones[zone, default: ZoneState()],
                pending: pending, registry: registry, own: own, merged: &merged, kept: &kept,
                observed: &observed, events: &malformed)
        }
        // The records of owners whose pending edit beat their delete: saved again, as their owner is.
        if !kept.isEmpty { try resave(kept, in: zone) }
        // A pending save that stood for a delete met a version the delete never saw: as on a conflict, that
        // edit wins, and the save goes out as an update (see ``mergeServerRecord(_:sentWithoutTag:)``).
        for id in merged { pending.stopReplacing(id) }
        for event in malformed { eventHub.emit(event) }
        if let observed { recordChangeHub.emit(zone: zone, changed: observed) }
        stateDidChange(zone)
        if isFinal { try await persistSnapshot(of: zone) }
        result.malformed = malformed.count
        return result
    }

    private static func apply<Item: TableItem>(
        _ changed: [Record], _ deleted: Set<RecordID>, _ token: ChangeToken, _ isFinal: Bool,
        zone: ZoneID,
        to state: inout ZoneState<Item>, pending: PendingCommands, registry: RecordTypeRegistry, own: OwnWrites,
        merged: inout [RecordID], kept: inout [String],
        observed: inout [(recordType: String, name: String)]?,
        events: inout [SyncEvent]
    ) -> FetchApplication {
        var result = FetchApplication()
        var returned = Set<String>()
        for record in changed where record.id.zone == zone {
            returned.insert(record.id.name)
            guard state.owns(record.id.name) else {
                if applyHost(
                    record, to: &state, pending: pending, registry: registry, own: own, merged: &merged,
                    events: &events)
                {
                    observed?.append((record.type, record.id.name))
                    result.changed += 1
                }
                continue
            }
            guard let articleID = Item.articleID(fromRecordName: record.id.name) else { continue }
            let item: Item
            do {
                item = try Item(record: record)
            } catch {
                events.append(
                    .error(SyncProblem(.deviceError(error.code), zone: record.id.zone, message: error.message)))
                continue
            }
            let action = FetchedRecordRule.action(
                pendingIsDelete: pending.latestChange(for: record.id).map(\.isDelete),
                tagUnchanged: state.changeTag(of: record.id.name) == record.changeTag,
                sameContent: { state.items[articleID] == item })
            if action != .skipForPendingDelete { state.keepUnknownFields(of: record) }
            switch action {
            case .ignore:
                continue
            case .take:
                state.items[articleID] = item
            case .merge:
                state.items[articleID] = state.items[articleID].map { $0.merged(with: item) } ?? item
                state.sendWhole.insert(record.id.name)
                merged.append(record.id)
            case .skipForPendingDelete:
                state.skippedVersions[record.id.name] = record.changeTag
                continue
            }
            state.setChangeTag(record.changeTag, of: record.id.name)
            observed?.append((Item.recordType, articleID))
            result.changed += 1
        }
        var gone = deleted.filter { $0.zone == zone }.map(\.name)
        // Records this device created after its token exist on the server only if the fetch returned them:
        // those returned so far are confirmed, and once the fetch is over, the others are gone.
        if isFinal {
            gone += state.createdSinceFetch.subtracting(returned).subtracting(gone)
            state.createdSinceFetch = []
        } else if !state.createdSinceFetch.isEmpty {
            state.createdSinceFetch.subtract(returned)
        }
        if var unconfirmed = state.unconfirmedByReset {
            state.unconfirmedByReset = nil  // So the set changes in place rather than as a copy.
            unconfirmed.subtract(returned)
            if isFinal {
                gone += unconfirmed.subtracting(gone)
            } else {
                state.unconfirmedByReset = unconfirmed
            }
        }
        // An owner the server deleted whose pending edit keeps it here (an edit beats a delete it did not see):
        // CloudKit deleted the records it owns with it, and they come back with it, as that edit is sent as a
        // new record. Its deletes may be in this fetch or a later one (which then meets their pending saves).
        var keptOwned = Set<String>()
        if state.hostRecords.hasDependents {
            let survivors = gone.filter {
                pending.latestChange(for: RecordID(zone: zone, name: $0)).map { !$0.isDelete } ?? false
            }
            for (name, _) in state.hostRecords.dependentsWithOwners(of: survivors)
            where pending.latestChange(for: RecordID(zone: zone, name: name)) == nil {
                keptOwned.insert(name)
            }
            kept += keptOwned.sorted()
        }
        for name in gone {
            guard !keptOwned.contains(name) else {
                // Saved again (as new: the server has no version of it to update).
                state.setChangeTag(nil, of: name)
                continue
            }
            let owned = state.owns(name)
            guard !owned || Item.articleID(fromRecordName: name) != nil else { continue }
            state.setChangeTag(nil, of: name)
            state.skippedVersions[name] = nil
            state.unknownFields[name] = nil
            if !state.sendWhole.isEmpty { state.sendWhole.remove(name) }
            if !state.mergeBases.isEmpty { state.mergeBases[name] = nil }
            if !state.savesOfUnknownFate.isEmpty { state.savesOfUnknownFate.remove(name) }
            guard pending.latestChange(for: RecordID(zone: zone, name: name)) == nil else { continue }
            // Before the record goes, while its type can be read; only for observers.
            var key: (recordType: String, name: String)?
            if observed != nil {
                key = owned ? Item.observedKey(ofRecordNamed: name) : state.hostRecords[name].map { ($0.type, name) }
            }
            if state.removeRecord(named: name) {
                result.deleted += 1
                if let key { observed?.append(key) }
            }
        }
        state.changeToken = token
        return result
    }

    /// Applies one fetched host record (see
    /// ``apply(_:_:_:_:zone:to:pending:registry:merged:kept:observed:events:)``),
    /// kept as it came, as the server holds it. A record of a registered type that does not read as its
    /// value is reported too: ``RecordStore/values()`` leaves it out, and a later version of the type that
    /// reads it (a field made optional) finds it here, where a record dropped now would not be fetched again.
    /// Returns whether the zone's data changed.
    private static func applyHost<Item: TableItem>(
        _ record: Record, to state: inout ZoneState<Item>, pending: PendingCommands, registry: RecordTypeRegistry,
        own: OwnWrites, merged: inout [RecordID], events: inout [SyncEvent]
    ) -> Bool {
        let name = record.id.name
        let entry = registry.entry(for: record)
        if let entry {
            do throws(FlatSyncError) {
                try entry.check(record)
            } catch {
                events.append(
                    .error(SyncProblem(.deviceError(error.code), zone: record.id.zone, message: error.message)))
            }
        }
        let action = FetchedRecordRule.action(
            pendingIsDelete: pending.latestChange(for: record.id).map(\.isDelete),
            tagUnchanged: state.hostRecords.changeTag(of: name) == record.changeTag,
            sameContent: {
                state.hostRecords[name].map { $0.hasSameContent(as: record) || differsOnlyByUploads($0, record) }
                    ?? false
            })
        // The server's version shows whether a save of unknown fate reached it: merged over, it is known.
        let fateUnknown = !state.savesOfUnknownFate.isEmpty && state.savesOfUnknownFate.remove(name) != nil
        switch action {
        case .ignore:
            return false
        case .take:
            state.hostRecords[name] = record
            if !state.mergeBases.isEmpty { state.mergeBases[name] = nil }
        case .merge:
            let local = state.hostRecords[name]
            if let local, local.type != record.type {
                // A record of another type under the name a pending save holds: neither merges with the other,
                // and the save must not take its tag, which would send it as an update turning that record into
                // this one (red team 10). Kept as it is, the save meets the server's record when it is sent, and
                // is parked there. Unless the version is this device's own, which a pending replace saw (a save
                // answered unheard, then the record deleted and made again as this type): it replaces it.
                if keepsReplacing(
                    over: record, own: own, mergedWhole: state.sendWhole.contains(name), pending: pending)
                {
                    state.hostRecords.setChangeTag(record.changeTag, of: name)
                }
                return false
            }
            var mine: Record?
            if let local, local.type == record.type, let entry {
                let common = ancestor(
                    of: local, server: record, own: own, known: !fateUnknown,
                    mergeBase: state.mergeBases[name], pending: pending)
                mine = entry.merge(local, record, common, pending.changedKeys(of: record.id))
            }
            state.hostRecords[name] = mine ?? local ?? record
            state.mergeBases[name] = record.fields
            // A version this device wrote (a save whose answer was lost or came as an error) is one a pending
            // save standing for a delete saw: it still replaces (whole, so not marked), and its owner's
            // cascaded deletes still go.
            if !keepsReplacing(
                over: record, own: own, mergedWhole: state.sendWhole.contains(name), pending: pending)
            {
                state.sendWhole.insert(name)
                merged.append(record.id)
            }
        case .skipForPendingDelete:
            state.skippedVersions[name] = record.changeTag
            return false
        }
        state.hostRecords.setChangeTag(record.changeTag, of: name)
        return true
    }

    /// True when `local` and `server` differ only where `local` holds an asset made on this device and
    /// `server` an asset of its size: what the server holds of this device's own save of the record, its
    /// assets as their uploads' descriptions. Asked only of the version whose tag this device last saw with
    /// nothing pending (no other save came between): kept, the device goes on reading its assets from its
    /// own directory, rather than downloading the bytes it uploaded.
    static func differsOnlyByUploads(_ local: Record, _ server: Record) -> Bool {
        guard local.id == server.id, local.type == server.type, local.fields.count == server.fields.count,
            local.fields.values.contains(where: CloudAsset.isLocal)
        else { return false }
        for (key, value) in local.fields where value != server.fields[key] {
            guard CloudAsset.isLocal(value), let mine = CloudAsset(value), let theirs = server.fields[key]?.assetValue,
                theirs.fileChecksum != nil, theirs.size == mine.size
            else { return false }
        }
        return true
    }

    /// Queues saves of the zone's local data for a zone about to be created on the server (history as
    /// ``HistoryRetention`` allows: the newest 1,000 items, anything newer than 28 days, and every item
    /// pruning must keep). Every record
    /// goes, pending or not: a pending change may already be on its way to the zone that is gone, or parked.
    /// Returns how many were queued.
    package func seed(_ zone: ZoneID) async throws -> Int {
        var records: [Record]
        switch zone {
        case .readingList:
            records = zones.readingList.items.values.map(\.record).sorted { $0.id < $1.id }
        case .readingHistory:
            let now = options.currentDate()
            records = options.historyRetention.itemsForSeeding(zones.history.items.values, now: now).map(
                \.record
            ).sorted { $0.id < $1.id }
        default:
            records = []
        }
        // A parent before the records that refer to it (see ``RecordOrder``).
        records += RecordOrder.parentsFirst(zones.hostRecords(in: zone).records)
        guard !records.isEmpty else { return 0 }
        return try await enqueueSaves(records, in: zone)
    }

    /// Logs saves of records the store already holds as one durable mutation.
    private func enqueueSaves(_ records: [Record], in zone: ZoneID) async throws -> Int {
        try checkMutable()
        let sequence = takeSequence()
        let changes = records.map { RecordChange.save($0, changedKeys: Set($0.fields.keys), sequence: sequence) }
        let mutation = Mutation(sequence: sequence, zone: zone, changes: changes)
        zones.setAppliedThroughSequence(sequence, of: zone)
        // Sent anew, whole, to a zone made again: they stand on no server version now.
        for record in records where isHostRecord(record.id) { zones.forgetMergeBase(of: record.id) }
        pending.enqueue(mutation)
        try await record([.mutation(mutation)])
        stateDidChange(zone)
        return changes.count
    }

    /// The change pending for a record, if any.
    package func pendingChange(for id: RecordID) -> RecordChange? {
        pending.latestChange(for: id)
    }
}

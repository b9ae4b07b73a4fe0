#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Writing host-defined records (see ``RecordStore``), and the deletes a `deleteSelf` reference ties to
/// a deleted record.
extension LocalStore {
    /// Applies saves and deletes of host records of `zone`, of any registered types, as one mutation and
    /// logs it; returns how many records changed and what to wait on before the mutation counts as done
    /// (nil when nothing changed). `deletes` maps the name of each record to delete to its record type: a
    /// record stored as another type is left alone.
    ///
    /// A save changes the fields that differ from the stored record (keeping fields the type does not
    /// declare, which another client wrote); its change names those keys, so it coalesces with the
    /// record's pending change field by field. A delete also deletes every record a chain of `deleteSelf`
    /// references ties to it. Everything is checked before anything changes: a type not registered in the
    /// zone, a save of a record stored as another type, or a save with a `deleteSelf` reference to a record
    /// that neither exists nor is saved in the same mutation, throws
    /// ``FlatSyncError/Code-swift.struct/invalidArgument``.
    ///
    /// - Parameter types: record types to check are registered even when no save or delete names them (a
    ///   store's empty save).
    package func applyHostMutation(
        in zone: ZoneID, saves: [Record], deletes: [String: String], types: Set<String> = []
    ) throws -> Applied {
        var entries: [String: RecordTypeRegistry.Entry] = [:]
        for recordType in Set(saves.map(\.type)).union(deletes.values).union(types).sorted() {
            guard let entry = registry.entry(zone: zone, recordType: recordType) else {
                throw FlatSyncError(
                    .invalidArgument,
                    "The record type \(recordType) of zone \(zone) was not registered when the store was opened: "
                        + "list its type in SyncContext.Configuration.recordTypes (or, for a LocalStore alone, "
                        + "LocalStore.Options.recordTypes).")
            }
            entries[recordType] = entry
        }
        try checkMutable()
        // The later save of a record named twice wins, as it would as a mutation of its own.
        var newRecords: [String: Record] = [:]
        for record in saves { newRecords[record.id.name] = try keepingStoredAssets(record) }
        let deleted = Set(deletes.keys)
        // What the deletes take with them, the saves in place (a batch's): a save among it would be deleted
        // at once. A delete of a record stored as another type takes nothing.
        var cascaded = Set<String>()
        let present = deletes.filter { zones.record(for: RecordID(zone: zone, name: $0.key))?.type == $0.value }
            .keys.sorted()
        if !present.isEmpty {
            var trial = zones.hostRecords(in: zone)
            for (name, record) in newRecords where !deleted.contains(name) { trial[name] = record }
            cascaded = Set(trial.cascade(from: present))
        }
        for record in saves {
            if let stored = zones.record(for: record.id), stored.type != record.type {
                throw FlatSyncError(
                    .invalidArgument, "The record \(record.id) is a \(stored.type), not a \(record.type).")
            }
            guard !cascaded.contains(record.id.name) else {
                throw FlatSyncError(
                    .invalidArgument,
                    "The record \(record.id) is saved, and deleted by a delete of the same mutation through its "
                        + "deleteSelf references.")
            }
            for reference in record.references where reference.action == .deleteSelf {
                let target = RecordID(zone: zone, name: reference.recordName)
                let exists = newRecords[target.name] != nil || zones.record(for: target) != nil
                guard exists, !cascaded.contains(target.name) else {
                    throw FlatSyncError(
                        .invalidArgument,
                        "The record \(record.id) refers (deleteSelf) to \(target), which does not exist: it would be "
                            + "deleted at once.")
                }
            }
        }
        try checkDeleteSelfLimit(in: zone, saving: newRecords, deleting: cascaded)

        let sequence = nextMutationSequence
        var changes: [RecordChange] = []
        var changedNames: [(recordType: String, name: String)] = []
        // The records saved over a version they were merged with, and the keys their pending changes changed
        // (see ``RecordChange/rebases``).
        var mergedOver: [String: (base: [String: FieldValue], pendingKeys: Set<String>)] = [:]
        for record in newRecords.values {
            if let base = zones.mergeBase(of: record.id) {
                mergedOver[record.id.name] = (base, pending.changedKeys(of: record.id))
            }
        }
        // Changed in place (a copy of a large zone's table for every save would cost its size each time);
        // nothing below throws, so memory changes only once every check above has passed.
        zones.withHostRecords(in: zone) { table in
            for name in newRecords.keys.sorted() where !deleted.contains(name) {
                let new = newRecords[name]!
                let old = table[name]
                var fields = new.fields
                if let old, let entry = entries[new.type] {
                    // Fields of the stored record the type does not declare were written by another client.
                    for (key, value) in old.fields where entry.fieldTypes[key] == nil && fields[key] == nil {
                        fields[key] = value
                    }
                }
                let oldFields = old?.fields ?? [:]
                var keys = Set<String>()
                for (key, value) in fields where oldFields[key] != value { keys.insert(key) }
                for key in oldFields.keys where fields[key] == nil { keys.insert(key) }
                guard !keys.isEmpty || old == nil else { continue }
                let record = Record(id: new.id, type: new.type, fields: fields)
                table[name] = record
                // With the changed keys' values before it, for a host's merge (a new record has none). Over a
                // merged version, its values for every key changed since: the log has them nowhere else.
                if old == nil {
                    changes.append(.save(record, changedKeys: keys, sequence: sequence))
                } else if let (base, pendingKeys) = mergedOver[name] {
                    keys.formUnion(pendingKeys)
                    changes.append(
                        .save(
                            record, changedKeys: keys, baseValues: base.filter { keys.contains($0.key) },
                            rebases: true, sequence: sequence))
                } else {
                    changes.append(
                        .save(
                            record, changedKeys: keys, baseValues: oldFields.filter { keys.contains($0.key) },
                            sequence: sequence))
                }
                changedNames.append((new.type, name))
            }
            for (name, owner) in table.cascadeWithOwners(from: present) {
                guard let record = table[name] else { continue }
                table[name] = nil
                changes.append(Self.delete(RecordID(zone: zone, name: name), owner: owner, sequence: sequence))
                changedNames.append((record.type, name))
            }
        }
        guard !changes.isEmpty else { return (0, nil) }
        // A record deleted here no longer stands on the version it was merged with: made again, it has none.
        for change in changes where change.isDelete { zones.forgetMergeBase(of: change.recordID) }
        _ = takeSequence()
        zones.setAppliedThroughSequence(sequence, of: zone)
        let changed = changes.count
        let durable = try logAndQueue(
            Mutation(sequence: sequence, zone: zone, changes: RecordOrder.changesInOrder(changes)))
        recordChangeHub.emit(zone: zone, changed: changedNames)
        return (changed, durable)
    }

    /// The deletes of the host records that a chain of `deleteSelf` references ties to the records that
    /// `changes` delete, in the zone whose host records are `table` (which loses them), as changes of the
    /// mutation numbered `sequence`. Empty when the zone holds no host records, at the cost of one check.
    static func cascadedDeletes(
        of changes: [RecordChange], in zone: ZoneID, table: inout HostRecordTable, sequence: UInt64,
        hub: RecordChangeHub
    ) -> [RecordChange] {
        guard table.hasDependents else { return [] }
        let targets = changes.lazy.filter(\.isDelete).map(\.recordID.name)
        guard !targets.isEmpty else { return [] }
        var deletes: [RecordChange] = []
        var names: [(recordType: String, name: String)] = []
        for (name, owner) in table.dependentsWithOwners(of: Array(targets)) {
            guard let record = table[name] else { continue }
            table[name] = nil
            deletes.append(.cascadedDelete(RecordID(zone: zone, name: name), owner: owner, sequence: sequence))
            names.append((record.type, name))
        }
        hub.emit(zone: zone, changed: names)
        return deletes
    }

    /// A delete of `id`: one the user asked for when `owner` is nil, else one a cascade from the record named
    /// `owner` made (``RecordChange/cascadeOwner``), which waits for the owner's delete and is never sent.
    private static func delete(_ id: RecordID, owner: String?, sequence: UInt64) -> RecordChange {
        guard let owner else { return .delete(id, sequence: sequence) }
        return .cascadedDelete(id, owner: owner, sequence: sequence)
    }

    /// Deletes, as one mutation, the host records of `zone` that a chain of `deleteSelf` references ties to
    /// one of `owners` that the zone does not have and no pending change touches (checked again here: the
    /// caller may have asked the server meanwhile): the records of an owner that is gone, which CloudKit
    /// did not delete with it because they were saved after it went (see
    /// `SyncContext.deleteOrphans(in:via:epoch:)`), or of a new record dropped with its refused change.
    /// Returns how many.
    package func deleteOrphans(in zone: ZoneID, owners: [String]) async throws -> Int {
        let orphans = orphanedRecords(in: zone, owners: owners)
        guard !orphans.isEmpty else { return 0 }
        try checkMutable()
        let sequence = takeSequence()
        var changes: [RecordChange] = []
        var names: [(recordType: String, name: String)] = []
        zones.withHostRecords(in: zone) { table in
            for (name, owner) in table.cascadeWithOwners(from: orphans) {
                guard let record = table[name] else { continue }
                table[name] = nil
                changes.append(Self.delete(RecordID(zone: zone, name: name), owner: owner, sequence: sequence))
                names.append((record.type, name))
            }
        }
        zones.setAppliedThroughSequence(sequence, of: zone)
        let durable = try logAndQueue(Mutation(sequence: sequence, zone: zone, changes: changes))
        recordChangeHub.emit(zone: zone, changed: names)
        try await durable.wait()
        return changes.count
    }
}

extension LocalStore {
    /// The records `deleteSelf` references of `zone` point at that the zone does not have and no pending
    /// change touches: the owners whose records ``deleteOrphans(in:owners:)`` would delete.
    package func missingOwners(in zone: ZoneID) -> [String] {
        zones.hostRecords(in: zone).ownerNames.filter { isMissingOwner($0, in: zone) }.sorted()
    }

    /// True when the zone does not have the record and no pending change touches it. A pending save brings
    /// the record; a pending delete may yet lose to another device's edit, which brings it back with the
    /// records that belong to it (and if it wins, CloudKit deletes them with it, and a fetch brings their
    /// deletes).
    private func isMissingOwner(_ name: String, in zone: ZoneID) -> Bool {
        let id = RecordID(zone: zone, name: name)
        return pending.latestChange(for: id) == nil && zones.record(for: id) == nil
    }

    /// The host records of `zone` that a `deleteSelf` reference ties to one of `owners` that is missing
    /// (``isMissingOwner(_:in:)``).
    private func orphanedRecords(in zone: ZoneID, owners: [String]) -> [String] {
        // Read through a copy, which shares the table's storage: nothing changes while it is held.
        let table = zones.hostRecords(in: zone)
        var orphans = Set<String>()
        for target in owners where isMissingOwner(target, in: zone) {
            orphans.formUnion(table.dependents(of: target))
        }
        return orphans.sorted()
    }
}

extension LocalStore {
    /// The saves among `changes` that wait for a record they belong to (a `deleteSelf` reference), each with
    /// the owners it waits for: records this device has yet to save and the server has not confirmed (no
    /// change tag, or a save that stands for a delete and a new record, whose tag may be of a record the
    /// server deleted). Sent before its owner, such a record would be on the server without it, and another
    /// device, finding it without the record it belongs to, takes it for the leftover of a deleted one and
    /// deletes it, on every device (``deleteOrphans(in:owners:)``). Held back, it goes once the record it
    /// belongs to is on the server; if that record's change is parked, it waits with it (see
    /// `SyncContext.holdBack(_:waitingFor:)`).
    package func ownersAwaited(by changes: [RecordChange]) -> [RecordID: Set<RecordID>] {
        var waiting: [RecordID: Set<RecordID>] = [:]
        for change in changes where !change.isDelete && isHostRecord(change.recordID) {
            let owners = change.carriedRecord.owners.filter { owner in
                guard let ownerChange = pending.latestChange(for: owner), !ownerChange.isDelete else { return false }
                // A save that stands for a delete and a new record may follow a delete the server took (its
                // answer lost): the change tag is then of a record that is gone.
                return zones.changeTag(for: owner) == nil || ownerChange.replacesRecord
            }
            if !owners.isEmpty { waiting[change.recordID] = Set(owners) }
        }
        return waiting
    }
}

extension RecordOrder {
    /// A mutation's changes with every save after the saves of the records it refers to.
    static func changesInOrder(_ changes: [RecordChange]) -> [RecordChange] {
        let saves = changes.filter { !$0.isDelete }
        guard saves.count > 1 else { return changes }
        let byName = Dictionary(saves.map { ($0.recordID.name, $0) }, uniquingKeysWith: { $1 })
        let ordered = parentsFirst(saves.map(\.carriedRecord)).compactMap { byName[$0.id.name] }
        return ordered + changes.filter(\.isDelete)
    }
}

extension LocalStore {
    /// The key of every record in `zone` (see ``observedKey(of:_:)``), when someone listens to
    /// ``RecordStore/changes()`` or a built-in store's: what a wipe of the zone removes, for telling them.
    func observedKeys(in zone: ZoneID) -> [(recordType: String, name: String)] {
        guard recordChangeHub.isObserved else { return [] }
        let table = zones.hostRecords(in: zone)
        var keys = table.entries.map { (table.recordType(of: $0), $0.name) }
        switch zone {
        case .readingList: keys += zones.readingList.items.keys.map { (ReadingListEntry.recordType, $0) }
        case .readingHistory: keys += zones.history.items.keys.map { (ReadingHistoryItem.recordType, $0) }
        default: break
        }
        return keys
    }

    /// The host records of `zone`, for ``RecordStore``'s reads.
    @usableFromInline package func hostRecordTable(in zone: ZoneID) -> HostRecordTable {
        zones.hostRecords(in: zone)
    }

    /// The most `deleteSelf` references that may point at one record: CloudKit's limit (PropertyMetrics,
    /// "Maximum number of source references to a single target where the action is delete self").
    package static let maximumDeleteSelfReferences = 750

    /// Throws ``FlatSyncError/Code-swift.struct/invalidArgument`` when the mutation would leave more than
    /// ``maximumDeleteSelfReferences`` of the zone's records with a `deleteSelf` reference to one record, as
    /// far as this device knows them: refused here, before anything is written, rather than by the server
    /// after the change was acknowledged.
    private func checkDeleteSelfLimit(
        in zone: ZoneID, saving newRecords: [String: Record], deleting deleted: Set<String>
    ) throws(FlatSyncError) {
        var referrers: [String: Set<String>] = [:]
        for (name, record) in newRecords where !deleted.contains(name) {
            for reference in record.references where reference.action == .deleteSelf && reference.recordName != name {
                referrers[reference.recordName, default: []].insert(name)
            }
        }
        guard !referrers.isEmpty else { return }
        let table = zones.hostRecords(in: zone)
        for (target, names) in referrers.sorted(by: { $0.key < $1.key }) {
            var after = Set(table.dependents(of: target))
            after.subtract(newRecords.keys)
            after.subtract(deleted)
            after.formUnion(names)
            guard after.count <= Self.maximumDeleteSelfReferences else {
                throw FlatSyncError(
                    .invalidArgument,
                    "\(after.count) records would refer (deleteSelf) to \(RecordID(zone: zone, name: target)); CloudKit "
                        + "takes at most \(Self.maximumDeleteSelfReferences).")
            }
        }
    }
}

extension LocalStore {
    /// The deletes among `changes` that a cascade made (``RecordChange/cascadeOwner``) and that are ready to
    /// settle: their owner has no delete pending any more (nor a save that replaces it). The owner's delete
    /// went through (CloudKit then deleted the record with it), lost to an edit this device had not seen, or
    /// was discarded; only the server can tell which, so ``settleCascadedDeletes(_:commandOf:serverVersions:)``
    /// asks it.
    package func cascadedDeletesToSettle(_ changes: [RecordChange]) -> [RecordChange] {
        changes.filter(isOwnersDeleteOver)
    }

    /// True when `change` is a cascade's delete whose owner has no delete, nor a save that replaces it,
    /// pending.
    private func isOwnersDeleteOver(_ change: RecordChange) -> Bool {
        guard let owner = change.cascadeOwner else { return false }
        return !pending.hasPendingDeleteOrReplace(of: RecordID(zone: change.recordID.zone, name: owner))
    }

    /// The pending deletes that cascades from `owners` made, each with the command holding it.
    package func pendingCascadedDeletes(of owners: [RecordID]) -> [(change: RecordChange, command: CommandID)] {
        owners.flatMap { owner in
            pending.cascadedDeletes(of: owner).compactMap { change in
                pending.commandID(of: change.recordID).map { (change, $0) }
            }
        }
    }

    /// Settles deletes a cascade made, by the server's versions of their records (`serverVersions`, from a
    /// lookup): a record the server still has comes back as the server has it (its owner's delete lost, or
    /// it no longer belongs to that owner there); one it lacks stays deleted. Each delete then leaves its
    /// command (`commandOf`). Returns the records settled.
    ///
    /// A change made since to one of the records, or a new delete of its owner, is the user's latest word:
    /// that record is left alone. As when refused changes are discarded, the snapshot with the server's
    /// versions is written before the log lets the deletes go, so a crash in between leaves the delete
    /// pending, to settle again.
    package func settleCascadedDeletes(
        _ changes: [RecordChange], commandOf: [RecordID: CommandID], serverVersions: [RecordID: Record]
    ) async throws -> [RecordID] {
        try checkWritable()
        let current = changes.filter { isReadyToSettle($0, in: commandOf[$0.recordID]) }
        guard !current.isEmpty else { return [] }
        for change in current { restoreServerVersion(of: change.recordID, server: serverVersions[change.recordID]) }
        for zone in Set(current.map(\.recordID.zone)).sorted() { try await persistSnapshot(of: zone) }
        // Checked again after the waits: a mutation may have changed a record meanwhile.
        let settled = current.filter { isReadyToSettle($0, in: commandOf[$0.recordID]) }
        for (command, changes) in Dictionary(grouping: settled, by: { commandOf[$0.recordID]! })
            .sorted(by: { $0.key < $1.key })
        {
            try await acknowledge(changes.map(\.recordID), in: command)
        }
        return settled.map(\.recordID)
    }

    /// True when `command` holds `change`, no newer change of its record waits, and its owner is not being
    /// deleted again.
    private func isReadyToSettle(_ change: RecordChange, in command: CommandID?) -> Bool {
        guard let command, pending.change(of: change.recordID, in: command) == change else { return false }
        return pending.latestChange(for: change.recordID) == change && isOwnersDeleteOver(change)
    }

    /// Makes the pending deletes that cascades from `owners` made plain deletes, sent like any other, as one
    /// mutation: the save of each owner that stood for its delete (``RecordChange/replacesRecord``) replaced
    /// the server's record, which deletes nothing there, but the user deleted them all the same. Called
    /// before the owners' saves are acknowledged, so a restart that finds those saves acknowledged finds
    /// this too. Returns how many.
    package func releaseCascadedDeletes(of owners: [RecordID]) throws -> Int {
        var byZone: [ZoneID: [RecordChange]] = [:]
        for owner in owners {
            for change in pending.cascadedDeletes(of: owner) {
                byZone[owner.zone, default: []].append(.delete(change.recordID))
            }
        }
        guard !byZone.isEmpty else { return 0 }
        try checkMutable()
        for (zone, deletes) in byZone.sorted(by: { $0.key < $1.key }) { try logOwnMutation(deletes, in: zone) }
        return byZone.values.reduce(0) { $0 + $1.count }
    }

    /// Logs and queues, as one mutation, changes the engine makes of records memory already holds as they
    /// say (a release, a resave): the record data does not change, only what waits to be sent.
    private func logOwnMutation(_ changes: [RecordChange], in zone: ZoneID) throws {
        let sequence = takeSequence()
        zones.setAppliedThroughSequence(sequence, of: zone)
        _ = try logAndQueue(Mutation(sequence: sequence, zone: zone, changes: changes))
    }
}

extension LocalStore {
    /// The server no longer has `id`, which another device deleted while this one edited it: the edit beats
    /// the delete, so its save goes out as a new record (its change tag forgotten), and the records it owns
    /// here are saved again with it (``resaveOwned(by:)``). One step, so that no snapshot is written between
    /// the two: a restart that found the tag forgotten but no resave logged would create the record alone,
    /// and nothing would bring back what it owns. Returns how many owned records were saved again.
    package func recreate(_ id: RecordID) throws -> Int {
        let resaved = try resaveOwned(by: [id])
        forgetChangeTag(id)
        return resaved
    }

    /// Saves again, as one mutation, the host records of `zone` that a chain of `deleteSelf` references ties
    /// to `owners`, which the server deleted while this device edited them: the edit beats the delete (it is
    /// sent as a new record), and the records the owner holds come back with it, as CloudKit deleted them
    /// with it. A record with a change pending is left to that change. Returns how many.
    ///
    /// CloudKit does not say which deletes a cascade made: a record of the owner that another device
    /// deleted on its own, since this device last fetched, comes back too.
    package func resaveOwned(by owners: [RecordID]) throws -> Int {
        var saved = 0
        for (zone, ids) in Dictionary(grouping: owners, by: \.zone).sorted(by: { $0.key < $1.key }) {
            let table = zones.hostRecords(in: zone)
            guard table.hasDependents else { continue }
            let names = table.dependentsWithOwners(of: ids.map(\.name)).map(\.name)
                .filter { pending.latestChange(for: RecordID(zone: zone, name: $0)) == nil }
            saved += try resave(names, in: zone)
        }
        return saved
    }

    /// Saves the host records `names` of `zone` again, whole, as one mutation: each is sent as it is here
    /// (as a new record where the server has no version of it). Returns how many.
    @discardableResult
    func resave(_ names: [String], in zone: ZoneID) throws -> Int {
        let records = names.compactMap { zones.record(for: RecordID(zone: zone, name: $0)) }
        guard !records.isEmpty else { return 0 }
        try checkMutable()
        let changes = records.map { RecordChange.save($0, changedKeys: Set($0.fields.keys)) }
        try logOwnMutation(RecordOrder.changesInOrder(changes), in: zone)
        // Sent anew, whole: they stand on no server version now.
        for record in records { zones.forgetMergeBase(of: record.id) }
        return records.count
    }

    /// `record` with each asset field as the stored record holds it, so that the download link of a fresher
    /// copy does not count as a change. A field may also take an asset made on this device, whose file the
    /// store has (``makeAsset(_:)``); not an asset the stored record's field does not hold, whose
    /// description CloudKit takes back only from an upload (see ``CloudAsset``).
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/invalidArgument`` for a field holding an asset the stored
    ///   record's field does not hold and that was not made here (or whose file is gone).
    private func keepingStoredAssets(_ record: Record) throws(FlatSyncError) -> Record {
        guard record.fields.values.contains(where: CloudAsset.holdsAssets) else { return record }
        let storedRecord = zones.record(for: record.id)
        let stored = storedRecord?.fields ?? [:]
        // Deleted here and not sent yet (the server's version is known by its tag, not held): the record
        // comes back with the asset it held. Its description cannot be checked against a version this
        // device no longer holds; the save goes out as a replace, whose assets are asked for again
        // (`assets/rereference`), and one the server's record does not hold is refused there.
        let undoesADelete = storedRecord == nil && changeTag(for: record.id) != nil
        var kept = record
        for key in record.fields.keys.sorted() {
            let value = record.fields[key]!
            guard CloudAsset.holdsAssets(value) else { continue }
            if let old = stored[key], let oldAssets = CloudAsset.identities(in: old),
                oldAssets == CloudAsset.identities(in: value)
            {
                kept.fields[key] = old
                continue
            }
            if undoesADelete, CloudAsset(value)?.fileChecksum != nil { continue }
            if let asset = CloudAsset(value), asset.localFile != nil {
                guard hasLocalFile(asset) else {
                    throw FlatSyncError(
                        .invalidArgument,
                        "The record \(record.id)'s field \(key) holds an asset made here whose file is gone (an asset "
                            + "no record held when the store opened was deleted): make it again with makeAsset(_:).")
                }
                continue
            }
            throw FlatSyncError(
                .invalidArgument,
                "The record \(record.id)'s field \(key) holds an asset its stored record does not: CloudKit takes an "
                    + "asset's description back only from an upload, so a save may keep a field's asset, remove it, "
                    + "or give it one made here with makeAsset(_:), not another record's.")
        }
        return kept
    }
}

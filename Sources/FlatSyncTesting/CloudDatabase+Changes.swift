import FlatSync

extension CloudDatabase {
    /// The zones that changed or were deleted since a database token, at most ``databaseChangesLimit``
    /// zones (or `resultsLimit`, if smaller) at a time.
    ///
    /// - A zone is *changed* when it exists now and was created, or had a record saved or deleted,
    ///   after the token. From `nil`, every existing zone is changed.
    /// - A zone is *deleted* when it existed at the token and was deleted after it (so a zone created
    ///   and deleted since the token is not mentioned). The reason is
    ///   `ZoneDeletion.Reason.deletedByUser` when any deletion since the token was the user's, so a
    ///   client never re-uploads data the user threw away. A zone deleted and created again since the
    ///   token is in both lists. With ``reportsDeletedZonesAsChanged``, a deleted zone that does not exist
    ///   now is listed as changed instead.
    ///
    /// Zones are served in name order, each whole on one page. When more remain, `DatabaseChanges.moreComing`
    /// is true and the token continues after the page's last zone; the last page's token stands where the
    /// database was when the first page was served, so a zone that changed while the client was paging is
    /// reported again by the next fetch rather than missed (CloudKit documents the loop, not how it pages:
    /// ckws.md, `changes/database`). Database tokens expire only through ``expireAllChangeTokens()`` (the
    /// history limit applies to zones).
    ///
    /// - Throws: `CloudError.Code.changeTokenExpired` for a token this server cannot use.
    package mutating func fetchDatabaseChanges(
        since token: ChangeToken?, resultsLimit: Int? = nil
    ) throws(CloudError) -> DatabaseChanges {
        let position = try token.map { (token) throws(CloudError) in try readDatabaseToken(token) }
        let since = position.map(\.since)
        var changed: [ZoneID] = []
        var deleted: [ZoneDeletion] = []
        var names: [String] = []
        let limit = max(1, min(resultsLimit ?? .max, databaseChangesLimit))
        for zone in zones.values.sorted(by: { $0.id.name < $1.id.name }) {
            if let after = position?.paging?.after, zone.id.name <= after { continue }
            var isChanged = zone.exists && since.map { zone.changedAt > $0 } ?? true
            var deletion: ZoneDeletion?
            if let since {
                let deletionsSince = zone.deletions.filter { $0.deletedAt > since }
                if deletionsSince.contains(where: { $0.createdAt <= since }) {
                    let byUser = deletionsSince.contains(where: \.byUser)
                    deletion = ZoneDeletion(zone: zone.id, reason: byUser ? .deletedByUser : .deleted)
                }
            }
            if reportsDeletedZonesAsChanged, !zone.exists, deletion != nil {
                deletion = nil
                isChanged = true
            }
            guard isChanged || deletion != nil else { continue }
            guard names.count < limit else {
                // One more zone than fits: the page ends at the last one served.
                let paging = (startedAt: position?.paging?.startedAt ?? databaseSequence, after: names.last!)
                return DatabaseChanges(
                    changedZones: changed, deletedZones: deleted,
                    token: makeDatabaseToken(DatabasePosition(since: since ?? 0, paging: paging)), moreComing: true)
            }
            names.append(zone.id.name)
            if isChanged { changed.append(zone.id) }
            if let deletion { deleted.append(deletion) }
        }
        let end = position?.paging?.startedAt ?? databaseSequence
        return DatabaseChanges(
            changedZones: changed, deletedZones: deleted, token: makeDatabaseToken(DatabasePosition(since: end)),
            moreComing: false)
    }

    /// The net changes to a zone since a token, at most `resultsLimit` records and deletions at a time.
    ///
    /// Net means: a record created or changed since the token is returned once, as the server holds it
    /// now (created then changed three times: once); a record is reported deleted only if it existed
    /// at the token and does not exist now (created and deleted since the token: not mentioned;
    /// deleted, re-created and deleted again: reported if it existed at the token). From `nil`, the
    /// zone's records are returned, and deletions only when ``reportsDeletionsFromNoToken`` is set: then
    /// the first page also reports every deletion the zone's history holds that fits in it, and later pages
    /// the deletions of records that existed when paging began, as from any token (which CloudKit Web
    /// Services does is not known).
    ///
    /// Changes are served in the order they were last made. When more than `resultsLimit` remain,
    /// `ZoneChanges.moreComing` is true and the returned token continues after the last one
    /// served, so pages never skip or repeat a record; a record changed again between two pages comes
    /// again in a later page, with its new version. Deletions of records delivered on earlier pages are
    /// always reported, because the token remembers where paging started (so a page may also report
    /// the deletion of a record created and deleted while the client was paging; deleting a record it
    /// does not hold is a no-op for a client).
    ///
    /// - Throws: `CloudError.Code.zoneNotFound` or
    ///   `CloudError.Code.userDeletedZone` when the zone does not exist;
    ///   `CloudError.Code.changeTokenExpired` when the token is older than the zone's
    ///   history, from before the zone was deleted, expired by an administrator, from another server,
    ///   or not a token; `CloudError.Code.invalidArguments` for an empty zone name or a
    ///   `resultsLimit` below 1.
    package mutating func fetchZoneChanges(in id: ZoneID, since token: ChangeToken?, resultsLimit: Int)
        throws(CloudError) -> ZoneChanges
    {
        try Self.validateZoneNames([id])
        guard resultsLimit >= 1 else {
            throw CloudError(.invalidArguments, "resultsLimit must be at least 1; it was \(resultsLimit).")
        }
        try requireZone(id)
        let zone = zones[id.name]!
        let window = try token.map { (token) throws(CloudError) in try readZoneToken(token, for: zone) }
        let cursor = window?.cursor ?? 0

        // What to serve: slots changed after the cursor, oldest change first (the zone's change order
        // holds them sorted); deletions only of records the client may hold (those that existed
        // somewhere in the token's window).
        var changed: [Record] = []
        var deleted: [RecordID] = []
        var lastServed = cursor
        var moreComing = false
        let entries = zone.changeOrder.entries
        for index in zone.changeOrder.firstIndex(after: cursor)..<entries.count {
            let (step, name) = entries[index]
            guard let slot = zone.slots[name], slot.modifiedSequence == step else { continue }  // superseded
            if slot.record == nil {
                if let window {
                    guard slot.existed(from: window.base, through: window.mint) else { continue }
                } else if !reportsDeletionsFromNoToken {
                    continue
                }
            }
            if changed.count + deleted.count == resultsLimit {
                moreComing = true
                break
            }
            if let record = slot.record {
                changed.append(record)
            } else {
                deleted.append(RecordID(zone: id, name: name))
            }
            lastServed = step
        }

        let next: ZoneTokenWindow
        if moreComing {
            // Keep where paging started (from nil: now), so later pages still report deletions of
            // records served on this one.
            next = ZoneTokenWindow(base: window?.base ?? zone.sequence, cursor: lastServed, mint: zone.sequence)
        } else {
            next = ZoneTokenWindow(base: zone.sequence, cursor: zone.sequence, mint: zone.sequence)
        }
        counters.recordsReturned += changed.count
        return ZoneChanges(
            changedRecords: changed,
            deletedRecordIDs: deleted,
            token: makeZoneToken(zone, next),
            moreComing: moreComing
        )
    }
}

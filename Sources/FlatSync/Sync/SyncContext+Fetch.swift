#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension SyncContext {
    /// What one fetch did.
    struct FetchOutcome: Sendable {
        var changed = 0
        var deleted = 0
        var resets: [SyncSummary.ZoneReset] = []
        var stop: Stop?
        /// Zones wiped for a deletion the database's changes listed: the token saved after them is past it.
        var wipedForListing: Set<String> = []
    }

    /// The error for a page that says more is coming but gives back the token it was asked with: asking again
    /// at once would ask the same for ever. Not an answer CloudKit is known to give; the fetch is tried again
    /// later, from the same token (nothing of the page was applied).
    static func noProgress(_ what: String) -> CloudError {
        CloudError(
            .unexpectedServerResponse,
            "CloudKit said more of \(what) was coming, but gave back the token it was asked with; asking again later.")
    }

    /// Fetches changes: with `full`, first the database's changed zones (and zones deleted by the user,
    /// which are wiped), then each changed zone page by page; otherwise only `zones`.
    func fetch(full: Bool, zones: Set<ZoneID>, epoch: Int) async -> FetchOutcome {
        var outcome = FetchOutcome()
        guard epoch == accountEpoch, let transport = account?.transport else {
            outcome.stop = .cancelled
            return outcome
        }
        guard !waitsForTheAccount else {
            outcome.stop = .paused(.notAuthenticated)
            return outcome
        }
        var targets = zones
        var databaseToken: ChangeToken?
        // Zones listed as deleted, and by whom, that are not wiped on that word alone: listed from a nil
        // token, or already wiped since the stored token (see below).
        var listedDeletedNotWiped: [ZoneID: ZoneDeletion.Reason] = [:]
        var notedWhenListed = Set<String>()
        var createdWhenListed = Set<ZoneID>()
        // Zones the listing names that this version does not register, in the order listed, and those it
        // named as there when listing from nil.
        var listedNotOpen: [(ZoneID, DeviceFile.ZoneListing)] = []
        var namedFromStart = Set<ZoneID>()
        if full {
            let device = await localStore.deviceFile
            var token = device.databaseChangeToken.map(ChangeToken.init(data:))
            // A fetch that wiped these zones stopped before it saved its token: the deletions this one
            // lists again were dealt with, and what was changed since must stay.
            let wipedSinceToken = Set((device.zonesWipedSinceToken ?? []).map(ZoneID.init))
            // True while the pages come from a nil token: a first fetch, or a reset after the stored token
            // expired.
            var fromStart = token == nil
            // What listings said of zones while a version that did not register them ran: one listed changed
            // is fetched; one listed deleted was wiped when the context opened, unless that failed.
            let (wiped, stop) = await wipeZonesListedDeletedWhileNotOpen(epoch: epoch)
            outcome.resets += wiped.map { SyncSummary.ZoneReset(zone: $0, reason: .deletedByUser) }
            if let stop {
                outcome.stop = stop
                return outcome
            }
            targets.formUnion(wiped)
            targets.formUnion(zoneIDs.filter { device.zonesListedWhileNotOpen?[$0.name] == .changed })
            while true {
                let changes: DatabaseChanges
                do {
                    changes = try await transport.fetchDatabaseChanges(since: token)
                } catch let error as CloudError where error.code == .changeTokenExpired && !fromStart {
                    fromStart = true
                    token = nil
                    targets.formUnion(zoneIDs)
                    continue
                } catch {
                    outcome.stop = .from(error)
                    return outcome
                }
                // Zones no registered type lives in: noted for a version that registers one again. From a
                // token, a deletion is one, unless a wipe since the token dealt with it (a later change
                // would be wiped again); from nil, the listing names every zone there is, and one this
                // device prepared that it does not name is gone (see below).
                for deletion in changes.deletedZones where !fromStart && !zoneIDs.contains(deletion.zone) {
                    let dealtWith = wipedSinceToken.contains(deletion.zone)
                    listedNotOpen.append((deletion.zone, dealtWith ? .changed : .deleted))
                }
                for zone in changes.changedZones where !zoneIDs.contains(zone) {
                    listedNotOpen.append((zone, .changed))
                    if fromStart { namedFromStart.insert(zone) }
                }
                // Deletions listed from a nil token may predate this device's zones, so they do not wipe them
                // on their own: that would drop unsent changes. Whether CloudKit lists zone deletions from nil is
                // not known (native CloudKit was seen to list some record deletions from nil: ckws-client.md).
                // A listed zone that then turns out missing is wiped by its own fetch (see `fetchZone`).
                //
                // A zone already wiped since the stored token is treated the same way: the listing may be the
                // deletion dealt with, or a later one of the zone this device created again since. Only the
                // zone's own fetch can tell, so it runs whether or not the zone is listed as changed: missing
                // again, it is wiped again.
                for deletion in changes.deletedZones where zoneIDs.contains(deletion.zone) {
                    if fromStart || wipedSinceToken.contains(deletion.zone) {
                        listedDeletedNotWiped[deletion.zone] = deletion.reason
                        targets.insert(deletion.zone)
                        continue
                    }
                    if let stop = await wipeZone(deletion.zone, epoch: epoch) {
                        // The token is not saved: the next fetch sees the deletion again.
                        outcome.stop = stop
                        return outcome
                    }
                    outcome.resets.append(SyncSummary.ZoneReset(zone: deletion.zone, reason: .deletedByUser))
                }
                if changes.moreComing, changes.token == token {
                    outcome.stop = .from(Self.noProgress("the database's changes"))
                    return outcome
                }
                targets.formUnion(changes.changedZones.filter { zoneIDs.contains($0) })
                token = changes.token
                if !changes.moreComing { break }
            }
            databaseToken = token
            if fromStart {
                for name in device.preparedZones where !zoneIDs.contains(ZoneID(name)) {
                    if !namedFromStart.contains(ZoneID(name)) { listedNotOpen.append((ZoneID(name), .deleted)) }
                }
            }
            // The zones wiped so far are for deletions the new token is past; a zone wiped from here on (a
            // zone fetch that finds it deleted) may be for a later one, and keeps its note.
            notedWhenListed = Set(await localStore.deviceFile.zonesWipedSinceToken ?? [])
            createdWhenListed = createdSinceToken
            for zone in zoneIDs where await localStore.changeToken(for: zone) == nil {
                targets.insert(zone)
            }
        }
        // A zone answered missing while the zone list names it stops only itself: the others are fetched,
        // and the database token is not saved, so the next full fetch, after the retry's wait, lists it again.
        var heldBack: Stop?
        for zone in zoneIDs where targets.contains(zone) {
            zonesAnsweredMissingWhileListed.remove(zone)
            if let stop = await fetchZone(
                zone, via: transport, epoch: epoch, listedDeleted: listedDeletedNotWiped[zone], into: &outcome)
            {
                if case .retryLater = stop, zonesAnsweredMissingWhileListed.contains(zone) {
                    heldBack = heldBack ?? stop
                    continue
                }
                outcome.stop = stop
                return outcome
            }
        }
        if let heldBack {
            outcome.stop = heldBack
            return outcome
        }
        if full, let databaseToken, epoch == accountEpoch {
            do {
                let covered = notedWhenListed.union(outcome.wipedForListing)
                let (open, listed) = (zoneIDs, listedNotOpen)
                try await localStore.updateDeviceFile { file in
                    file.databaseChangeToken = databaseToken.data
                    file.forgetWipes(of: covered)
                    file.forgetListingsWhileNotOpen(of: open)
                    for (zone, listing) in listed { file.noteListingWhileNotOpen(zone, listing) }
                }
                createdSinceToken.subtract(createdWhenListed)
            } catch {
                outcome.stop = .from(error)
            }
        }
        return outcome
    }

    /// Fetches one zone from its token, page by page while more are coming, applies what came with pending
    /// changes laid over it, and saves the snapshot with the new token.
    ///
    /// A long fetch is taken in parts of at least `fetchPartRecords` (1,000) records as it goes, each with
    /// the token of its last page and reported by its own ``SyncEvent/didFetch(zone:changed:deleted:)``, so
    /// that a failure on a later page (the server asking to slow down, say) does not throw away what came
    /// before: the next fetch resumes after the last part, and only the last part writes the snapshot
    /// (until then, the scheduled snapshot does, as after a local change). An expired token starts over
    /// from nil as a reset: the zone is rebuilt from what the server returns, and once the last part is in,
    /// local records no part returned are deleted unless a change to them is pending. A reset goes in
    /// parts too, and one interrupted resumes as a reset (the store keeps which records it has yet to
    /// confirm), so a large zone throttled midway is not fetched from the start again and again.
    ///
    /// `listedDeleted` is who deleted the zone, when the database's changes listed it so but did not wipe it
    /// (from a nil token, or already wiped since the stored one): if the zone is then missing, that listing
    /// was not stale, and a zone the user deleted is wiped, not created again.
    private func fetchZone(
        _ zone: ZoneID, via transport: any CloudTransport, epoch: Int, listedDeleted: ZoneDeletion.Reason? = nil,
        into outcome: inout FetchOutcome
    ) async -> Stop? {
        if let stop = await ensurePrepared([zone], epoch: epoch) { return stop }
        // Deleted by the user, and nothing to send in it: nothing to fetch either.
        guard preparedZones.contains(zone) else { return nil }
        emit(.willFetch(zone: zone))
        var token = await localStore.changeToken(for: zone)
        var isReset = await localStore.isResetting(zone)
        var restarted = false
        var recreated = false
        var changed: [RecordID: Record] = [:]
        var deleted = Set<RecordID>()
        while true {
            guard epoch == accountEpoch, !Task.isCancelled else { return .cancelled }
            let page: ZoneChanges
            do {
                page = try await transport.fetchZoneChanges(
                    in: zone, since: token, resultsLimit: max(1, configuration.fetchResultsLimit)
                )
            } catch let error as CloudError {
                switch CloudErrorPolicy.action(for: error) {
                case .resetZone where !restarted:
                    // The store's state is the account's that asked: after an account change, not a reset.
                    guard epoch == accountEpoch else { return .cancelled }
                    restarted = true
                    isReset = true
                    do {
                        try await localStore.beginReset(of: zone)
                    } catch {
                        return .from(error)
                    }
                case .createZone where !recreated:
                    if let listedDeleted, listedDeleted != .deleted {
                        // Missing, and listed as deleted by the user (or by nobody said): as a deletion
                        // reported from a token, wipe it rather than upload it again.
                        if let stop = await wipeZone(zone, epoch: epoch) { return stop }
                        outcome.wipedForListing.insert(zone.name)
                        outcome.resets.append(SyncSummary.ZoneReset(zone: zone, reason: .deletedByUser))
                        return nil
                    }
                    // The server lost the zone: unless the user deleted it, create it again, upload the local
                    // data, fetch from scratch.
                    recreated = true
                    if let stop = await stopIfTheUserDeleted(zone, via: transport, epoch: epoch) {
                        switch stop {
                        case .deletedOnServer:
                            // The full fetch it requested (after this one) wipes the zone. Until then the zone
                            // stays prepared, so a push meets it missing and asks again rather than create it.
                            return nil
                        case .zoneWiped:
                            outcome.resets.append(SyncSummary.ZoneReset(zone: zone, reason: .deletedByUser))
                            return nil
                        default:
                            return stop
                        }
                    }
                    preparedZones.remove(zone)
                    if let stop = await ensurePrepared([zone], epoch: epoch) { return stop }
                case .wipeZone:
                    if let stop = await wipeZone(zone, epoch: epoch) { return stop }
                    outcome.resets.append(SyncSummary.ZoneReset(zone: zone, reason: .deletedByUser))
                    return nil
                default:
                    return .from(error)
                }
                token = nil
                changed = [:]
                deleted = []
                continue
            } catch {
                return .from(error)
            }
            createdSinceToken.remove(zone)  // seen existing: a later "changed" listing is no longer ours
            if page.moreComing, page.token == token {
                return .from(Self.noProgress("the changes of \(zone)"))
            }
            for record in page.changedRecords {
                changed[record.id] = record
                deleted.remove(record.id)
            }
            for id in page.deletedRecordIDs {
                changed[id] = nil
                deleted.insert(id)
            }
            token = page.token
            if !page.moreComing { break }
            if changed.count + deleted.count >= configuration.fetchPartRecords {
                guard epoch == accountEpoch else { return .cancelled }
                do {
                    let applied = try await localStore.applyFetchedChanges(
                        in: zone, changed: Array(changed.values), deleted: deleted, token: page.token, isFinal: false)
                    outcome.changed += applied.changed
                    outcome.deleted += applied.deleted
                    emit(.didFetch(zone: zone, changed: applied.changed, deleted: applied.deleted))
                } catch {
                    return .from(error)
                }
                changed = [:]
                deleted = []
            }
        }
        guard epoch == accountEpoch, let token else { return .cancelled }
        do {
            let applied = try await localStore.applyFetchedChanges(
                in: zone, changed: Array(changed.values), deleted: deleted, token: token)
            outcome.changed += applied.changed
            outcome.deleted += applied.deleted
            emit(.didFetch(zone: zone, changed: applied.changed, deleted: applied.deleted))
        } catch {
            return .from(error)
        }
        if let stop = await deleteOrphans(in: zone, via: transport, epoch: epoch) { return stop }
        if isReset {
            outcome.resets.append(SyncSummary.ZoneReset(zone: zone, reason: .tokenExpired))
            emit(.zoneReset(zone: zone, reason: .tokenExpired))
        }
        return nil
    }

    /// Deletes the host records of `zone` whose `deleteSelf` owner is gone (saved by a device that had not
    /// yet heard of the owner's delete, which CloudKit cascades only to the records there when it goes):
    /// here, and on the server by the push this asks for. Run once a zone's fetch is complete.
    ///
    /// Gone means absent here, with no change pending, and absent on the server too: a record can be absent
    /// here only (one this device could not read, history it pruned), and the records it owns must stay.
    /// The server is asked only when some owner is absent here, which is rare. When it cannot be asked,
    /// returns the stop: the fetch then saves no database token, so the next one lists the zone again and
    /// checks it again.
    func deleteOrphans(in zone: ZoneID, via transport: any CloudTransport, epoch: Int) async -> Stop? {
        let missing = await localStore.missingOwners(in: zone)
        guard !missing.isEmpty else { return nil }
        let onServer: [RecordID: Record]
        do {
            onServer = try await transport.lookupRecords(missing.map { RecordID(zone: zone, name: $0) })
        } catch {
            return .from(error)
        }
        guard epoch == accountEpoch else { return .cancelled }
        let gone = missing.filter { onServer[RecordID(zone: zone, name: $0)] == nil }
        do {
            if try await localStore.deleteOrphans(in: zone, owners: gone) > 0 {
                zonesWithOrphansDeleted.insert(zone)
                requestPush(zone)
            }
        } catch {
            return .from(error)
        }
        return nil
    }
}

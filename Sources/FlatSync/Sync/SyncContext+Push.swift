#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension SyncContext {
    /// Why a send or fetch stopped before it was done.
    enum Stop: Sendable {
        /// A transient failure: try again after the delay (or backoff when nil). The reason, for the summary,
        /// says why in a phrase (see ``serverAskedToWait(_:)``).
        case retryLater(Duration?, reason: String)
        /// No network: try again when it returns, or after backoff.
        case waitForNetwork
        /// Storage full or nobody signed in: wait for the host.
        case paused(PauseReason)
        /// The user deleted the zone; it was wiped.
        case zoneWiped
        /// The zone is gone from the server, which reports it deleted: a full fetch (requested) wipes it.
        case deletedOnServer
        /// The account changed or the context closed.
        case cancelled
        /// A server answer that retrying soon will not fix.
        case failed(CloudError)
        /// A failure of the device's own (its storage, say) that retrying soon will not fix.
        case failedOnDevice(FlatSyncError)

        /// The stop for an error from the transport or the store.
        static func from(_ error: any Error) -> Stop {
            if error is CancellationError { return .cancelled }
            if let local = error as? FlatSyncError { return .failedOnDevice(local) }
            guard let cloudError = error as? CloudError else {
                return .failed(CloudError(.internalError, "\(error)"))
            }
            switch CloudErrorPolicy.action(for: cloudError) {
            case .retryLater(let after):
                return .retryLater(after, reason: serverAskedToWait(cloudError.message))
            case .waitForNetwork: return .waitForNetwork
            case .pause(let reason): return .paused(reason)
            default: return .failed(cloudError)
            }
        }

        /// The reason of a ``retryLater(_:reason:)`` the server asked for, `message` saying what it answered.
        static func serverAskedToWait(_ message: String) -> String {
            "the server asked to retry later (\(message))"
        }

        /// The problem for the summary, or nil for stops that are not problems.
        func problem(in zone: ZoneID?) -> SyncProblem? {
            switch self {
            case .retryLater(let after, let reason):
                return SyncProblem(.retryLater(after: after), zone: zone, message: reason)
            case .waitForNetwork:
                return SyncProblem(.networkUnavailable, zone: zone, message: "the network is unavailable")
            case .paused(let reason):
                // The context's, not the zone's: every zone waits, and so do fetches that met it.
                return SyncProblem(.paused(reason), message: "syncing is paused (\(reason)) until the host acts")
            case .failed(let error): return SyncProblem(.serverError(error.code), zone: zone, message: error.message)
            case .failedOnDevice(let error):
                return SyncProblem(.deviceError(error.code), zone: zone, message: error.message)
            case .zoneWiped, .deletedOnServer, .cancelled: return nil
            }
        }

        /// The stop as an error to throw.
        var error: any Error {
            switch self {
            case .retryLater(let after, let reason):
                return CloudError(.serviceUnavailable, "Stopped to retry later: \(reason).", retryAfter: after)
            case .waitForNetwork: return CloudError(.networkUnavailable, "The network is unavailable.")
            case .paused(.quotaExceeded): return CloudError(.quotaExceeded, "The account's storage is full.")
            case .paused(.notAuthenticated): return CloudError(.notAuthenticated, "No account can be used.")
            case .zoneWiped: return CloudError(.userDeletedZone, "The user deleted the zone.")
            case .deletedOnServer: return CloudError(.zoneNotFound, "The zone was deleted on the server.")
            case .cancelled: return CancellationError()
            case .failed(let error): return error
            case .failedOnDevice(let error): return error
            }
        }
    }

    /// What one push of a zone did.
    struct PushOutcome: Sendable {
        var saved = 0
        var deleted = 0
        /// Changes the server refused in this push, now parked.
        var refused: [RefusedChange] = []
        var resets: [SyncSummary.ZoneReset] = []
        var stop: Stop?
    }

    /// How often one record may meet a conflict in one push before it waits for the next.
    private static let conflictLimit = 5
    /// How many pushes in a row may stop to wait out the `retryAfter` of a record's error that would
    /// otherwise park its change (or of a zone's request refused as a whole, which would otherwise be
    /// halved); the next parks the change (or halves the request) as if no `retryAfter` came.
    static let refusalWaitLimit = 5

    /// Sends the zone's pending commands, round after round, until none are left or something stops it.
    ///
    /// A round seals every pending command of the zone and sends their records in batches. Each record is
    /// acknowledged (and leaves its command) only when the server confirmed it. A change the server refused
    /// (see ``RefusedChange``) is parked instead: it stays pending, and is left out of later rounds — and
    /// of later pushes, unless ``start()`` or ``syncNow()`` asked to retry the zone's refused changes once.
    /// Changes made during a round are new commands, sent by the next round.
    func push(_ zone: ZoneID, epoch: Int) async -> PushOutcome {
        guard !waitsForTheAccount else { return PushOutcome(stop: .paused(.notAuthenticated)) }
        let outcome = await pushRounds(zone, epoch: epoch)
        // Only a refusal with `retryAfter`, or its end, changes the counts; a failed write keeps them in
        // memory, and the next save writes them.
        if epoch == accountEpoch { try? await saveRefusalWaits() }
        return outcome
    }

    /// Writes the counts of waits on refusals to `device.plist` (with the rest of ``savePreparedZones()``)
    /// if they changed since the last write.
    func saveRefusalWaits() async throws {
        guard RefusalWaitCounts(records: refusalWaits, requests: requestRefusalWaits) != savedRefusalWaits
        else { return }
        try await savePreparedZones()
    }

    /// ``push(_:epoch:)`` without saving the wait counts.
    private func pushRounds(_ zone: ZoneID, epoch: Int) async -> PushOutcome {
        var outcome = PushOutcome()
        var conflicts: [RecordID: Int] = [:]
        // Parked changes go out once per request to retry them (the request is used up once a push of the
        // zone ends without waiting to retry); one refused again in this push waits for the next request.
        let retryingRefused = retryRefusedZones.contains(zone)
        var refusedInThisPush = Set<RecordID>()
        let requestRefusalsMayWait = requestRefusalWaits[zone, default: 0] < Self.refusalWaitLimit
        var waitedOnRequestRefusal = false
        defer {
            switch outcome.stop {
            case .retryLater, .waitForNetwork, .cancelled: break
            default: retryRefusedZones.remove(zone)
            }
            if waitedOnRequestRefusal, case .retryLater = outcome.stop {
                requestRefusalWaits[zone, default: 0] += 1
            } else if outcome.stop == nil || !requestRefusalsMayWait {
                requestRefusalWaits[zone] = nil
            }
        }
        if await localStore.deviceFile.zonesListedWhileNotOpen?[zone.name] == .deleted {
            // Its wipe at open failed: nothing goes to it before the full fetch wipes it.
            requestFetch(full: true)
            outcome.stop = .deletedOnServer
            return outcome
        }
        rounds: while true {
            guard epoch == accountEpoch, !Task.isCancelled, let transport = account?.transport else {
                outcome.stop = .cancelled
                break
            }
            if let stop = await ensurePrepared([zone], epoch: epoch) {
                outcome.stop = stop
                break
            }
            let commands: [Command]
            do {
                commands = try await localStore.sealPendingCommands(in: zone)
            } catch {
                outcome.stop = .from(error)
                break
            }
            if commands.isEmpty { break }
            let parked = await localStore.refusedRecordIDs(in: zone)
            var commandOf: [RecordID: CommandID] = [:]
            var changes: [RecordChange] = []
            var cascaded: [RecordChange] = []
            for command in commands {
                for change in command.orderedChanges {
                    let id = change.recordID
                    if change.cascadeOwner != nil {
                        // Never sent: settled once its owner's delete is over (below).
                        commandOf[id] = command.id
                        cascaded.append(change)
                        continue
                    }
                    // A newer change of a parked record is the user's latest word: it goes out as any change.
                    if !parked.isEmpty, let refused = parked[id], change.sequence <= refused,
                        !retryingRefused || refusedInThisPush.contains(id)
                    {
                        continue
                    }
                    commandOf[id] = command.id
                    changes.append(change)
                }
            }
            var settled = 0
            // A failed lookup stops the push once the round's other changes are sent: they need no lookup.
            var settleStop: Stop?
            if !cascaded.isEmpty {
                let settling = await settleCascadedDeletes(
                    cascaded, commandOf: commandOf, via: transport, epoch: epoch)
                (settled, settleStop) = (settling.settled.count, settling.stop)
                if case .cancelled = settleStop {
                    outcome.stop = settleStop
                    try? await localStore.unsealPendingCommands(in: zone)
                    break
                }
            }
            // A record that belongs to one not yet on the server goes after it, in a later round.
            Self.holdBack(&changes, waitingFor: await localStore.ownersAwaited(by: changes))
            if changes.isEmpty, settled > 0 {
                // Records settled may own others whose deletes can settle now.
                do {
                    try await localStore.unsealPendingCommands(in: zone)
                } catch {
                    outcome.stop = .from(error)
                    break
                }
                continue
            }
            if changes.isEmpty {
                // Only parked changes are left, and changes waiting for them: nothing to send until someone
                // asks to retry them.
                do {
                    try await localStore.unsealPendingCommands(in: zone)
                } catch {
                    outcome.stop = .from(error)
                }
                outcome.stop = outcome.stop ?? settleStop
                break
            }
            let batchSize = max(1, min(configuration.batchSize, transport.maximumOperationsPerRequest))
            // Only a host record can be large (nearly 1 MB, and its assets' bytes, which go up with it): a built-in
            // one is a few short fields. So a request's uploads stay within the budget too: the upload URLs CKWS
            // gives for a request are good for 15 minutes (UploadAssets.html), and its assets go up one by one.
            var work = RequestBatches.cut(changes, maximumCount: batchSize, byteBudget: RequestBatches.byteBudget) {
                guard !$0.isDelete, !RecordTypeRegistry.isBuiltIn($0.recordID) else { return 0 }
                return $0.carriedRecord.approximateSize + $0.carriedRecord.localAssetBytes
            }
            var progressed = false
            var acknowledged: [RecordID] = []
            var zoneCreations = 0
            while !work.isEmpty, outcome.stop == nil {
                let batch = work.removeFirst()
                if batch.isEmpty { continue }
                let result = await send(
                    batch, in: zone, via: transport, epoch: epoch, conflicts: &conflicts,
                    requestRefusalsMayWait: requestRefusalsMayWait)
                if result.waitedOnRequestRefusal { waitedOnRequestRefusal = true }
                if !refusalWaits.isEmpty {
                    for id in result.acknowledged { refusalWaits[id] = nil }
                    for refusal in result.refused { refusalWaits[refusal.recordID] = nil }
                }
                outcome.saved += result.saved
                outcome.deleted += result.deleted
                if !result.acknowledged.isEmpty {
                    progressed = true
                    createdSinceToken.remove(zone)  // the server took records in it: it exists
                }
                acknowledged += result.acknowledged
                if !result.refused.isEmpty {
                    progressed = true
                    refusedInThisPush.formUnion(result.refused.map(\.recordID))
                    outcome.refused += result.refused
                    do {
                        try await localStore.park(result.refused)
                    } catch {
                        // The changes are still pending in the log; only their refusal is not on disk.
                        outcome.stop = outcome.stop ?? .from(error)
                    }
                    for refusal in result.refused { emit(.changeRefused(refusal)) }
                }
                switch result.next {
                case .continue:
                    if !result.resend.isEmpty { work.append(result.resend) }
                case .split:
                    let half = batch.count / 2
                    work.insert(contentsOf: [Array(batch[..<half]), Array(batch[half...])], at: 0)
                case .createZone:
                    zoneCreations += 1
                    if zoneCreations > 2 {
                        preparedZones.remove(zone)
                        outcome.stop = .retryLater(nil, reason: "\(zone) was still missing after it was created twice")
                    } else if let stop = await stopIfTheUserDeleted(zone, via: transport, epoch: epoch) {
                        // Still counted as prepared: until the requested fetch wipes it, a later push meets
                        // the missing zone and asks again, rather than create it and upload what the user
                        // deleted (the fetch may fail offline).
                        outcome.stop = stop
                        if case .zoneWiped = stop {
                            outcome.resets.append(SyncSummary.ZoneReset(zone: zone, reason: .deletedByUser))
                        }
                    } else {
                        preparedZones.remove(zone)
                        if let stop = await ensurePrepared([zone], epoch: epoch) {
                            outcome.stop = stop
                        } else {
                            work.insert(batch, at: 0)
                        }
                    }
                case .stop(let stop):
                    outcome.stop = stop
                    if case .zoneWiped = stop {
                        outcome.resets.append(SyncSummary.ZoneReset(zone: zone, reason: .deletedByUser))
                    }
                }
            }
            if !acknowledged.isEmpty {
                // What the round learned (new change tags, creates, adopted versions) is in memory so far.
                // The snapshot makes it durable before the log lets the commands go, as a fetch saves its
                // token with its snapshot; a crash before then sends the round again, and the server
                // takes that as the same writes.
                do {
                    try await localStore.persistSnapshot(of: zone)
                    try await acknowledge(acknowledged, commandOf: commandOf)
                } catch {
                    outcome.stop = outcome.stop ?? .from(error)
                }
            }
            do {
                try await localStore.unsealPendingCommands(in: zone)
            } catch {
                outcome.stop = outcome.stop ?? .from(error)
            }
            outcome.stop = outcome.stop ?? settleStop
            if outcome.stop != nil { break }
            if !progressed {
                // Records came back neither confirmed nor failed; do not spin on them.
                outcome.stop = .retryLater(nil, reason: "the server's answer confirmed none of the records sent")
                break
            }
        }
        return outcome
    }

    /// Settles the deletes of a round that a cascade made (`cascaded`; see ``RecordChange/cascadeOwner``)
    /// whose owner's delete is over, by looking their records up on the server: a record CloudKit deleted
    /// with its owner stays deleted, and one it still has comes back as it is there, since the owner's delete
    /// did not take it (it lost to an edit this device had not seen, was refused and discarded, or the record
    /// had moved to another owner). The others wait for their owner's delete. Returns the records settled,
    /// or the stop when the server could not be asked (they wait for the next push).
    ///
    /// Sent with their owner's delete, as they once were, these deletes went through where the owner's lost,
    /// and a photo that came back had lost its comments everywhere. CloudKit documents the cascade as
    /// immediate in a custom zone (asynchronous only in the default zone, which FlatSync does not use;
    /// `CKRecord.ReferenceAction.deleteSelf`), so the lookup after the owner's delete finds them gone. Were
    /// one still there, it would come back here, and its deletion would arrive with the next fetch.
    func settleCascadedDeletes(
        _ cascaded: [RecordChange], commandOf: [RecordID: CommandID], via transport: any CloudTransport, epoch: Int
    ) async -> (settled: [RecordID], stop: Stop?) {
        let ready = await localStore.cascadedDeletesToSettle(cascaded)
        guard !ready.isEmpty else { return ([], nil) }
        do {
            let servers = try await transport.lookupRecords(ready.map(\.recordID))
            guard epoch == accountEpoch else { return ([], .cancelled) }
            let settled = try await localStore.settleCascadedDeletes(
                ready, commandOf: commandOf, serverVersions: servers)
            return (settled, nil)
        } catch {
            return ([], .from(error))
        }
    }

    /// Takes out of a round's `changes` the saves that wait for their owners (`waits`: each waiting record's
    /// owners not yet on the server), so that they go in a later round, once their owners are there.
    ///
    /// A record whose owner is not in the round (its change parked) waits, and so does every record that
    /// waits for it, however long the chain: they go once the owner's change does. When every change left
    /// waits, and only for others left, the waits go round in a circle and none would ever go: those go
    /// together, in order. (Chains ending at a parked owner were once taken for such a circle, and a parked
    /// album's photos went without it; another device then deleted them as orphans.)
    static func holdBack(_ changes: inout [RecordChange], waitingFor waits: [RecordID: Set<RecordID>]) {
        guard !waits.isEmpty else { return }
        let inRound = Set(changes.map(\.recordID))
        var held = Set(waits.filter { !$0.value.isSubset(of: inRound) }.keys)
        var grew = !held.isEmpty
        while grew {
            grew = false
            for (id, owners) in waits where !held.contains(id) && !owners.isDisjoint(with: held) {
                held.insert(id)
                grew = true
            }
        }
        changes.removeAll { held.contains($0.recordID) }
        if changes.contains(where: { waits[$0.recordID] == nil }) {
            changes.removeAll { waits[$0.recordID] != nil }
        }
    }

    /// What sending one batch did.
    private struct BatchResult {
        enum Next { case `continue`, split, createZone, stop(Stop) }
        var saved = 0
        var deleted = 0
        var acknowledged: [RecordID] = []
        /// Changes the server refused, to be parked.
        var refused: [RefusedChange] = []
        var resend: [RecordChange] = []
        var next = Next.continue
        /// True when the batch, refused as a whole, stops to wait out the `retryAfter` of an error that would
        /// have it halved.
        var waitedOnRequestRefusal = false

        /// Goes on to `next` unless another record of the batch asked for something stronger: a pause (which
        /// waits for the host) before no network, before creating the zone, before a wait. One record's
        /// answer must not undo another's: a pause lost to a missing zone would send again into a full
        /// account.
        mutating func escalate(to next: Next) {
            func rank(_ next: Next) -> Int {
                switch next {
                case .continue, .split: return 0
                case .stop(.retryLater): return 1
                case .createZone: return 2
                case .stop(.waitForNetwork): return 3
                case .stop: return 4
                }
            }
            if rank(next) > rank(self.next) { self.next = next }
        }

        /// Stops to retry after `after`, or after the longest wait another record of the batch asked for; a
        /// stop of another kind another record asked for (no network, paused, a new zone) goes first.
        mutating func retryLater(after: Duration?, reason: String) {
            switch next {
            case .stop(.retryLater(let earlier?, _)) where after.map({ $0 < earlier }) ?? true: return
            case .stop(.retryLater), .continue, .split: break
            case .stop, .createZone: return
            }
            next = .stop(.retryLater(after, reason: reason))
        }
    }

    /// Sends one batch and handles the result of each record by the engine's error table (see <doc:Errors>).
    private func send(
        _ batch: [RecordChange], in zone: ZoneID, via transport: any CloudTransport, epoch: Int,
        conflicts: inout [RecordID: Int], requestRefusalsMayWait: Bool
    ) async -> BatchResult {
        var result = BatchResult()
        if let stop = await keepServerAssets(of: batch, via: transport) {
            result.next = .stop(stop)
            return result
        }
        let request: (saves: [RecordSave], deletes: [RecordDeletion])
        do {
            request = try await localStore.request(for: batch)
        } catch {
            result.next = .stop(.from(error))
            return result
        }
        var sentTags: [RecordID: ChangeTag?] = [:]
        var sentAsReplace = Set<RecordID>()
        for save in request.saves {
            sentTags[save.record.id] = save.record.changeTag
            unconfirmedSaves[save.record.id] = save.record
            if save.policy == .replaceIfServerRecordUnchanged { sentAsReplace.insert(save.record.id) }
        }
        // Owners whose save stood for their delete and replaced the server's record: the deletes their
        // cascades made are sent now, as CloudKit deletes nothing with a replaced record.
        var replacedOwners: [RecordID] = []
        emit(.willSend(zone: zone, saves: request.saves.count, deletes: request.deletes.count))
        let response: ModifyRecordsResult
        do {
            response = try await transport.modifyRecords(
                saving: request.saves, deleting: request.deletes, atomically: false)
        } catch {
            let cloudError = error as? CloudError
            if CloudErrorPolicy.mayHaveBeenApplied(afterRequestFailedWith: error) {
                // Lost on the way, cancelled, or answered by a gateway: the server may have applied the request.
                // Until its version of each record shows, a merge does not know which version this device's
                // changes stand on.
                do {
                    try await localStore.noteSavesOfUnknownFate(request.saves.map(\.record.id))
                } catch {
                    result.next = .stop(.from(error))
                    return result
                }
            }
            guard let cloudError else {
                result.next = .stop(.from(error))
                return result
            }
            var action = CloudErrorPolicy.requestAction(for: cloudError)
            if CloudErrorPolicy.waitsOnlyForRetryAfter(cloudError, wholeRequest: true) {
                if requestRefusalsMayWait { result.waitedOnRequestRefusal = true } else { action = .refuse }
            }
            switch action {
            case .split where batch.count > 1, .refuse where batch.count > 1:
                // Too large, or refused as a whole: halve until the culprit stands alone.
                result.next = .split
            case .split, .refuse:
                result.refused = [refusal(of: batch[0], because: cloudError)]
            case .createZone:
                result.next = .createZone
            case .wipeZone:
                result.next = .stop(await wipeZone(zone, epoch: epoch) ?? .zoneWiped)
            default:
                result.next = .stop(.from(cloudError))
            }
            return result
        }
        guard epoch == accountEpoch else {
            // The context closed (or the account changed) while the request was out: its answer is not taken,
            // so what the server saved is as unknown here as after a lost answer.
            try? await localStore.noteSavesOfUnknownFate(request.saves.map(\.record.id))
            result.next = .stop(.cancelled)
            return result
        }
        emit(
            .didSend(
                zone: zone, saved: response.saved.count, deleted: response.deleted.count, failed: response.failed.count)
        )
        var waitingOnRefusal: [RecordID] = []
        // Saves whose own answer did not read: the server may hold them, as after a lost answer.
        let doubtful = batch.filter { change in
            guard !change.isDelete, let error = response.failed[change.recordID] else { return false }
            return CloudErrorPolicy.mayHaveBeenApplied(recordFailedWith: error)
        }
        if !doubtful.isEmpty {
            do {
                try await localStore.noteSavesOfUnknownFate(doubtful.map(\.recordID))
            } catch {
                result.next = .stop(.from(error))
                return result
            }
        }
        for change in batch {
            let id = change.recordID
            if let saved = response.saved[id] {
                // A built-in record holds no asset: its fields are not built to look.
                if let sent = unconfirmedSaves.removeValue(forKey: id), !RecordTypeRegistry.isBuiltIn(id),
                    sent.fields.values.contains(where: CloudAsset.isLocal)
                {
                    await localStore.noteUploads(sent: sent, answer: saved)
                }
                if change.replacesRecord, sentAsReplace.contains(id) { replacedOwners.append(id) }
                await localStore.serverSaved(saved, created: sentTags[id] == .some(nil))
                result.acknowledged.append(id)
                result.saved += 1
                continue
            }
            if response.deleted.contains(id) {
                await localStore.serverDeleted(id)
                result.acknowledged.append(id)
                result.deleted += 1
                continue
            }
            guard let error = response.failed[id] else { continue }
            switch CloudErrorPolicy.action(for: error) {
            case .mergeWithServerRecord:
                conflicts[id, default: 0] += 1
                guard conflicts[id]! <= Self.conflictLimit, let server = error.serverRecord else {
                    result.retryLater(after: nil, reason: "\(id.name) kept meeting newer versions on the server")
                    continue
                }
                if change.isDelete, await localStore.ownWrites().wrote(server) {
                    // The server holds a save by this device whose response was lost (or forgotten in a
                    // restart): a version this device wrote is one it had seen, so delete it after all.
                    await localStore.serverSaved(server, created: false)
                    unconfirmedSaves[id] = nil
                    result.resend.append(change)
                    continue
                }
                if change.isDelete {
                    // Someone changed the record after this device last saw it: their edit beats the delete.
                    emit(.conflictResolved(id))
                    await localStore.adoptServerRecord(server)
                    result.acknowledged.append(id)
                    continue
                }
                if await localStore.replacesOwnVersionOfAnotherType(server) {
                    // This device's own version, which the replace saw (its save answered unheard, then the
                    // record deleted and made again as another type): the replace goes again, with its tag.
                    unconfirmedSaves[id] = nil
                    result.resend.append(change)
                    continue
                }
                if let mine = await localStore.recordType(of: id), mine != server.type {
                    // The name holds a record of another type on the server (made by another device, or made
                    // again there after a delete this device never saw): a save cannot turn it into this
                    // device's type (a name is unique in its zone, whatever the type), nor merge with it. Parked
                    // and reported, as the server's refusal would be; taking the server's record instead
                    // dropped this device's acknowledged save without a word (red team 10).
                    result.refused.append(
                        refusal(
                            of: change,
                            because: CloudError(
                                .invalidArguments,
                                "The server holds a \(server.type) named \(id.name) in zone \(id.zone); this device's "
                                    + "\(mine) of that name cannot be saved over it. Discard this change to take the "
                                    + "server's record, or save the value under another name.")))
                    continue
                }
                if await isDeletedSince(change) {
                    // This device deleted the record while the save was on the wire. Merging the server's
                    // version back here would show a record the delete, sent next, may remove from the server
                    // (a note saved on it would then be an orphan). The save is over; the delete goes out
                    // with the tag this device had, so it loses to the version it never saw, as any delete
                    // does, and the server's version comes back with its refusal.
                    unconfirmedSaves[id] = nil
                    result.acknowledged.append(id)
                    continue
                }
                // The server may hold this very save, committed by an earlier attempt whose response was
                // lost: then there is nothing left to write.
                let ownWrite = isOwnUnconfirmedWrite(server)
                let serverHasAll = await localStore.mergeServerRecord(
                    server, sentWithoutTag: sentTags[id] == .some(nil))
                if serverHasAll && ownWrite {
                    // Not a conflict: the server has what this device sent.
                    if change.replacesRecord, sentAsReplace.contains(id) { replacedOwners.append(id) }
                    unconfirmedSaves[id] = nil
                    result.acknowledged.append(id)
                    result.saved += 1
                } else {
                    emit(.conflictResolved(id))
                    // Write the merge even when it equals the server's version: the new version is what
                    // makes deletes by devices that never saw this edit conflict, so the edit wins. As an
                    // update: a save that stood for a delete lost to the version the delete did not see.
                    var merged = change
                    // Unless the version met is this device's own (its replace applied unanswered, say), which
                    // the delete saw: then the save still replaces it.
                    let ownVersion = await localStore.ownWrites().wrote(server)
                    merged.replacesRecord = change.replacesRecord && ownVersion
                    result.resend.append(merged)
                }
            case .recordMissing:
                if change.isDelete {
                    await localStore.serverDeleted(id)
                    result.acknowledged.append(id)
                    result.deleted += 1
                } else if await isDeletedSince(change) {
                    // Deleted there and, while this save was on the wire, here too: nothing to bring back.
                    await localStore.serverDeleted(id)
                    unconfirmedSaves[id] = nil
                    result.acknowledged.append(id)
                } else {
                    // Deleted by another device since this one saw it: this edit beats that delete.
                    conflicts[id, default: 0] += 1
                    do {
                        _ = try await localStore.recreate(id)
                    } catch {
                        result.next = .stop(.from(error))
                    }
                    if conflicts[id]! <= Self.conflictLimit { result.resend.append(change) }
                }
            case .createZone:
                result.escalate(to: .createZone)
            case .wipeZone:
                result.next = .stop(await wipeZone(zone, epoch: epoch) ?? .zoneWiped)
                return result
            case .retryLater(let after):
                if CloudErrorPolicy.waitsOnlyForRetryAfter(error) {
                    guard refusalWaits[id, default: 0] < Self.refusalWaitLimit else {
                        result.refused.append(refusal(of: change, because: error))
                        continue
                    }
                    waitingOnRefusal.append(id)
                }
                result.retryLater(after: after, reason: Stop.serverAskedToWait("\(id.name): \(error.message)"))
            case .waitForNetwork:
                result.escalate(to: .stop(.waitForNetwork))
            case .pause(let reason):
                result.escalate(to: .stop(.paused(reason)))
            case .split, .refuse, .resetZone:
                result.refused.append(refusal(of: change, because: error))
            }
        }
        if !replacedOwners.isEmpty {
            do {
                // Logged before the owners' saves are acknowledged, which a restart must not find without it.
                _ = try await localStore.releaseCascadedDeletes(of: replacedOwners)
            } catch {
                let owners = Set(replacedOwners)
                result.acknowledged.removeAll { owners.contains($0) }
                result.next = .stop(.from(error))
            }
        }
        if case .createZone = result.next {
            // Resend the whole batch once the zone exists; what was confirmed is already acknowledged.
            result.resend = []
        }
        // A wait counts only when the batch stops to wait (a push stops after that batch: once per push).
        if case .stop(.retryLater) = result.next {
            for id in waitingOnRefusal { refusalWaits[id, default: 0] += 1 }
        }
        return result
    }

    /// True when this device deleted the record of `save` after making it (the delete waits to be sent).
    private func isDeletedSince(_ save: RecordChange) async -> Bool {
        guard let latest = await localStore.pendingChange(for: save.recordID) else { return false }
        return latest.isDelete && latest.sequence > save.sequence
    }

    /// True when the server's version is this device's own save whose response never arrived: marked as
    /// that save was (this device, this run), holding every field it sent with the value sent (a save sends
    /// only the fields it changes, so the server's version may hold others).
    private func isOwnUnconfirmedWrite(_ server: Record) -> Bool {
        guard let sent = unconfirmedSaves[server.id], sent.lastModifiedBy != nil,
            server.lastModifiedBy == sent.lastModifiedBy, sent.type == server.type
        else { return false }
        let serverFields = server.fields
        return sent.fields.allSatisfy { serverFields[$0.key] == $0.value }
    }

    private func refusal(of change: RecordChange, because error: CloudError) -> RefusedChange {
        unconfirmedSaves[change.recordID] = nil
        return RefusedChange(change, error: error, at: configuration.currentDate())
    }

    /// Lets the server-confirmed records go from their commands, command by command. A failure to log
    /// that stops here and is the round's: the host hears that the disk is failing now, not at its next
    /// write. Nothing is lost either way — the server has the records, memory has them acknowledged and the
    /// log is rewritten from memory before its next entry; commands not reached stay and are sent again,
    /// which the server takes as the same writes.
    private func acknowledge(_ ids: [RecordID], commandOf: [RecordID: CommandID]) async throws {
        var byCommand: [CommandID: [RecordID]] = [:]
        for id in ids {
            if let command = commandOf[id] { byCommand[command, default: []].append(id) }
        }
        for (command, ids) in byCommand.sorted(by: { $0.key < $1.key }) {
            try await localStore.acknowledge(ids, in: command)
        }
    }

    // MARK: - Zones

    /// Before a zone the server does not have is created again: when the database's changes since this
    /// device last fetched them say it was deleted, requests a full fetch (which wipes the zone and saves
    /// the database token past the deletion, so it is wiped once) and stops with
    /// ``Stop/deletedOnServer``; ``Stop/retryLater(_:reason:)`` when they cannot be fetched; nil to go on and
    /// create it.
    ///
    /// CloudKit Web Services has no error code for a zone the user deleted (the emulator's old
    /// `USER_DELETED_ZONE` was invented): such a zone is simply not found (`ZONE_NOT_FOUND`), and
    /// `changes/database` reports it `deleted: true` without saying who deleted it (observed live on
    /// `zones/changes`, MistKit #444; ``ZoneDeletion/Reason/unknown``). Creating it again and uploading the
    /// device's data would undo what the user did; so a missing zone is taken as deleted by the user unless
    /// the server says an app deleted it (``ZoneDeletion/Reason/deleted``, which only the test clouds can
    /// say). A device that has never fetched the database's changes cannot tell, and creates it.
    ///
    /// When those changes list the missing zone as *changed* and not deleted, the zone is wiped here and the
    /// stop is ``Stop/zoneWiped``: CloudKit was seen to list a zone so after it was deleted, on every fetch,
    /// while fetching it failed as not found (native API, mentrena/SyncKit PR #99 and #103, whose fix also
    /// takes it as deleted). No full fetch would wipe such a zone, and creating it would upload what the
    /// user deleted. Not for a zone this run created since the token (``createdSinceToken``), which is
    /// listed as changed for that reason and may not be visible yet: it is created again, as before.
    ///
    /// When the stored token has expired (over CKWS: any error but signing in, throttling and a missing
    /// zone, as no code for an expired token is documented), the changes are listed again from nil, once
    /// (ckws.md §4). Such a listing names every zone the database has, so a zone it does not name is gone
    /// and, as above, taken as deleted by the user; unless this run created it since the token, when it may
    /// not be visible yet.
    ///
    /// Either inference is checked against the zone list before the wipe, which drops the zone's unsent
    /// changes: a zone the list still names gets ``Stop/retryLater(_:reason:)`` instead (see
    /// ``wipeZoneIfUnlisted(_:via:epoch:)``).
    func stopIfTheUserDeleted(_ zone: ZoneID, via transport: any CloudTransport, epoch: Int) async -> Stop? {
        let device = await localStore.deviceFile
        if device.zonesListedWhileNotOpen?[zone.name] == .deleted {
            // Listed deleted while a version that did not register it ran: the full fetch wipes it.
            requestFetch(full: true)
            return .deletedOnServer
        }
        guard let stored = device.databaseChangeToken else { return nil }
        var token: ChangeToken? = ChangeToken(data: stored)
        var fromStart = false
        while true {
            let changes: DatabaseChanges
            do {
                changes = try await transport.fetchDatabaseChanges(since: token)
            } catch let error as CloudError where error.code == .changeTokenExpired && !fromStart {
                token = nil
                fromStart = true
                continue
            } catch {
                return .from(error)
            }
            guard epoch == accountEpoch else { return .cancelled }
            if let deletion = changes.deletedZones.first(where: { $0.zone == zone }) {
                guard deletion.reason != .deleted else { return nil }
                requestFetch(full: true)
                return .deletedOnServer
            }
            if changes.changedZones.contains(zone), !createdSinceToken.contains(zone) {
                return await wipeZoneIfUnlisted(zone, via: transport, epoch: epoch)
            }
            if !changes.moreComing {
                guard fromStart, !createdSinceToken.contains(zone) else { return nil }
                return await wipeZoneIfUnlisted(zone, via: transport, epoch: epoch)
            }
            if changes.token == token {
                return .from(Self.noProgress("the database's changes"))
            }
            token = changes.token
        }
    }

    /// Wipes a zone the server answered missing and the database's changes call deleted by inference (listed
    /// as changed, or not listed from nil), unless the zone list still names it. A wipe drops the zone's
    /// unsent changes, and one answer is thin evidence: CloudKit documents no read-after-write order between
    /// its endpoints. A zone the list names is there as far as the server says, so it is neither wiped nor
    /// created: its push and fetch are tried again later, with backoff, for as long as the server answers
    /// so, and a full fetch goes on with the other zones meanwhile (``zonesAnsweredMissingWhileListed``).
    /// That costs requests if CloudKit keeps a deleted zone in its list too (it was seen to keep one in its
    /// database changes, see ``stopIfTheUserDeleted(_:via:epoch:)``), but loses nothing: an earlier version
    /// wiped such a zone after three answers, which a few seconds of lag after a write could bring.
    private func wipeZoneIfUnlisted(_ zone: ZoneID, via transport: any CloudTransport, epoch: Int) async -> Stop {
        do {
            let listed = try await transport.listZones()
            guard epoch == accountEpoch else { return .cancelled }
            if listed.contains(zone) {
                zonesAnsweredMissingWhileListed.insert(zone)
                return .retryLater(nil, reason: "the server answered \(zone) missing, but lists it")
            }
        } catch {
            return .from(error)
        }
        return await wipeZone(zone, epoch: epoch) ?? .zoneWiped
    }

    /// Makes sure the zones exist on the server, creating missing ones and queueing the local data for a
    /// zone that was missing. Remembered in `device.plist`, so it happens once.
    ///
    /// The data is queued before the zones are created: creating several can half succeed (CloudKit
    /// answers each zone's failure in its own entry, so some are made and the call fails; or all are made
    /// and the answer is lost), and a zone the next try finds existing would otherwise never get its data
    /// back. Queued, it waits for the zone like any change, and a crash in between loses nothing; a second
    /// try in the same run does not queue it again (``seededZones``).
    ///
    /// A zone created here gets its subscription again (``ensureSubscribed(_:epoch:)``): a zone deleted and
    /// created anew may have lost it. Once the context is started, that happens at once; before, `start()`
    /// does it.
    func ensurePrepared(_ zones: [ZoneID], epoch: Int) async -> Stop? {
        var needed = zones.filter { !preparedZones.contains($0) }
        guard !needed.isEmpty else { return nil }
        guard epoch == accountEpoch, let transport = account?.transport else { return .cancelled }
        guard !waitsForTheAccount else { return .paused(.notAuthenticated) }
        do {
            let existing = Set(try await transport.listZones())
            var missing = needed.filter { !existing.contains($0) }
            guard epoch == accountEpoch else { return .cancelled }
            if !zonesLeftDeleted.isEmpty {
                // A zone the user deleted stays deleted until there is a change to send in it (it is then
                // created for it); one that exists again was created by another device for a later change.
                var leftDeleted = Set<ZoneID>()
                for zone in missing where zonesLeftDeleted.contains(zone) {
                    if await localStore.pendingRecordCount(in: zone) == 0 { leftDeleted.insert(zone) }
                }
                let before = zonesLeftDeleted
                zonesLeftDeleted.subtract(needed.filter { !leftDeleted.contains($0) })
                missing.removeAll { leftDeleted.contains($0) }
                needed.removeAll { leftDeleted.contains($0) }
                if zonesLeftDeleted != before { try await savePreparedZones() }
                guard !needed.isEmpty else { return nil }
            }
            if !missing.isEmpty {
                for zone in missing where !seededZones.contains(zone) {
                    _ = try await localStore.seed(zone)
                    guard epoch == accountEpoch else { return .cancelled }
                    seededZones.insert(zone)
                }
                // A zone created anew has no subscription, and a try whose answer is lost finds it existing:
                // forget the subscription first.
                subscribedZones.subtract(missing)
                try await savePreparedZones()
                createdSinceToken.formUnion(missing)  // before the request: its answer may be lost
                try await transport.createZones(missing)
                guard epoch == accountEpoch else { return .cancelled }
            }
            seededZones.subtract(needed)
            preparedZones.formUnion(needed)
            try await savePreparedZones()
            // What was seeded waits to be sent; nothing else would push it if no push is running (a fetch
            // that found its zone missing, say).
            if isStarted { for zone in missing { requestPush(zone) } }
        } catch {
            return .from(error)
        }
        if isStarted { await ensureSubscribed(needed, epoch: epoch) }
        return nil
    }

    /// Saves which zones are prepared and subscribed in `device.plist`, with the counts of waits on refusals
    /// (which a wiped zone changes).
    ///
    /// A zone this version does not register keeps its marks: a later version that registers it again
    /// finds it prepared, rather than create it and upload its data to a zone the user may have deleted
    /// meanwhile (``DeviceFile/zonesListedWhileNotOpen`` says so, and a push that meets it missing asks).
    func savePreparedZones() async throws {
        let names = Set(zoneIDs.map(\.name))
        let prepared = zoneIDs.filter { preparedZones.contains($0) }.map(\.name)
        let subscribed = zoneIDs.filter { subscribedZones.contains($0) }.map(\.name)
        let counts = RefusalWaitCounts(records: refusalWaits, requests: requestRefusalWaits)
        let leftDeleted = zoneIDs.filter { zonesLeftDeleted.contains($0) }.map(\.name)
        try await localStore.updateDeviceFile { file in
            file.preparedZones = prepared + file.preparedZones.filter { !names.contains($0) }
            let otherLeftDeleted = (file.zonesLeftDeleted ?? []).filter { !names.contains($0) }
            let allLeftDeleted = leftDeleted + otherLeftDeleted
            file.zonesLeftDeleted = allLeftDeleted.isEmpty ? nil : allLeftDeleted
            let otherSubscribed = (file.subscribedZones ?? []).filter { !names.contains($0) }
            let allSubscribed = subscribed + otherSubscribed
            // Left out while empty, as in files written before subscriptions were kept.
            file.subscribedZones = allSubscribed.isEmpty && file.subscribedZones == nil ? nil : allSubscribed
            counts.write(to: &file)
        }
        savedRefusalWaits = counts
    }

    /// The user deleted the zone: wipe its local data and commands, and make sure it is created again
    /// before it is used next.
    ///
    /// Returns the stop for a wipe that failed (reported as an error event), so that a fetch does not save
    /// a database token past the deletion: the next fetch must see it again, or a later push would find
    /// the zone missing with nothing saying why, and create it with what the user deleted. Nil when wiped.
    @discardableResult
    func wipeZone(_ zone: ZoneID, epoch: Int) async -> Stop? {
        guard epoch == accountEpoch else { return .cancelled }
        func failed(_ error: any Error) -> Stop {
            emit(.error(.onDevice(error, zone: zone, message: "wiping it failed: \(error)")))
            return .from(error)
        }
        let unsaved: (any Error)?
        do {
            unsaved = try await localStore.wipe(zone)
        } catch {
            return failed(error)  // nothing was wiped
        }
        // Wiped in memory, which stands even when a write failed: the zone is no longer prepared, so the
        // next fetch, meeting the deletion again, creates it rather than wipe what was changed since.
        refusalWaits = refusalWaits.filter { $0.key.zone != zone }
        requestRefusalWaits[zone] = nil
        preparedZones.remove(zone)
        seededZones.remove(zone)
        createdSinceToken.remove(zone)
        subscribedZones.remove(zone)
        zonesLeftDeleted.insert(zone)
        emit(.zoneReset(zone: zone, reason: .deletedByUser))
        do {
            try await savePreparedZones()
        } catch {
            return failed(error)
        }
        if let unsaved { return failed(unsaved) }
        return nil
    }
}

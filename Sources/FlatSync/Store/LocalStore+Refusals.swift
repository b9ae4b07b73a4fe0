#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Pending changes the server refused (see ``RefusedChange``): parked here, in `refused-changes.plist`,
/// while the changes themselves stay in the command log.
extension LocalStore {
    /// The pending changes the server refused, in record order. Each is still applied locally and counted
    /// by ``pendingRecordCount()``; ``SyncContext`` sends them again on ``SyncContext/start()`` and
    /// ``SyncContext/syncNow()``, and ``SyncContext/discardRefusedChanges(_:)`` drops them.
    public func refusedChanges() -> [RefusedChange] {
        refusals.values.sorted { $0.recordID < $1.recordID }
    }

    /// True when the pending change of `id` is parked.
    package func isRefused(_ id: RecordID) -> Bool {
        !refusals.isEmpty && refusals[id] != nil
    }

    /// The records of `zone` whose pending changes are parked, with the sequence number of the change the
    /// server refused: a newer change of the record is not parked.
    package func refusedRecordIDs(in zone: ZoneID) -> [RecordID: UInt64] {
        guard !refusals.isEmpty else { return [:] }
        var parked: [RecordID: UInt64] = [:]
        for (id, refusal) in refusals where id.zone == zone { parked[id] = refusal.changeSequence }
        return parked
    }

    /// Parks refused changes, durably: a restart still reports them and does not send them on its own.
    package func park(_ newRefusals: [RefusedChange]) throws {
        guard !newRefusals.isEmpty else { return }
        for refusal in newRefusals { refusals[refusal.recordID] = refusal }
        try saveRefusals()
    }

    /// Forgets the refusals of `ids` (sent after all, discarded, or wiped), durably if there were any.
    package func forgetRefusals(of ids: some Sequence<RecordID>) throws {
        guard !refusals.isEmpty else { return }
        var changed = false
        for id in ids where refusals.removeValue(forKey: id) != nil { changed = true }
        if changed { try saveRefusals() }
    }

    /// Forgets every refusal in `zone` (every refusal when nil), durably if there were any.
    package func forgetRefusals(in zone: ZoneID?) throws {
        try forgetRefusals(of: refusals.keys.filter { zone == nil || $0.zone == zone })
    }

    /// Drops the refused changes of `ids` and puts the server's version of each record back (none where
    /// `serverVersions` has none: the record goes). Other IDs are ignored, and so is a record changed again
    /// since it was refused (its newer change is the user's latest word: it stays pending, unrefused);
    /// returns the ones dropped.
    ///
    /// The snapshots with the server's versions are written before the log lets the changes go, so a crash
    /// in between leaves the change pending, still refused, over the server's version (a retry sends that
    /// version), never a local version that nothing will send. A change made to one of the records while
    /// this runs is kept: each record's change is let go only if it is still the one that was refused.
    package func discardRefusedChanges(_ ids: [RecordID], serverVersions: [RecordID: Record]) async throws
        -> [RecordID]
    {
        try checkWritable()
        let refused = Set(ids).filter { isStillTheRefusedChange($0) }.sorted()
        try forgetRefusals(of: Set(ids).subtracting(refused).filter { refusals[$0] != nil })
        guard !refused.isEmpty else { return [] }
        for id in refused { restoreServerVersion(of: id, server: serverVersions[id]) }
        for zone in zoneIDs where refused.contains(where: { $0.zone == zone }) {
            try await persistSnapshot(of: zone)
        }
        var dropped: [RecordID] = []
        for id in refused {
            // Checked again after every wait: a mutation may have joined the record's command meanwhile.
            guard isStillTheRefusedChange(id), let command = pending.commandID(of: id) else { continue }
            try await acknowledge([id], in: command)
            dropped.append(id)
        }
        try forgetRefusals(of: refused)
        return dropped
    }

    /// True when the newest pending change of `id` is the one the server refused.
    private func isStillTheRefusedChange(_ id: RecordID) -> Bool {
        guard let refusal = refusals[id], let change = pending.latestChange(for: id) else { return false }
        return change.sequence == refusal.changeSequence
    }

    /// Writes `refused-changes.plist` from memory.
    private func saveRefusals() throws {
        try checkOpen()
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            try RefusedChangesFile.encoded(refusedChanges()),
            to: directory.appendingPathComponent(RefusedChangesFile.fileName))
    }
}

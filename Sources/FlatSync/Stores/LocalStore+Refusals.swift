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

    /// The records of `zone` whose pending changes are parked.
    package func refusedRecordIDs(in zone: ZoneID) -> Set<RecordID> {
        guard !refusals.isEmpty else { return [] }
        return Set(refusals.keys.filter { $0.zone == zone })
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
    /// `serverVersions` has none: the record goes). Other IDs are ignored; returns the ones dropped.
    ///
    /// The snapshots with the server's versions are written before the log lets the changes go, so a crash
    /// in between leaves the change pending over the server's version (sent at the next sync), never a
    /// local version that nothing will send.
    package func discardRefusedChanges(_ ids: [RecordID], serverVersions: [RecordID: Record]) async throws
        -> [RecordID]
    {
        try checkWritable()
        let dropped = Array(Set(ids.filter { refusals[$0] != nil })).sorted()
        guard !dropped.isEmpty else { return [] }
        for id in dropped { restoreServerVersion(of: id, server: serverVersions[id]) }
        for zone in ZoneID.all where dropped.contains(where: { $0.zone == zone }) {
            try await persistSnapshot(of: zone)
        }
        var byCommand: [CommandID: [RecordID]] = [:]
        for id in dropped {
            if let command = pending.commandID(of: id) { byCommand[command, default: []].append(id) }
        }
        for (command, ids) in byCommand.sorted(by: { $0.key < $1.key }) {
            try await acknowledge(ids, in: command)
        }
        try forgetRefusals(of: dropped)
        return dropped
    }

    /// Writes `refused-changes.plist` from memory.
    private func saveRefusals() throws {
        try checkOpen()
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            try RefusedChangesFile.encoded(refusedChanges()),
            to: directory.appendingPathComponent(RefusedChangesFile.fileName))
    }
}

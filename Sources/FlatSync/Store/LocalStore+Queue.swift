#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

// What the sync engine logs as it works through the queue: seals, acknowledgements and wipes.

extension LocalStore {
    // MARK: - Logging queue transitions

    /// Appends queue transitions to the log and waits until they are durable.
    package func record(_ events: [CommandLogEvent]) async throws {
        try checkOpen()
        let ticket = try append(events.map { $0.encoded() })
        try await log.waitUntilDurable(ticket)
        try compactIfNeeded()
    }

    /// Starts a sending round of `zone` and logs it.
    package func sealPendingCommands(in zone: ZoneID) async throws -> [Command] {
        try checkWritable()
        let commands = pending.seal(zone)
        guard !commands.isEmpty else { return [] }
        try await record([.sealed(zone)])
        return commands
    }

    /// Ends the sending round of `zone` and logs it.
    package func unsealPendingCommands(in zone: ZoneID) async throws {
        guard pending.isSending(zone) else { return }
        try checkWritable()
        pending.unseal(zone)
        try await record([.unsealed(zone)])
    }

    /// Removes acknowledged (or dropped) records from a command being sent, and logs it.
    package func acknowledge(_ recordIDs: [RecordID], in commandID: CommandID) async throws {
        guard let zone = pending.command(commandID)?.zone else { return }
        var present: [RecordID] = []
        var changes: [RecordChange] = []
        for id in recordIDs {
            guard let change = pending.change(of: id, in: commandID) else { continue }
            present.append(id)
            changes.append(change)
        }
        guard !present.isEmpty else { return }
        try checkWritable()
        let onDisk = snapshotSequenceOnDisk[zone, default: 0]
        let newer = changes.filter { $0.sequence > onDisk }
        if !newer.isEmpty { acknowledgedSinceSnapshot[zone, default: []].append(contentsOf: newer) }
        pending.acknowledge(present, in: commandID)
        try await record([.acknowledged(commandID, present)])
        try forgetRefusals(of: present)
    }

    // MARK: - Wiping

    /// Wipes a zone's data, token, tags and commands, durably: the user deleted the zone.
    ///
    /// Notes the zone in `device.plist` (``DeviceFile/noteWipe(of:sequence:)``) first, with the wipe's
    /// sequence number and without the zone's sync bookkeeping, so that a change made after the wipe is not
    /// wiped again by a fetch that meets the same deletion. A note without its wipe (the process ended
    /// between the two) is wiped when the store next opens: waiting for a fetch to find the zone missing
    /// again fails once another device has created it again, and unsent changes from before the deletion
    /// would then be uploaded to it.
    ///
    /// - Returns: nil when the wipe is durable; the error of the write that failed after the zone was
    ///   wiped in memory, which stands (the log is rewritten from memory before its next entry).
    /// - Throws: when nothing was wiped (the store is not writable, or the note could not be written).
    package func wipe(_ zone: ZoneID) async throws -> (any Error)? {
        try checkMutable()
        // Taken first, so that the note says which wipe it is for: no change made after the wipe can have
        // a lower number, so a log or snapshot that holds none at or past it has not got the wipe either.
        let sequence = takeSequence()
        try updateDeviceFile { file in file.noteWipe(of: zone, sequence: sequence) }
        let removed = observedKeys(in: zone)
        lastWipeSequence[zone] = sequence
        acknowledgedSinceSnapshot[zone] = nil
        pending.clear(zone: zone)
        zones.wipe(zone, at: sequence)
        stateVersion[zone, default: 0] += 1
        recordChangeHub.emit(zone: zone, changed: removed)
        do {
            try await record([.clearedZone(zone, sequence: sequence)])
            try forgetRefusals(in: zone)
            try await persistSnapshot(of: zone)
        } catch {
            return error
        }
        return nil
    }

    /// Wipes every zone and the sync bookkeeping, durably: the account changed.
    package func wipeAll(newAccount: String?) async throws {
        try checkMutable()
        let sequence = takeSequence()
        let allZones = Set(zoneIDs).union(zones.hostZones.keys).sorted()
        for zone in allZones { lastWipeSequence[zone] = sequence }
        let removed = allZones.map { (zone: $0, records: observedKeys(in: $0)) }
        acknowledgedSinceSnapshot = [:]
        pending.clearAll()
        for zone in allZones { zones.wipe(zone, at: sequence) }
        try await record([.clearedAll(sequence: sequence)])
        for (zone, records) in removed { recordChangeHub.emit(zone: zone, changed: records) }
        try forgetRefusals(in: nil)
        try removeSnapshotsOfZonesNotOpen()
        try updateDeviceFile { [deviceID] file in
            file = DeviceFile(deviceID: deviceID)
            file.account = newAccount
        }
        for zone in zoneIDs {
            stateVersion[zone, default: 0] += 1
            try await persistSnapshot(of: zone)
        }
    }

    /// Removes the snapshot of every host zone no type this version registers lives in: a wipe of the
    /// account's data must not leave it for a later version that registers the type again, which would show
    /// it (and send it) in the new account. Even for a zone the log names: the log's wipe covers it only
    /// until a compaction in a run that does not register it drops that wipe. Before the device file names
    /// the new account, so a kill before it is done redoes the wipe.
    private func removeSnapshotsOfZonesNotOpen() throws(FlatSyncError) {
        let open = Set(zoneIDs)
        let fileSystem = options.fileSystem
        let names = try fileSystem.contentsOfDirectory(directory.path)
        let kept = Set(open.map(Self.snapshotFileName))
        var removed = false
        for name in names where name.hasPrefix("zone-") && name.hasSuffix(".plist") && !kept.contains(name) {
            try fileSystem.unlink(directory.appendingPathComponent(name).path)
            removed = true
        }
        if removed { try fileSystem.syncDirectory(directory.path) }
    }
}

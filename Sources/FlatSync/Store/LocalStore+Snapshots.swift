#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

extension LocalStore {
    // MARK: - Snapshots

    /// Notes that a zone's in-memory state changed and schedules its snapshot.
    package func stateDidChange(_ zone: ZoneID) {
        stateVersion[zone, default: 0] += 1
        guard snapshotTimers[zone] == nil, !isClosed else { return }
        let clock = options.clock
        let delay = options.snapshotDelay
        snapshotTimers[zone] = Task {
            // Cancelled by `close()`, which saves the snapshot itself and throws if it cannot, or by
            // `abandon()`, which saves none: a timer that went on here raced that save, and its error event
            // raced the end of the event stream.
            do { try await clock.sleep(for: delay) } catch { return }
            await self.snapshotTimerFired(zone)
        }
    }

    func snapshotTimerFired(_ zone: ZoneID) async {
        snapshotTimers[zone] = nil
        guard !isClosed else { return }
        do {
            try await persistSnapshot(of: zone)
        } catch {
            eventHub.emit(.error(.onDevice(error, zone: zone, message: "its snapshot could not be saved: \(error)")))
        }
    }

    /// Writes the zone's snapshot if the state changed since the last one, and returns when a snapshot
    /// holding at least the state at the time of the call is durable.
    package func persistSnapshot(of zone: ZoneID) async throws {
        try await snapshotWrites.perform { try await self.writeSnapshotIfChanged(zone) }
    }

    ///
    /// A snapshot never holds a local change the log does not: it waits until every entry appended before it
    /// took the state is on stable storage (flushing the log in buffered mode too). Otherwise a crash or a
    /// power loss could leave a change in the snapshot whose command the log lost — shown on this device,
    /// never sent.
    func writeSnapshotIfChanged(_ zone: ZoneID) async throws {
        let version = stateVersion[zone, default: 0]
        let url = snapshotURL(zone)
        let fileSystem = options.fileSystem
        guard version > versionOnDisk[zone, default: 0] || !fileSystem.exists(url.path) else { return }
        try checkWritable()
        let logged = latestTicket
        let covered: UInt64
        if zone == .readingList {
            let state = zones.readingList
            covered = state.appliedThroughSequence
            if let logged { try await log.waitUntilFlushed(logged) }
            try await Self.writeSnapshot(state, to: url, fileSystem: fileSystem)
        } else if zone != .readingHistory {
            let state = zones.hostZones[zone] ?? ZoneState()
            covered = state.appliedThroughSequence
            if let logged { try await log.waitUntilFlushed(logged) }
            try await Self.writeSnapshot(state, zone: zone, to: url, fileSystem: fileSystem)
        } else {
            // Written newest first, so that the next open finds the history in order and its first read
            // sorts nothing.
            _ = zones.history.items.orderedItems()
            let state = zones.history
            covered = state.appliedThroughSequence
            if let logged { try await log.waitUntilFlushed(logged) }
            try await Self.writeSnapshot(state, to: url, fileSystem: fileSystem)
        }
        versionOnDisk[zone] = max(versionOnDisk[zone, default: 0], version)
        snapshotSequenceOnDisk[zone] = covered
        acknowledgedSinceSnapshot[zone]?.removeAll { $0.sequence <= covered }
        // Acknowledged changes this snapshot now holds are dead weight in the log.
        try compactIfNeeded()
    }

    /// Encodes and writes a snapshot away from the actor, so mutations go on meanwhile.
    nonisolated static func writeSnapshot<Item: ColumnarItem>(
        _ state: ZoneState<Item>, zone: ZoneID = Item.zone, to url: URL, fileSystem: FileSystem
    ) async throws {
        let data = try SnapshotFile(state, zone: zone).encoded()
        try DurableFileWriter(fileSystem: fileSystem).write(data, to: url)
    }

    package nonisolated func snapshotURL(_ zone: ZoneID) -> URL {
        directory.appendingPathComponent(Self.snapshotFileName(zone))
    }

    /// `reading-list.plist`, `reading-history.plist`, and `zone-<name>.plist` for a host zone (whose name
    /// ``RecordTypeRegistry`` checked: letters, digits, `_` and `-`).
    package static func snapshotFileName(_ zone: ZoneID) -> String {
        switch zone {
        case .readingList: return "reading-list.plist"
        case .readingHistory: return "reading-history.plist"
        default: return "zone-\(zone.name).plist"
        }
    }

    // MARK: - Compaction

    /// Rewrites the log as the live commands once it is mostly dead (it holds more than
    /// ``Options/compactionGrowthFactor`` times as many record changes as are live) and either large or
    /// holding more dead changes than ``Options/compactionMinimumDeadChanges``. Counting changes rather
    /// than comparing with the size after the last compaction lets the log shrink once a large queue has
    /// been acknowledged and snapshotted.
    func compactIfNeeded() throws(FlatSyncError) {
        let live = liveRecordChanges
        guard recordChangesInLog > options.compactionGrowthFactor * live else { return }
        guard
            log.byteCount > options.compactionMinimumBytes
                || recordChangesInLog - live > options.compactionMinimumDeadChanges
        else { return }
        try compact()
    }

    /// Rewrites the log to hold only what a reopen needs: counters, wipes no snapshot covers yet, the
    /// live commands (and which were being sent), and acknowledged changes no snapshot holds yet.
    package func compact() throws(FlatSyncError) {
        var events: [CommandLogEvent] = [.counters(nextSequence: nextSequence, nextCommandID: pending.nextCommandID)]
        // Every zone with something to keep: a host zone no longer registered keeps its commands too.
        let zonesToKeep = Set(zoneIDs).union(pending.zones).union(lastWipeSequence.keys).union(
            acknowledgedSinceSnapshot.keys)
        for zone in zonesToKeep.sorted() {
            if let wipe = lastWipeSequence[zone], wipe > snapshotSequenceOnDisk[zone, default: 0] {
                events.append(.clearedZone(zone, sequence: wipe))
            }
            let commands = pending.commands(in: zone)
            let sealed = commands.filter { pending.isSealed($0.id) }
            events += sealed.map(CommandLogEvent.restored)
            if !sealed.isEmpty { events.append(.sealed(zone)) }
            events += commands.filter { !pending.isSealed($0.id) }.map(CommandLogEvent.restored)
            if let acknowledged = acknowledgedSinceSnapshot[zone], !acknowledged.isEmpty {
                events.append(.applied(zone, acknowledged))
            }
        }
        try log.rewrite(events.map { $0.encoded() })
        entriesInLog = events.count
        logIsBehindMemory = false
        recordChangesInLog = liveRecordChanges
    }
}

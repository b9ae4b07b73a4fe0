#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension LocalStore {
    /// Reading a directory back: snapshots, device file and command log, with damaged files quarantined.
    ///
    /// The log is replayed through ``PendingCommands`` to rebuild the queue, and every logged change
    /// newer than its zone's snapshot is laid over the snapshot. Each change carries the whole record as
    /// the mutation left it, so laying the newest change of each record over the snapshot reproduces the
    /// state the process had before it stopped.
    struct Recovery {
        static let logFileName = "commands.log"
        static let deviceFileName = DeviceFile.fileName

        var log: AppendLog
        var pending = PendingCommands()
        var zones = ZoneStates()
        var deviceFile: DeviceFile
        /// The refusals of `refused-changes.plist` whose changes are still pending.
        var refusals: [RecordID: RefusedChange] = [:]
        var nextSequence: UInt64 = 1
        var snapshotSequenceOnDisk: [ZoneID: UInt64] = [:]
        var lastWipeSequence: [ZoneID: UInt64] = [:]
        var zonesChangedByReplay: Set<ZoneID> = []
        /// Record changes in the log's mutation, restored and applied entries, for compaction.
        var recordChangesInLog = 0
        /// Entries in the log, of every kind.
        var entriesInLog = 0
        private var events: [SyncEvent] = []

        init(directory: URL, options: LocalStore.Options, registry: RecordTypeRegistry) throws {
            let now = options.currentDate()
            let fileSystem = options.fileSystem
            deviceFile = try Self.loadDevice(
                in: directory, wanted: options.deviceID, now: now, fileSystem: fileSystem, events: &events)
            // Named before the snapshots and the log name theirs: the store's own device is then among the
            // shared names (numbered in items: see `DeviceName`) however many other devices the history names.
            _ = DeviceName.named(deviceFile.deviceID)

            zones.readingList = try Self.loadSnapshot(
                of: .readingList, in: directory, now: now, fileSystem: fileSystem, events: &events)
            zones.history = try Self.loadSnapshot(
                of: .readingHistory, in: directory, now: now, fileSystem: fileSystem, events: &events)
            for zone in registry.hostZones {
                zones.hostZones[zone] = try Self.loadSnapshot(
                    of: zone, in: directory, now: now, fileSystem: fileSystem, events: &events)
            }
            let snapshotZones = ZoneID.builtIn + registry.hostZones
            for zone in snapshotZones {
                snapshotSequenceOnDisk[zone] = zones.appliedThroughSequence(of: zone)
                nextSequence = max(nextSequence, zones.appliedThroughSequence(of: zone) + 1)
            }

            let logURL = directory.appendingPathComponent(Self.logFileName)
            let (log, recovery) = try AppendLog.open(
                at: logURL, durability: options.durability, now: now, fileSystem: fileSystem)
            self.log = log
            if let moved = recovery.quarantinedFile {
                events.append(
                    .fileQuarantined(
                        original: logURL.path, movedTo: moved.path,
                        reason: recovery.damage?.message ?? "the command log was damaged"
                    )
                )
            }
            try replay(recovery.payloads, logURL: logURL, now: now, fileSystem: fileSystem)
            try finishInterruptedWipes(of: snapshotZones)
            // A round that was being sent when the last process stopped is over: nothing is in flight now.
            // Its saves may have reached the server unanswered (see ``ZoneState/savesOfUnknownFate``): noted
            // in the zone's snapshot before the log forgets the round, or a second crash would forget both.
            var unsealed: [Data] = []
            for zone in pending.zones where pending.isSending(zone) {
                let unanswered = pending.savesBeingSent(in: zone).filter { !RecordTypeRegistry.isBuiltIn($0) }
                if !unanswered.isEmpty {
                    for id in unanswered { zones.setFateUnknown(true, of: id) }
                    try writeSnapshot(of: zone, in: directory, fileSystem: fileSystem)
                }
                pending.unseal(zone)
                unsealed.append(CommandLogEvent.unsealed(zone).encoded())
            }
            if !unsealed.isEmpty {
                _ = try log.append(unsealed)
                entriesInLog += unsealed.count
            }
            refusals = try Self.loadRefusals(
                in: directory, pending: pending, now: now, fileSystem: fileSystem, events: &events)
        }

        /// Writes the zone's snapshot as replayed, once the log it replayed is on stable storage: after a killed
        /// process its last frames may be only in the page cache, and a snapshot must not hold a change the
        /// log could lose.
        private mutating func writeSnapshot(of zone: ZoneID, in directory: URL, fileSystem: FileSystem) throws {
            try log.syncWrittenFrames()
            let data: Data
            switch zone {
            case .readingList: data = try SnapshotFile(zones.readingList).encoded()
            case .readingHistory:
                _ = zones.history.items.orderedItems()  // newest first, as every history snapshot
                data = try SnapshotFile(zones.history).encoded()
            default: data = try SnapshotFile(zones.hostZones[zone] ?? ZoneState(), zone: zone).encoded()
            }
            try DurableFileWriter(fileSystem: fileSystem).write(
                data, to: directory.appendingPathComponent(LocalStore.snapshotFileName(zone)))
            snapshotSequenceOnDisk[zone] = zones.appliedThroughSequence(of: zone)
        }

        func forwardEvents(to hub: EventHub) {
            for event in events { hub.emitAndKeep(event) }
        }

        // MARK: Replay

        private mutating func replay(_ payloads: [Data], logURL: URL, now: Date, fileSystem: FileSystem) throws {
            var overlay: [RecordID: RecordChange] = [:]
            let mutationCount = payloads.lazy.filter(CommandLogEvent.isMutation).count
            func consider(_ change: RecordChange, covered: UInt64) {
                guard change.sequence > covered else { return }
                // Room for every mutation's change once one is needed (after a kill, the log's newest ones
                // usually are): growing one step at a time rehashed the overlay again and again.
                if overlay.isEmpty { overlay.reserveCapacity(mutationCount) }
                // One lookup in the usual case (no change for the record yet, or an older one); a newer one
                // that was there is put back.
                if let replaced = overlay.updateValue(change, forKey: change.recordID),
                    replaced.sequence > change.sequence
                {
                    overlay[change.recordID] = replaced
                }
            }
            // Zone names and device IDs recur in every entry: read them once.
            var recentStrings = LogStrings()
            pending.reserveCapacity(forRecordsAbout: mutationCount)
            for (index, payload) in payloads.enumerated() {
                let event: CommandLogEvent
                do {
                    event = try CommandLogEvent.decode(payload, reusing: &recentStrings)
                } catch {
                    // The frame's checksum was fine, so the bytes are as written but not a known event:
                    // keep what came before, keep the log as it is under a second name and replace it
                    // atomically with a clean copy.
                    let moved = try Quarantine.keepCopy(of: logURL, now: now, fileSystem: fileSystem)
                    try log.rewrite(Array(payloads[..<index]))
                    events.append(
                        .fileQuarantined(
                            original: logURL.path, movedTo: moved.path,
                            reason: "entry \(index) of the command log could not be read: \(error.message)"
                        )
                    )
                    break
                }
                entriesInLog += 1
                switch consume event {
                case .mutation(let mutation):
                    recordChangesInLog += mutation.changes.count
                    nextSequence = max(nextSequence, mutation.sequence + 1)
                    let covered = coveredSequence(mutation.zone)
                    for change in mutation.changes { consider(change, covered: covered) }
                    // Last, so that the queue takes the changes over instead of copying them.
                    pending.enqueue(consume mutation)
                case .restored(let command):
                    let id = command.id
                    let covered = coveredSequence(command.zone)
                    pending.restore(consume command)
                    // The changes the queue kept (a damaged log may name a record twice; the later one is kept).
                    guard let restored = pending.command(id) else { break }
                    recordChangesInLog += restored.recordCount
                    for case let change? in restored.slots { consider(change, covered: covered) }
                case .applied(let zone, let changes):
                    recordChangesInLog += changes.count
                    let covered = coveredSequence(zone)
                    for change in changes { consider(change, covered: covered) }
                case .sealed(let zone):
                    _ = pending.seal(zone)
                case .unsealed(let zone):
                    pending.unseal(zone)
                case .acknowledged(let command, let ids):
                    pending.acknowledge(ids, in: command)
                case .clearedZone(let zone, let sequence):
                    pending.clear(zone: zone)
                    overlay = overlay.filter { $0.key.zone != zone }
                    wipeIfOlder(zone, than: sequence)
                case .clearedAll(let sequence):
                    pending.clearAll()
                    overlay = [:]
                    for zone in Set(ZoneID.builtIn).union(zones.hostZones.keys).sorted() {
                        wipeIfOlder(zone, than: sequence)
                    }
                case .counters(let nextSequence, let nextCommandID):
                    self.nextSequence = max(self.nextSequence, nextSequence)
                    pending.raiseNextCommandID(to: nextCommandID)
                }
            }
            // The room reserved for a replayed command is not for commands made later.
            pending.reserveCapacity(forRecordsAbout: 0)
            // In sequence order, sorting positions rather than the changes themselves (each ~150 bytes).
            let changes = Array(overlay.values)
            overlay = [:]
            let order = changes.indices.sorted { changes[$0].sequence < changes[$1].sequence }
            for change in order.lazy.map({ changes[$0] }) {
                zones.replay(change)
                zonesChangedByReplay.insert(change.recordID.zone)
            }
        }

        /// Wipes the zones `device.plist` notes as wiped (``DeviceFile/zoneWipeSequences``) whose wipe the log
        /// and snapshots do not hold: the process ended after the note and before the wipe's log entry. The
        /// zone's data and pending changes predate the user's deletion, so they go now, before anything can
        /// send them (to the zone another device may have created again since). The note's write already
        /// forgot the zone's sync bookkeeping (``DeviceFile/noteWipe(of:sequence:)``).
        ///
        /// The wipe's entry needs no flush of its own: a mutation acknowledged later is flushed with it, and
        /// a process that ends before that finds the note unmet again.
        private mutating func finishInterruptedWipes(of registered: [ZoneID]) throws {
            let interrupted = (deviceFile.zoneWipeSequences ?? [:]).compactMap { name, sequence in
                let zone = ZoneID(name)
                let held = max(coveredSequence(zone), lastWipeSequence[zone] ?? 0)
                return registered.contains(zone) && held < sequence ? (zone, sequence) : nil
            }.sorted { $0.0 < $1.0 }
            for (zone, sequence) in interrupted {
                pending.clear(zone: zone)
                wipeIfOlder(zone, than: sequence)
                _ = try log.append([CommandLogEvent.clearedZone(zone, sequence: sequence).encoded()])
                entriesInLog += 1
                events.append(.zoneReset(zone: zone, reason: .deletedByUser))
            }
        }

        private func coveredSequence(_ zone: ZoneID) -> UInt64 {
            zones.appliedThroughSequence(of: zone)
        }

        /// A wipe the zone's snapshot does not cover: the snapshot's data predates it and is dropped.
        private mutating func wipeIfOlder(_ zone: ZoneID, than sequence: UInt64) {
            lastWipeSequence[zone] = sequence
            nextSequence = max(nextSequence, sequence + 1)
            guard coveredSequence(zone) < sequence else { return }
            zones.wipe(zone, at: sequence)
            zonesChangedByReplay.insert(zone)
        }

        // MARK: Files

        /// Reads `device.plist` and `device-id.plist`, quarantining either when damaged, and makes sure both
        /// hold the device's ID. The ID comes from `wanted` if given, else from `device.plist`, else from
        /// `device-id.plist`; only when neither holds one, or the directory is a copy (see
        /// ``LocalStore/inodeFileName``), is a new ID made — and a damaged `device.plist` says in its
        /// quarantine event which it was.
        private static func loadDevice(
            in directory: URL, wanted: String?, now: Date, fileSystem: FileSystem, events: inout [SyncEvent]
        ) throws -> DeviceFile {
            let devicePath = directory.appendingPathComponent(DeviceFile.fileName)
            let identityPath = directory.appendingPathComponent(DeviceIdentityFile.fileName)
            var device: DeviceFile?
            var deviceDamage: FlatSyncError?
            if let data = try fileSystem.readFile(devicePath.path) {
                do throws(FlatSyncError) {
                    device = try DeviceFile.decode(data, path: devicePath.path)
                } catch {
                    deviceDamage = error
                }
            }
            var identity: String?
            if let data = try fileSystem.readFile(identityPath.path) {
                do throws(FlatSyncError) {
                    identity = try DeviceIdentityFile.decode(data, path: identityPath.path).deviceID
                } catch {
                    let kept = device.map { "; it is written again from device.plist (device ID \($0.deviceID))" } ?? ""
                    try quarantine(
                        identityPath, because: error, now: now, fileSystem: fileSystem, into: &events,
                        consequence: kept)
                }
            }

            var deviceFileNeedsWriting = device == nil || device!.formatVersion < DeviceFile.currentFormatVersion
            if device == nil {
                let id = wanted ?? identity ?? UUID().uuidString
                device = DeviceFile(deviceID: id)
                if let deviceDamage {
                    let source: String
                    if wanted != nil {
                        source = "the device ID \(id) given when the store was opened is kept"
                    } else if identity != nil {
                        source = "the device ID \(id) was kept from device-id.plist"
                    } else {
                        source = "device-id.plist did not hold the device ID either, so a new one was made (\(id))"
                    }
                    try quarantine(
                        devicePath, because: deviceDamage, now: now, fileSystem: fileSystem, into: &events,
                        consequence: "; \(source); the account, database change token and prepared zones start "
                            + "over, so the next sync fetches everything again")
                }
            }
            if let wanted, device!.deviceID != wanted {
                device!.deviceID = wanted
                deviceFileNeedsWriting = true
            }
            // A copy of the directory (a backup restored on a second device, a folder copied by hand) carries
            // this device's ID, and two devices of one ID take each other's writes for their own: a delete
            // sent by one would then beat an edit the other made, unseen. The directory's inode number,
            // noted at its first open, tells a copy, which gets an ID of its own (a host that names the ID
            // keeps it). A rename keeps the number; a directory noted by no earlier open (or whose note does not
            // read) is taken as it is.
            let inodePath = directory.appendingPathComponent(LocalStore.inodeFileName)
            let inode = try fileSystem.inode(directory.path)
            let noted = try fileSystem.readFile(inodePath.path).flatMap { UInt64(String(decoding: $0, as: UTF8.self)) }
            if let inode, let noted, noted != inode, wanted == nil {
                let copied = device!.deviceID
                device!.deviceID = UUID().uuidString
                deviceFileNeedsWriting = true
                events.append(.deviceIDChanged(from: copied, to: device!.deviceID))
            }
            let writer = DurableFileWriter(fileSystem: fileSystem)
            if deviceFileNeedsWriting {
                try writer.write(try device!.encoded(), to: devicePath)
            }
            if identity != device!.deviceID {
                try writer.write(try DeviceIdentityFile(deviceID: device!.deviceID).encoded(), to: identityPath)
            }
            // Last: a crash before it leaves the old number, and the next open makes another new ID.
            if let inode, noted != inode {
                try writer.write(Data(String(inode).utf8), to: inodePath)
            }
            return device!
        }

        private static func loadSnapshot<Item: ColumnarItem>(
            of zone: ZoneID, in directory: URL, now: Date, fileSystem: FileSystem, events: inout [SyncEvent]
        ) throws -> ZoneState<Item> {
            let url = directory.appendingPathComponent(LocalStore.snapshotFileName(zone))
            let path = url.path
            // Streamed from the file into the zone's table: the file's bytes are never held whole.
            guard let source = try FileSnapshotSource.open(path, fileSystem: fileSystem) else { return ZoneState() }
            do {
                return try SnapshotFile.readState(of: Item.self, zone: zone, from: source, path: path)
            } catch  where error.code != .ioFailed {
                try quarantine(url, because: error, now: now, fileSystem: fileSystem, into: &events)
                return ZoneState()
            }
        }

        /// Reads `refused-changes.plist`, keeping the refusals of changes still pending (a change discarded or
        /// sent just before a crash may still be named there); a damaged file is quarantined and its changes
        /// are sent once more, as if never refused.
        private static func loadRefusals(
            in directory: URL, pending: PendingCommands, now: Date, fileSystem: FileSystem,
            events: inout [SyncEvent]
        ) throws -> [RecordID: RefusedChange] {
            let url = directory.appendingPathComponent(RefusedChangesFile.fileName)
            guard let data = try fileSystem.readFile(url.path) else { return [:] }
            let refusals: [RefusedChange]
            do throws(FlatSyncError) {
                refusals = try RefusedChangesFile.decode(data, path: url.path)
            } catch {
                try quarantine(
                    url, because: error, now: now, fileSystem: fileSystem, into: &events,
                    consequence: "; the changes the server refused are sent again at the next sync")
                return [:]
            }
            var kept: [RecordID: RefusedChange] = [:]
            for refusal in refusals where pending.latestChange(for: refusal.recordID) != nil {
                kept[refusal.recordID] = refusal
            }
            return kept
        }

        private static func quarantine(
            _ url: URL, because error: any Error, now: Date, fileSystem: FileSystem, into events: inout [SyncEvent],
            consequence: String = ""
        ) throws {
            let moved = try Quarantine.moveAside(url, now: now, fileSystem: fileSystem)
            let reason = (error as? FlatSyncError)?.message ?? "\(error)"
            events.append(.fileQuarantined(original: url.path, movedTo: moved.path, reason: reason + consequence))
        }
    }
}

import Foundation

extension LocalStore {
    /// Reading a directory back: snapshots, device file and command log, with damaged files quarantined.
    ///
    /// The log is replayed through ``PendingCommands`` to rebuild the queue, and every logged change
    /// newer than its zone's snapshot is laid over the snapshot. Each change carries the whole record as
    /// the mutation left it, so laying the newest change of each record over the snapshot reproduces the
    /// state the process had before it stopped.
    struct Recovery {
        static let logFileName = "commands.log"
        static let deviceFileName = "device.plist"

        var log: AppendLog
        var pending = PendingCommands()
        var zones = ZoneStates()
        var deviceFile: DeviceFile
        var nextSequence: UInt64 = 1
        var snapshotSequenceOnDisk: [ZoneID: UInt64] = [:]
        var lastWipeSequence: [ZoneID: UInt64] = [:]
        var zonesChangedByReplay: Set<ZoneID> = []
        /// Record changes in the log's mutation, restored and applied entries, for compaction.
        var recordChangesInLog = 0
        private var events: [SyncEvent] = []

        init(directory: URL, options: LocalStore.Options) throws {
            let now = options.currentDate()
            let devicePath = directory.appendingPathComponent(Self.deviceFileName)
            var device: DeviceFile?
            var deviceFileNeedsWriting = false
            if let data = try Self.read(devicePath) {
                do {
                    device = try DeviceFile.decode(data, path: devicePath.path)
                } catch {
                    try Self.quarantine(devicePath, because: error, now: now, into: &events)
                }
            }
            if device == nil {
                device = DeviceFile(deviceID: options.deviceID ?? UUID().uuidString)
                deviceFileNeedsWriting = true
            }
            if let wanted = options.deviceID, device!.deviceID != wanted {
                device!.deviceID = wanted
                deviceFileNeedsWriting = true
            }
            deviceFile = device!
            if deviceFileNeedsWriting {
                try DurableFileWriter().write(try deviceFile.encoded(), to: devicePath)
            }

            zones.readingList = try Self.loadSnapshot(ReadingListEntry.self, in: directory, now: now, events: &events)
            zones.history = try Self.loadSnapshot(ReadingHistoryItem.self, in: directory, now: now, events: &events)
            snapshotSequenceOnDisk = [
                .readingList: zones.readingList.appliedThroughSequence,
                .readingHistory: zones.history.appliedThroughSequence,
            ]
            nextSequence = max(zones.readingList.appliedThroughSequence, zones.history.appliedThroughSequence) + 1

            let logURL = directory.appendingPathComponent(Self.logFileName)
            let (log, recovery) = try AppendLog.open(at: logURL, durability: options.durability, now: now)
            self.log = log
            if let moved = recovery.quarantinedFile {
                events.append(
                    .fileQuarantined(
                        original: logURL.path, movedTo: moved.path,
                        reason: recovery.damage?.message ?? "the command log was damaged"
                    )
                )
            }
            try replay(recovery.payloads, logURL: logURL, now: now)
            // A round that was being sent when the last process stopped is over: nothing is in flight now.
            var unsealed: [Data] = []
            for zone in ZoneID.all where pending.isSending(zone) {
                pending.unseal(zone)
                unsealed.append(CommandLogEvent.unsealed(zone).encoded())
            }
            if !unsealed.isEmpty { _ = try log.append(unsealed) }
        }

        func forwardEvents(to hub: EventHub) {
            for event in events { hub.emitAndKeep(event) }
        }

        // MARK: Replay

        private mutating func replay(_ payloads: [Data], logURL: URL, now: Date) throws {
            var overlay: [RecordID: RecordChange] = [:]
            func consider(_ change: RecordChange, covered: UInt64) {
                guard change.sequence > covered else { return }
                if let existing = overlay[change.recordID], existing.sequence > change.sequence { return }
                overlay[change.recordID] = change
            }
            // Zone names and device IDs recur in every entry: read them once.
            var recentStrings = LogStrings()
            pending.reserveCapacity(forRecordsAbout: payloads.lazy.filter(CommandLogEvent.isMutation).count)
            for (index, payload) in payloads.enumerated() {
                let event: CommandLogEvent
                do {
                    event = try CommandLogEvent.decode(payload, reusing: &recentStrings)
                } catch {
                    // The frame's checksum was fine, so the bytes are as written but not a known event:
                    // keep what came before, keep the log as it is under a second name and replace it
                    // atomically with a clean copy.
                    let moved = try Quarantine.keepCopy(of: logURL, now: now)
                    try log.rewrite(Array(payloads[..<index]))
                    events.append(
                        .fileQuarantined(
                            original: logURL.path, movedTo: moved.path,
                            reason: "entry \(index) of the command log could not be read: \(error.message)"
                        )
                    )
                    break
                }
                switch event {
                case .mutation(let mutation):
                    recordChangesInLog += mutation.changes.count
                    pending.enqueue(mutation)
                    nextSequence = max(nextSequence, mutation.sequence + 1)
                    let covered = coveredSequence(mutation.zone)
                    for change in mutation.changes { consider(change, covered: covered) }
                case .restored(let command):
                    recordChangesInLog += command.changes.count
                    pending.restore(command)
                    let covered = coveredSequence(command.zone)
                    for change in command.changes.values { consider(change, covered: covered) }
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
                    for zone in ZoneID.all { wipeIfOlder(zone, than: sequence) }
                case .counters(let nextSequence, let nextCommandID):
                    self.nextSequence = max(self.nextSequence, nextSequence)
                    pending.raiseNextCommandID(to: nextCommandID)
                }
            }
            // The room reserved for a replayed command is not for commands made later.
            pending.reserveCapacity(forRecordsAbout: 0)
            for change in overlay.values.sorted(by: { $0.sequence < $1.sequence }) {
                if change.recordID.zone == .readingList {
                    zones.readingList.apply(change)
                    zones.readingList.appliedThroughSequence = max(
                        zones.readingList.appliedThroughSequence, change.sequence)
                } else if change.recordID.zone == .readingHistory {
                    zones.history.apply(change)
                    zones.history.appliedThroughSequence = max(zones.history.appliedThroughSequence, change.sequence)
                }
                zonesChangedByReplay.insert(change.recordID.zone)
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

        private static func loadSnapshot<Item: ColumnarItem>(
            _ type: Item.Type, in directory: URL, now: Date, events: inout [SyncEvent]
        ) throws -> ZoneState<Item> {
            let url = directory.appendingPathComponent(LocalStore.snapshotFileName(Item.zone))
            let path = url.path
            // Streamed from the file into the zone's table: the file's bytes are never held whole.
            guard let source = try FileSnapshotSource.open(path) else { return ZoneState() }
            do {
                return try SnapshotFile.readState(of: Item.self, from: source, path: path)
            } catch  where error.code != .ioFailed {
                try quarantine(url, because: error, now: now, into: &events)
                return ZoneState()
            }
        }

        /// The file's bytes, or nil when it does not exist.
        static func read(_ url: URL) throws -> Data? {
            do {
                return try Data(contentsOf: url)
            } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
                return nil
            } catch {
                if !FileManager.default.fileExists(atPath: url.path) { return nil }
                throw FlatSyncError(.ioFailed, "The file could not be read.", cause: error, path: url.path)
            }
        }

        private static func quarantine(_ url: URL, because error: any Error, now: Date, into events: inout [SyncEvent])
            throws
        {
            let moved = try Quarantine.moveAside(url, now: now)
            let reason = (error as? FlatSyncError)?.message ?? "\(error)"
            events.append(.fileQuarantined(original: url.path, movedTo: moved.path, reason: reason))
        }
    }
}

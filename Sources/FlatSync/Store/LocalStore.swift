#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

/// The on-device half of FlatSync: the reading list, the reading history and the durable queue of
/// commands waiting to be sent, in one directory that one process owns at a time.
///
/// Every mutation returns only after its command is durable at the directory's ``Durability``: the
/// command log is the durability point. The stores themselves live in memory and are saved as snapshot
/// files off the caller's path; after a crash, the commands in the log are laid over the snapshots
/// again, so nothing acknowledged is lost.
///
/// ```swift
/// let store = try LocalStore(directory: url)
/// try await store.readingList.add("article-1", title: "Tides")
/// for entry in await store.readingList.entries() { print(entry.articleID) }
/// try await store.close()
/// ```
///
/// A ``SyncContext`` owns a local store and syncs it; a `LocalStore` alone works offline.
///
/// Files in the directory: `lock` (held with `flock` while open), `commands.log` (the append-only
/// command log), `reading-list.plist`, `reading-history.plist` and `zone-<name>.plist` (snapshots of the
/// built-in and host zones), `device.plist` and `device-id.plist` (the device ID and sync bookkeeping),
/// `refused-changes.plist` (changes the server refused). Damaged files are moved aside as
/// `<name>.corrupt-<timestamp>`. <doc:FileFormats> describes each.
public actor LocalStore {
    /// How a directory is opened.
    public struct Options: Sendable {
        /// When a mutation counts as done. Default: ``Durability/fsync``.
        public var durability: Durability
        /// The device's ID in history items; `nil` uses the one saved in the directory (made on first open,
        /// and made anew in a copy of the directory: see ``SyncContext/Configuration-swift.struct/deviceID``).
        public var deviceID: String?
        /// The clock snapshot writes are debounced on.
        public var clock: any Clock<Duration>
        /// The time stamped on entries and history items, which keep it to the millisecond as CloudKit does.
        public var currentDate: @Sendable () -> Date
        /// How long after a mutation the snapshot is written (later mutations push it back).
        public var snapshotDelay: Duration
        /// How long history items are kept.
        public var historyRetention: HistoryRetention
        /// The host-defined record types the store keeps beside the reading list and history (see
        /// ``SyncableRecord``), each read and written through ``LocalStore/records(_:)``. Their zones are
        /// synced with the built-in ones; a type must be registered every time the directory is opened.
        public var recordTypes: [any SyncableRecord.Type] = []
        /// The log is compacted once it is larger than this many bytes (256 KiB, about 2,000 history
        /// records)…
        package var compactionMinimumBytes = 256 << 10
        /// …or holds more than this many record changes that no compaction would keep (sent, and in a
        /// snapshot): an app the system suspends and then kills never calls ``LocalStore/close()``, and
        /// every open replays each such change (about 3.5 µs apiece), so they are not left to pile up to
        /// the byte bound…
        package var compactionMinimumDeadChanges = 512
        /// …and holds this many times as many record changes as are live (pending, or acknowledged but in
        /// no snapshot yet), so it stays within about this factor of what a compaction would keep.
        package var compactionGrowthFactor = 4
        /// ``LocalStore/close()`` compacts a log that holds more than this many entries beyond two per
        /// command (one per mutation, say): the next open then replays one entry per command…
        package var closeCompactionMinimumEntries = 64
        /// …if the log is at most this large, so that closing stays quick (4 MiB: ~30,000 history records).
        package var closeCompactionMaximumBytes = 4 << 20
        /// Where every file-system call goes: the real file system, or a test double.
        package var fileSystem = FileSystem.posix
        /// A mutation of at least this many record changes makes its changes on two threads (see
        /// ``ChangeDraft``), then writes its log entry and takes its changes into the command queue at once,
        /// on two threads (see ``LocalStore/logAndQueueAtOnce(_:)``): below it, the hand-off to a second
        /// thread costs more than it saves. With one core, never.
        package var parallelBatchMinimum = ForkJoin.isWorthForking ? 1_024 : .max

        /// Options for opening a store; every default is what an app wants.
        public init(
            durability: Durability = .fsync,
            deviceID: String? = nil,
            clock: any Clock<Duration> = ContinuousClock(),
            currentDate: @escaping @Sendable () -> Date = { Date() },
            snapshotDelay: Duration = .seconds(1),
            historyRetention: HistoryRetention = .default,
            recordTypes: [any SyncableRecord.Type] = []
        ) {
            self.recordTypes = recordTypes
            self.durability = durability
            self.deviceID = deviceID
            self.clock = clock
            self.currentDate = currentDate
            self.snapshotDelay = snapshotDelay
            self.historyRetention = historyRetention
        }
    }

    /// The directory the store owns.
    public nonisolated let directory: URL
    /// This device's ID, stamped on history items it visits.
    public nonisolated let deviceID: String
    /// ``deviceID`` as the history items hold it.
    package nonisolated let deviceName: DeviceName
    /// The reading list.
    public nonisolated var readingList: ReadingList { ReadingList(store: self, observer: nil) }
    /// The reading history.
    public nonisolated var history: ReadingHistory { ReadingHistory(store: self, observer: nil) }
    /// The values of a host-defined record type registered in ``Options/recordTypes``. Writes through a
    /// store taken here are durable but not sent until a ``SyncContext`` opens the directory: take it from
    /// the context (``SyncContext/records(_:)``) to sync.
    public nonisolated func records<Value: SyncableRecord>(_ type: Value.Type) -> RecordStore<Value> {
        RecordStore(store: self, observer: nil)
    }

    /// The host-defined record types the store was opened with.
    package nonisolated let registry: RecordTypeRegistry
    /// Every zone the store syncs: the built-in ones, then the host zones, by name.
    package nonisolated let zoneIDs: [ZoneID]
    /// Where ``RecordStore/changes()`` hears of changes.
    package nonisolated let recordChangeHub = RecordChangeHub()

    package let options: Options
    package nonisolated let eventHub = EventHub()
    /// Shares trips into the actor among concurrent writers (see ``applyDurably(_:)``).
    package nonisolated let combiner = WriteCombiner<HandedIn>()
    let lock: DirectoryLock
    let log: AppendLog
    package internal(set) var pending: PendingCommands
    package internal(set) var zones: ZoneStates
    package private(set) var deviceFile: DeviceFile
    /// The pending changes the server refused, by record (see ``RefusedChange``); kept in
    /// `refused-changes.plist`.
    package internal(set) var refusals: [RecordID: RefusedChange]
    /// The sequence number the next mutation gets.
    var nextSequence: UInt64
    /// The sequence the next mutation takes: how many mutations there were, for tests.
    package var nextMutationSequence: UInt64 { nextSequence }
    /// How many batches ``logAndQueueAtOnce(_:)`` took since open (tests check which path a batch took).
    package internal(set) var parallelBatchCount = 0
    /// What the snapshot on disk covers, per zone.
    var snapshotSequenceOnDisk: [ZoneID: UInt64]
    /// The sequence of each zone's latest wipe.
    var lastWipeSequence: [ZoneID: UInt64] = [:]
    /// Changes the server acknowledged that no snapshot on disk holds yet; compaction keeps them.
    var acknowledgedSinceSnapshot: [ZoneID: [RecordChange]] = [:]
    /// Counts in-memory changes per zone, so a snapshot write knows whether it is needed.
    var stateVersion: [ZoneID: UInt64] = [:]
    var versionOnDisk: [ZoneID: UInt64] = [:]
    var snapshotTimers: [ZoneID: Task<Void, Never>] = [:]
    let snapshotWrites = AsyncSerialQueue()
    /// Record changes in the log's mutation, restored and applied entries: live ones and dead ones.
    var recordChangesInLog: Int
    /// Entries in the log, of every kind.
    var entriesInLog: Int
    var isClosed = false
    /// The ticket of the latest append: a snapshot holds no more than the log up to the latest ticket.
    var latestTicket: AppendLog.Ticket?
    /// Memory holds a change the log refused: the log must be rewritten before anything else is logged.
    var logIsBehindMemory = false
    /// The file in the directory holding the directory's inode number, noted at its first open: a copy of
    /// the directory has another, and gets a device ID of its own.
    package static let inodeFileName = "directory-inode"
    /// The checksums the server gave the uploads of asset files made here, by file, as read or noted so far
    /// (see `noteUpload(of:checksum:)`).
    var uploadedChecksums: [String: String] = [:]
    /// The number of this run's first mutation (see ``OwnWrites``).
    let firstSequenceOfRun: UInt64
    /// What tells this device's own versions from others', once read, and this run's session, once made
    /// (see `ownWrites()` and `writerSession()`).
    var ownWritesCache: OwnWrites?

    /// Opens (creating if needed) the store in `directory`, taking ownership of it.
    ///
    /// Opening reads the snapshots, replays the command log over them and repairs what it can: a torn
    /// log tail is dropped (it was never acknowledged); any other damaged file is moved aside, reported
    /// as a ``SyncEvent/fileQuarantined(original:movedTo:reason:)`` event, and its zone starts empty
    /// with no change token, so the next sync fetches it again. Commands before damage are kept.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/storeLocked`` if another process or another open
    ///   store owns the directory; ``FlatSyncError/Code-swift.struct/ioFailed`` if it cannot be read
    ///   or written; ``FlatSyncError/Code-swift.struct/invalidArgument``, before touching the directory,
    ///   if a type in ``Options-swift.struct/recordTypes`` breaks a rule (a bad zone or record type, one
    ///   registered twice, no fields, a bad field name, a list of lists, an encrypted type CloudKit cannot
    ///   encrypt).
    public init(directory: URL, options: Options = Options()) throws {
        let registry = try RecordTypeRegistry(options.recordTypes)
        let directory = directory.standardizedFileURL
        let fileSystem = options.fileSystem
        // Its entry (and each new parent's) must be durable before anything in it is acknowledged. A
        // directory without a device file was never opened to the end: whoever made it may not have
        // flushed its entry, so flush every parent once.
        let firstOpen = !fileSystem.exists(directory.appendingPathComponent(Recovery.deviceFileName).path)
        try fileSystem.createDirectory(directory.path, permissions: 0o700, flushingExistingParents: firstOpen)
        let lock = try DirectoryLock.acquire(in: directory, fileSystem: fileSystem)
        DurableFileWriter.removeLeftoverTemporaryFiles(in: directory, fileSystem: fileSystem)
        let recovered = try Recovery(directory: directory, options: options, registry: registry)
        self.registry = registry
        self.zoneIDs = ZoneID.builtIn + registry.hostZones
        self.directory = directory
        self.options = options
        self.lock = lock
        self.log = recovered.log
        self.pending = recovered.pending
        self.zones = recovered.zones
        self.deviceFile = recovered.deviceFile
        self.refusals = recovered.refusals
        self.deviceID = recovered.deviceFile.deviceID
        self.deviceName = DeviceName.named(recovered.deviceFile.deviceID)
        self.nextSequence = recovered.nextSequence
        self.firstSequenceOfRun = recovered.nextSequence
        self.snapshotSequenceOnDisk = recovered.snapshotSequenceOnDisk
        self.lastWipeSequence = recovered.lastWipeSequence
        self.recordChangesInLog = recovered.recordChangesInLog
        self.entriesInLog = recovered.entriesInLog
        // Zones the replay changed get a snapshot when one is next written.
        self.stateVersion = Dictionary(uniqueKeysWithValues: recovered.zonesChangedByReplay.map { ($0, 1) })
        recovered.forwardEvents(to: eventHub)
        Self.removeUnnamedAssets(
            in: directory, zones: recovered.zones,
            hostZones: registry.hostZones, pending: recovered.pending, fileSystem: fileSystem)
    }

    /// A stream of events: files quarantined when the store opened, then whatever happens next.
    public nonisolated func events() -> AsyncStream<SyncEvent> {
        eventHub.subscribe()
    }

    /// How many flushes (`fsync`) of appended log entries this store has made since it opened; group commit
    /// keeps it below the number of durable mutations when callers overlap. For the benchmark.
    package nonisolated var logFlushCount: Int { log.flushCount }
    /// The bytes of the command log's entries (its file also holds reserved space while open).
    package nonisolated var logByteCount: Int { log.byteCount }

    /// Every history item, newest first: the history table's own array, put in order first (see
    /// ``HistoryTable/orderedItems()``).
    package func historyItemsNewestFirst() -> [ReadingHistoryItem] {
        zones.history.items.orderedItems()
    }

    /// The commands waiting to be sent, zone by zone, oldest first.
    package func pendingCommands() -> [Command] {
        pending.allCommands
    }

    /// The number of commands waiting to be sent: each is one or more mutations of a zone, coalesced, that
    /// go out (and are acknowledged) together.
    public func pendingCommandCount() -> Int {
        pending.allCommands.count
    }

    /// The record changes waiting in zones that no store of this run registers, by zone: an earlier run's
    /// host store saved them, and they are sent once a store of their zone is registered again.
    package func pendingRecordCountsOfUnregisteredZones() -> [(ZoneID, Int)] {
        pending.zones.filter { !zoneIDs.contains($0) }.sorted().map { ($0, pending.recordCount(in: $0)) }
    }

    /// The number of record changes waiting to be sent.
    public func pendingRecordCount() -> Int {
        pending.recordCount()
    }

    /// The number of record changes of `zone` waiting to be sent.
    package func pendingRecordCount(in zone: ZoneID) -> Int {
        pending.recordCount(in: zone)
    }

    /// Saves every zone's snapshot, flushes the log and gives up the directory. Later calls throw
    /// ``FlatSyncError/Code-swift.struct/storeClosed``.
    ///
    /// A log of many small entries (one per mutation since the last compaction) is rewritten first as one
    /// entry per pending command, so the next open reads it quickly; if that fails, `close()` throws and
    /// the old log stays as it was.
    public func close() async throws {
        guard !isClosed else { return }
        for timer in snapshotTimers.values { timer.cancel() }
        snapshotTimers = [:]
        var firstError: (any Error)?
        for zone in zoneIDs {
            do { try await persistSnapshot(of: zone) } catch { firstError = firstError ?? error }
        }
        // As SQLite checkpoints its WAL when the last connection closes: a log of many small entries is
        // rewritten as one entry per command, so the next open reads those instead of one per mutation
        // (a tenth of a cold start with 1,000 pending visits).
        if firstError == nil, shouldCompactOnClose {
            do { try compact() } catch { firstError = error }
        }
        isClosed = true
        await snapshotWrites.waitUntilEmpty()
        log.close()
        lock.release()
        eventHub.finish()
        recordChangeHub.finish()
        if let firstError { throw firstError }
    }

    /// True when the log holds many more entries than a compaction would write, and little enough to
    /// rewrite it quickly. (A log of few entries but many sent changes, a large batch, is compacted when
    /// its snapshot is written: see ``compactIfNeeded()``.)
    var shouldCompactOnClose: Bool {
        // Not if `abandon()` ran while `close()` awaited its snapshots: the log is closed then.
        !isClosed && entriesInLog > 2 * pending.commandCount + options.closeCompactionMinimumEntries
            && log.byteCount <= options.closeCompactionMaximumBytes && log.failure == nil && !logIsBehindMemory
    }

    /// The record changes a compaction keeps: pending, or acknowledged and in no snapshot yet.
    var liveRecordChanges: Int {
        pending.recordCount() + acknowledgedSinceSnapshot.values.reduce(0) { $0 + $1.count }
    }

    /// Gives up the directory the way a killed process would: no snapshots are written and nothing
    /// buffered is flushed beyond what was acknowledged. For tests of crash recovery in one process.
    package func abandon() {
        for timer in snapshotTimers.values { timer.cancel() }
        snapshotTimers = [:]
        isClosed = true
        log.close()
        lock.release()
        eventHub.finish()
        recordChangeHub.finish()
    }

    /// Throws ``FlatSyncError/Code-swift.struct/storeClosed`` once the store is closed.
    package func checkOpen() throws(FlatSyncError) {
        if isClosed {
            throw FlatSyncError(.storeClosed, "The store is closed; open it again.", path: directory.path)
        }
    }

    /// Makes sure the log can take an entry and holds everything memory does, before memory changes again:
    /// after an I/O failure the log's file is not trusted (a failed flush may have dropped its data, and
    /// flushing the same file again could report success without it), so it is rewritten as a fresh file
    /// from what memory holds — the compaction's contents.
    ///
    /// A mutation whose write or flush failed thus stays made in memory and becomes durable here, still
    /// pending, so it is sent like any other: the caller was told it failed, and it may or may not have
    /// happened, but it never shows without being sent.
    ///
    /// - Throws: the rewrite's ``FlatSyncError/Code-swift.struct/ioFailed`` (the disk is still full, say);
    ///   nothing changed then.
    package func checkWritable() throws(FlatSyncError) {
        try checkOpen()
        guard logIsBehindMemory || log.failure != nil else { return }
        try compact()
    }

    /// Appends entries to the log, noting that memory is ahead of the log if that fails.
    func append(_ payloads: [Data]) throws(FlatSyncError) -> AppendLog.Ticket {
        try noteAppended(Result { () throws(FlatSyncError) in try log.append(payloads) }, entries: payloads.count)
    }

    /// Keeps count of what an append to the log did: its entries and ticket, or that the log is now behind
    /// memory.
    func noteAppended(
        _ appended: Result<AppendLog.Ticket, FlatSyncError>, entries: Int = 1
    ) throws(FlatSyncError) -> AppendLog.Ticket {
        switch appended {
        case .success(let ticket):
            entriesInLog += entries
            latestTicket = ticket
            return ticket
        case .failure(let error):
            logIsBehindMemory = true
            throw error
        }
    }

    // MARK: - Device file

    /// Durably changes `device.plist`: `change` edits the file as it stands, all in one step on this actor,
    /// so that callers on other actors cannot write over each other's changes (a read, an `await`, then a
    /// write could). Nothing changes, on disk or in ``deviceFile``, when the write fails.
    package func updateDeviceFile(_ change: @Sendable (inout DeviceFile) -> Void) throws {
        try checkOpen()
        var file = deviceFile
        change(&file)
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            try file.encoded(), to: directory.appendingPathComponent(Recovery.deviceFileName))
        deviceFile = file
    }
}

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
/// command log), `reading-list.plist` and `reading-history.plist` (snapshots), `device.plist` (the
/// device ID and sync bookkeeping). Damaged files are moved aside as `<name>.corrupt-<timestamp>`.
public actor LocalStore {
    /// How a directory is opened.
    public struct Options: Sendable {
        /// When a mutation counts as done. Default: ``Durability/fsync``.
        public var durability: Durability
        /// The device's ID in history items; `nil` uses the one saved in the directory (made on first open).
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
        /// The log is compacted once it is larger than this many bytes (256 KiB, about 2,000 history records:
        /// below that, replaying dead entries costs less than rewriting the log)…
        package var compactionMinimumBytes = 256 << 10
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
    private let lock: DirectoryLock
    private let log: AppendLog
    package internal(set) var pending: PendingCommands
    package internal(set) var zones: ZoneStates
    package private(set) var deviceFile: DeviceFile
    /// The pending changes the server refused, by record (see ``RefusedChange``); kept in
    /// `refused-changes.plist`.
    package internal(set) var refusals: [RecordID: RefusedChange]
    /// The sequence number the next mutation gets.
    private var nextSequence: UInt64
    /// The sequence the next mutation takes: how many mutations there were, for tests.
    package var nextMutationSequence: UInt64 { nextSequence }
    /// What the snapshot on disk covers, per zone.
    private var snapshotSequenceOnDisk: [ZoneID: UInt64]
    /// The sequence of each zone's latest wipe.
    private var lastWipeSequence: [ZoneID: UInt64] = [:]
    /// Changes the server acknowledged that no snapshot on disk holds yet; compaction keeps them.
    private var acknowledgedSinceSnapshot: [ZoneID: [RecordChange]] = [:]
    /// Counts in-memory changes per zone, so a snapshot write knows whether it is needed.
    private var stateVersion: [ZoneID: UInt64] = [:]
    private var versionOnDisk: [ZoneID: UInt64] = [:]
    private var snapshotTimers: [ZoneID: Task<Void, Never>] = [:]
    private let snapshotWrites = AsyncSerialQueue()
    /// Record changes in the log's mutation, restored and applied entries: live ones and dead ones.
    private var recordChangesInLog: Int
    /// Entries in the log, of every kind.
    private var entriesInLog: Int
    private var isClosed = false
    /// The ticket of the latest append: a snapshot holds no more than the log up to the latest ticket.
    private var latestTicket: AppendLog.Ticket?
    /// Memory holds a change the log refused: the log must be rewritten before anything else is logged.
    private var logIsBehindMemory = false

    /// Opens (creating if needed) the store in `directory`, taking ownership of it.
    ///
    /// Opening reads the snapshots, replays the command log over them and repairs what it can: a torn
    /// log tail is dropped (it was never acknowledged); any other damaged file is moved aside, reported
    /// as a ``SyncEvent/fileQuarantined(original:movedTo:reason:)`` event, and its zone starts empty
    /// with no change token, so the next sync fetches it again. Commands before damage are kept.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/storeLocked`` if another process or another open
    ///   store owns the directory; ``FlatSyncError/Code-swift.struct/ioFailed`` if it cannot be read
    ///   or written.
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
        self.zoneIDs = ZoneID.all + registry.hostZones
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
        self.snapshotSequenceOnDisk = recovered.snapshotSequenceOnDisk
        self.lastWipeSequence = recovered.lastWipeSequence
        self.recordChangesInLog = recovered.recordChangesInLog
        self.entriesInLog = recovered.entriesInLog
        // Zones the replay changed get a snapshot when one is next written.
        self.stateVersion = Dictionary(uniqueKeysWithValues: recovered.zonesChangedByReplay.map { ($0, 1) })
        recovered.forwardEvents(to: eventHub)
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

    /// The number of record changes waiting to be sent.
    public func pendingRecordCount() -> Int {
        pending.recordCount()
    }

    /// Saves both snapshots, flushes the log and gives up the directory. Later calls throw
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
    /// rewrite it quickly.
    private var shouldCompactOnClose: Bool {
        // Not if `abandon()` ran while `close()` awaited its snapshots: the log is closed then.
        !isClosed && entriesInLog > 2 * pending.commandCount + options.closeCompactionMinimumEntries
            && log.byteCount <= options.closeCompactionMaximumBytes && log.failure == nil && !logIsBehindMemory
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
    private func append(_ payloads: [Data]) throws(FlatSyncError) -> AppendLog.Ticket {
        try noteAppended(Result { () throws(FlatSyncError) in try log.append(payloads) }, entries: payloads.count)
    }

    /// Keeps count of what an append to the log did: its entries and ticket, or that the log is now behind
    /// memory.
    private func noteAppended(
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

    // MARK: - Mutations

    /// What a mutation applied on the actor reports: how many records changed and what to wait on
    /// before the mutation counts as done (nil when nothing changed).
    package typealias Applied = (changed: Int, durability: Durable?)

    /// A mutation of a single change, which a combiner may apply in one batch with the single changes of the
    /// same zone handed in next to it (see ``applyDurably(_:)``).
    package enum SingleChange: Sendable {
        case readingList(ReadingListChange)
        case history(ReadingHistoryChange)
    }

    /// A mutation for a combiner's trip: one change, which the combiner may apply in one batch with the
    /// single changes of the same zone next to it, or any other mutation, applied alone.
    ///
    /// A single change is carried as a value, not wrapped in a closure: with 16 writers that was a heap
    /// allocation per add, on the path every writer takes before it can hand its change in.
    package enum Request: Sendable {
        case single(SingleChange)
        case mutation(@Sendable (isolated LocalStore) throws -> Applied)

        /// The single change, if the request is one.
        var single: SingleChange? {
            if case .single(let change) = self { return change }
            return nil
        }
    }

    /// A mutation handed to the combiner, and the writer waiting to hear how it went.
    package struct HandedIn: Sendable {
        let request: Request
        /// Unchecked: the combiner tells every writer handed in exactly once (``applyInOrder(_:)`` checks that
        /// each request got a result, and the log calls each callback once), and a checked continuation
        /// allocated a box on every writer's path.
        let continuation: UnsafeContinuation<Outcome, Never>

        /// What the writer hears.
        enum Outcome: Sendable {
            /// The mutation is durable and changed this many records.
            case done(Int)
            /// Applying or flushing it failed.
            case failed(any Error)
            /// No combiner was at work when the writer came to hand it in: the writer combines itself.
            case combine
        }
    }

    /// Runs `apply` (a mutation, such as ``applyMutation(_:_:changedEach:)``) on the actor and returns how many records
    /// it changed once it is durable.
    ///
    /// Concurrent callers share trips into the actor (``WriteCombiner``): the caller that finds no other
    /// applying enters the actor and applies its own mutation and every one handed in meanwhile; the
    /// others hand theirs in and suspend until it is durable, or failed. A lone writer always finds the role
    /// free: it enters the actor, applies its mutation and leads its own flush.
    ///
    /// A mutation of one change goes through the overload that takes a ``SingleChange`` instead, so that it
    /// can join a batch.
    nonisolated package func applyDurably(
        _ apply: @escaping @Sendable (isolated LocalStore) throws -> Applied
    ) async throws -> Int {
        try await applyDurably(request: .mutation(apply))
    }

    /// Applies a mutation of one change as the overload above does; the combiner applies it in one batch
    /// mutation with the single changes of the same zone next to it (see ``combine(_:)``), and the writer
    /// still hears whether its own change changed its record.
    nonisolated package func applyDurably(_ single: SingleChange) async throws -> Int {
        try await applyDurably(request: .single(single))
    }

    /// Both overloads.
    nonisolated private func applyDurably(request: Request) async throws -> Int {
        if !combiner.tryToCombine() {
            let outcome = await withUnsafeContinuation { (continuation: UnsafeContinuation<HandedIn.Outcome, Never>) in
                if !combiner.handIn(HandedIn(request: request, continuation: continuation)) {
                    continuation.resume(returning: .combine)
                }
            }
            switch outcome {
            case .done(let changed): return changed
            case .failed(let error): throw error
            case .combine: break
            }
        }
        return try await combineAndWait(request)
    }

    /// The combiner's part of ``applyDurably(_:)``; call it only holding the combiner's role (it gives the
    /// role up). Applies `request` and everything handed in, tells each writer handed in how it went (the log
    /// calls back when its entry is durable), and waits until its own mutation and theirs are durable.
    ///
    /// The log's callbacks never lead a flush, so the combiner always waits for the trip's latest entry,
    /// even when its own mutation changed nothing or failed; a failure of that flush is then the handed-in
    /// writers' to hear, not the combiner's.
    nonisolated package func combineAndWait(_ request: Request) async throws -> Int {
        let (mine, handedIn) = await combine(request)
        var latest: Durable?
        // The writers whose changes went into `latest`'s entry: one callback tells them all, registered once
        // the trip's results move on to another entry (a callback per writer was a lock, an allocation and
        // a waiter each, on the path between the trip and the next flush).
        var sharing: [(UnsafeContinuation<HandedIn.Outcome, Never>, Int)] = []
        for (handed, result) in handedIn {
            switch result {
            case .failure(let error):
                handed.continuation.resume(returning: .failed(error))
            case .success((let changed, nil)):
                handed.continuation.resume(returning: .done(changed))
            case .success((let changed, let durability?)):
                if let latest, latest.ticket != durability.ticket {
                    latest.tellWhenDurable(sharing)
                    sharing = []
                }
                latest = durability
                sharing.append((handed.continuation, changed))
            }
        }
        latest?.tellWhenDurable(sharing)
        switch mine {
        case .failure(let error):
            try? await latest?.wait()
            throw error
        case .success((let changed, nil)):
            try? await latest?.wait()
            return changed
        case .success((let changed, let durability?)):
            // Handed-in entries come after the combiner's own: the flush of the latest covers it too.
            try await (latest ?? durability).wait()
            return changed
        }
    }

    /// Applies the combiner's own mutation, then every one handed in, until none is left; then the
    /// combiner's role is free again.
    ///
    /// Single changes of one zone that follow each other in an inbox (see ``applyDurably(_:)``) are
    /// applied as one batch mutation: one log entry, one trip through the command queue, instead of one per
    /// writer. The combiner's own single change joins what was handed in while it came onto the actor;
    /// when nothing was, it goes alone, and the writers hand theirs in while it runs.
    private func combine(
        _ request: Request
    ) -> (mine: Result<Applied, any Error>, handedIn: [(HandedIn, Result<Applied, any Error>)]) {
        var handedIn: [(HandedIn, Result<Applied, any Error>)] = []
        let mine: Result<Applied, any Error>
        let first = request.single == nil ? [] : combiner.takeInboxKeepingRole()
        if first.isEmpty {
            mine = Result { try perform(request) }
        } else {
            var results = applyInOrder([request] + first.lazy.map(\.request))
            mine = results.removeFirst()
            handedIn += zip(first, results)
        }
        while let inbox = combiner.takeInbox() {
            handedIn += zip(inbox, applyInOrder(inbox.map(\.request)))
        }
        return (mine, handedIn)
    }

    /// Applies one request alone.
    private func perform(_ request: Request) throws -> Applied {
        switch request {
        case .single(.readingList(let change)): return try applyMutation(\.readingList, [change])
        case .single(.history(let change)): return try applyMutation(\.history, [change])
        case .mutation(let apply): return try apply(self)
        }
    }

    /// Applies `requests` in order, running neighbouring single changes of one zone as one batch; returns
    /// each request's result.
    private func applyInOrder(_ requests: [Request]) -> [Result<Applied, any Error>] {
        var results: [Result<Applied, any Error>] = []
        results.reserveCapacity(requests.count)
        var start = 0
        while start < requests.count {
            var end = start + 1
            while end < requests.count, Self.sameZone(requests[start].single, requests[end].single) { end += 1 }
            if end - start == 1 {
                results.append(Result { try perform(requests[start]) })
            } else {
                // `sameZone` holds only for single changes.
                results += applySingles(requests[start..<end].map { $0.single! })
            }
            start = end
        }
        // One result per request: a writer left without one would wait for ever.
        precondition(results.count == requests.count, "a request of a combiner's trip got no result")
        return results
    }

    /// True when both are single changes of the same zone.
    private static func sameZone(_ lhs: SingleChange?, _ rhs: SingleChange?) -> Bool {
        switch (lhs, rhs) {
        case (.readingList?, .readingList?), (.history?, .history?): return true
        default: return false
        }
    }

    /// Applies single changes of one zone as one mutation. Each change's result is what it would have been
    /// as a mutation of its own after the ones before it: 1 and the batch's durability when it changed its
    /// record, else 0 and nothing to wait for.
    ///
    /// When the batch's changes were made but the mutation then failed (its entry could not be written, in
    /// buffered mode, where an append writes; or the compaction after it failed), the writers hear what they
    /// would have heard one by one: the first whose change changed its record — whose mutation it would have
    /// been — hears the failure, and every other one its own result, once the store has repaired its log
    /// (``compact()``, which the next writer's mutation would have done first) and the rewrite holds the
    /// batch durably. Failing them all made hosts retry changes that were kept (a visit counted twice). A
    /// failure is every writer's when nothing was applied or the repair fails too. (In fsync mode the entry
    /// is written by the flush, whose failure every writer it covers hears, batched or not.)
    private func applySingles(_ singles: [SingleChange]) -> [Result<Applied, any Error>] {
        var listChanges: [ReadingListChange] = []
        var historyChanges: [ReadingHistoryChange] = []
        for single in singles {
            switch single {
            case .readingList(let change): listChanges.append(change)
            case .history(let change): historyChanges.append(change)
            }
        }
        var changed = [Bool](repeating: false, count: singles.count)
        let sequenceBefore = nextSequence
        do {
            let durability = try changed.withUnsafeMutableBufferPointer { changed throws -> Durable? in
                // `singles` are of one zone: one of the two is empty.
                if !listChanges.isEmpty {
                    return try applyMutation(\.readingList, listChanges, changedEach: changed).durability
                }
                return try applyMutation(\.history, historyChanges, changedEach: changed).durability
            }
            return changed.map { .success($0 ? (1, durability) : (0, nil)) }
        } catch {
            // The sequence is used up only once the changes are made (in memory, and in the command queue).
            let applied = nextSequence != sequenceBefore
            guard applied, (try? compact()) != nil else {
                return Array(repeating: .failure(error), count: singles.count)
            }
            // The rewrite was flushed: nothing is left to wait for.
            var results: [Result<Applied, any Error>] = changed.map { .success($0 ? (1, nil) : (0, nil)) }
            if let first = changed.firstIndex(of: true) { results[first] = .failure(error) }
            return results
        }
    }

    /// Something appended to the log, and how to wait until it is durable.
    package struct Durable: Sendable {
        fileprivate let log: AppendLog
        fileprivate let ticket: AppendLog.Ticket

        /// Returns once the entry is durable (at once in buffered mode); see
        /// ``AppendLog/waitUntilDurable(_:)``.
        package func wait() async throws(FlatSyncError) {
            try await log.waitUntilDurable(ticket)
        }

        /// Tells `writers` (each with how many records its change changed) once the entry is durable, or
        /// that its flush failed, with one callback (``AppendLog/whenDurable(_:_:)``).
        fileprivate func tellWhenDurable(_ writers: [(UnsafeContinuation<HandedIn.Outcome, Never>, Int)]) {
            guard !writers.isEmpty else { return }
            log.whenDurable(ticket) { error in
                for (continuation, changed) in writers {
                    continuation.resume(returning: error.map { .failed($0) } ?? .done(changed))
                }
            }
        }
    }

    /// Applies validated changes to one zone's state and logs them as one mutation, returning how many
    /// records changed and what to wait on before the mutation counts as done (nil when nothing changed).
    ///
    /// The wait is the caller's, off the actor: a mutation that waited here came back to the actor once
    /// more after its flush only to return, and with many concurrent writers on two cores those hops left
    /// fewer of them ready for each flush (group commit).
    ///
    /// `changedEach`, when given (one place per change), is told whether each change changed its record, as
    /// it would have as a mutation of its own after the ones before it (see ``combine(_:)``).
    package func applyMutation<Change: ItemChange>(
        _ zone: WritableKeyPath<ZoneStates, ZoneState<Change.Item>>,
        _ itemChanges: [Change],
        changedEach: UnsafeMutableBufferPointer<Bool>? = nil
    ) throws -> (changed: Int, durability: Durable?) {
        typealias Item = Change.Item
        precondition(changedEach.map { $0.count == itemChanges.count } ?? true, "one place per change")
        try checkWritable()
        let sequence = nextSequence
        // At the precision the server keeps, so the version that comes back equals the one written here.
        let now = options.currentDate().roundedToMilliseconds
        // The changes as drafts (see `ChangeDraft`): a large batch makes them on two threads after the loop.
        var drafts: [ChangeDraft<Item>] = []
        drafts.reserveCapacity(itemChanges.count)
        // A batch may name an article more than once: its changes to one record become one. The index of
        // the batch's articles is built only once a change finds an item, from the changes drafted so far: an
        // article named again either has an item by then (its first change made one) or found one the first
        // time (it removed it), so the index exists for every repeat, and a batch of new articles (a first
        // import, a burst of visits) never hashes its IDs twice.
        var indexByArticle: BatchIndex?
        if itemChanges.count > 16 {
            // Grow the table once for a large batch of new articles, rather than at every doubling.
            zones[keyPath: zone].items.reserveCapacity(zones[keyPath: zone].items.count + itemChanges.count)
        }
        let device = deviceName
        // The zone's state is taken out for the loop and put back after it (nothing in the loop throws):
        // reaching it through the key path cost a key-path projection and two exclusivity checks per change.
        var state = ZoneState<Item>()
        swap(&state, &zones[keyPath: zone])
        for (position, itemChange) in itemChanges.enumerated() {
            let articleID = itemChange.articleID
            var hadItem = false
            let appended = state.appendChange(articleID, to: &drafts) { old in
                // Matched, not compared with nil, which would copy the item.
                if case .some = old { hadItem = true }
                return itemChange.applied(to: old, now: now, device: device)
            }
            changedEach?[position] = appended
            if hadItem, indexByArticle == nil, itemChanges.count > 1 {
                // From the changes before this one.
                indexByArticle = BatchIndex(
                    articles: drafts.prefix(drafts.count - (appended ? 1 : 0)).lazy.map(\.articleID),
                    capacity: itemChanges.count)
            }
            guard appended else { continue }
            if indexByArticle != nil, let index = indexByArticle!.insert(articleID, index: drafts.count - 1) {
                // The article's earlier change takes this one in: the batch keeps one change per record.
                let later = drafts.removeLast().change(sequence: sequence)
                drafts[index] = .made(drafts[index].change(sequence: sequence).coalesced(with: later))
            }
        }
        swap(&state, &zones[keyPath: zone])
        var changes = ChangeDraft.makeChanges(
            &drafts, sequence: sequence, onTwoThreads: drafts.count >= options.parallelBatchMinimum)
        // The drafts were taken apart into the changes (each left holding nothing): only their buffer is freed.
        drafts = []
        let itemsChanged = changes.count
        guard itemsChanged > 0 else { return (0, nil) }
        if zones[keyPath: zone].hostRecords.hasDependents {
            // Host records a deleted item owns (`deleteSelf`) go in the same mutation.
            changes += Self.cascadedDeletes(
                of: changes, in: Item.zone, table: &zones[keyPath: zone].hostRecords, sequence: sequence,
                hub: recordChangeHub)
        }
        let changeCount = changes.count
        _ = takeSequence()
        zones[keyPath: zone].appliedThroughSequence = sequence
        let mutation = Mutation(sequence: sequence, zone: Item.zone, changes: consume changes)
        let ticket: AppendLog.Ticket
        if changeCount >= options.parallelBatchMinimum {
            ticket = try logAndQueueAtOnce(consume mutation)
        } else {
            // Encoded first, so that the queue gets the last copy of the changes and moves them in.
            let entry = CommandLogEvent.mutation(mutation).encoded()
            pending.enqueue(consume mutation)
            ticket = try append([entry])
        }
        recordChangesInLog += changeCount
        stateDidChange(Item.zone)
        // Compacting before the flush is as safe as after: the rewrite holds the new mutation and makes
        // everything appended so far durable.
        try compactIfNeeded()
        return (itemsChanged, Durable(log: log, ticket: ticket))
    }

    /// Logs a mutation whose changes memory already holds (its zone's data covers its sequence), queues
    /// them for sending and returns what to wait on before it counts as done: the sequential half of
    /// ``applyMutation(_:_:changedEach:)``, for mutations that are not bursts of built-in items.
    func logAndQueue(_ mutation: consuming Mutation) throws(FlatSyncError) -> Durable {
        let zone = mutation.zone
        let changeCount = mutation.changes.count
        let entry = CommandLogEvent.mutation(mutation).encoded()
        pending.enqueue(consume mutation)
        let ticket = try append([entry])
        recordChangesInLog += changeCount
        stateDidChange(zone)
        try compactIfNeeded()
        return Durable(log: log, ticket: ticket)
    }

    /// A large batch's two halves of work, at once on two threads: its log entry is encoded, appended and
    /// flushed on one while its changes go into the command queue on the other: the two take about as long,
    /// and the flush need not wait for the queue.
    ///
    /// The state is the same as the sequential order leaves it, failures included: the changes are queued
    /// whether or not the append succeeds, and an append that fails marks the log as behind memory. The
    /// queue half copies the changes (the encoder reads them meanwhile) instead of moving them in. A flush
    /// that fails here poisons the log; if a compaction (`compactIfNeeded()`, just after) rewrites the log
    /// before the writer waits, the rewrite holds the batch and the writer hears it is durable, as the
    /// sequential path, which compacts before flushing, would tell it. The cost: the actor is held until
    /// both halves are done, so when the flush ends last, other callers wait for it here (before, they
    /// could run while the batch's writer waited for its flush off the actor).
    private func logAndQueueAtOnce(_ mutation: consuming Mutation) throws(FlatSyncError) -> AppendLog.Ticket {
        let log = self.log
        // The queue travels to the other thread in a mutex (a `@Sendable` closure cannot capture actor
        // state) and back: moved, never copied, so its dictionaries stay uniquely referenced.
        var taken = PendingCommands()
        swap(&taken, &pending)
        let queue = Mutex(consume taken)
        // Each half takes its reference to the changes out of a mutex, so none stays with this frame: the
        // queue's half lets go of its one as soon as it has copied them, and the log's half, whose flush
        // usually ends later, frees them there, while the queue's half works rather than after both.
        let forQueue = Mutex<Mutation?>(copy mutation)
        let forLog = Mutex<Mutation?>(consume mutation)
        parallelBatchCount += 1
        let (appended, _) = ForkJoin.run(
            { () -> Result<AppendLog.Ticket, FlatSyncError> in
                let mutation = forLog.withLock { $0.take()! }
                let appended = Result { () throws(FlatSyncError) in
                    try log.append([CommandLogEvent.mutation(mutation).encoded()])
                }
                if case .success = appended { log.flushIfIdle() }
                return appended
            },
            {
                let mutation = forQueue.withLock { $0.take()! }
                queue.withLock { _ = $0.enqueue(consume mutation) }
            }
        )
        queue.withLock { swap(&$0, &pending) }
        return try noteAppended(appended)
    }

    /// How many batches ``logAndQueueAtOnce(_:)`` took since open (tests check which path a batch took).
    package private(set) var parallelBatchCount = 0

    /// Uses up the next mutation sequence number.
    package func takeSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    /// Local history pruning (see <doc:Architecture>): removes expired items from this device only; the server keeps
    /// them. Returns how many items were removed.
    package func pruneHistory(now: Date) -> Int {
        let retention = options.historyRetention
        let expired = zones.history.items.values.filter { retention.isPrunable($0, now: now) }
        guard !expired.isEmpty else { return 0 }
        for item in expired { zones.history.items.removeValue(forKey: item.articleID) }
        stateDidChange(.readingHistory)
        return expired.count
    }

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

    private func snapshotTimerFired(_ zone: ZoneID) async {
        snapshotTimers[zone] = nil
        guard !isClosed else { return }
        do {
            try await persistSnapshot(of: zone)
        } catch {
            eventHub.emit(
                .error(
                    SyncEventError(
                        code: "\((error as? FlatSyncError)?.code.description ?? "ioFailed")",
                        message: "The snapshot of \(zone) could not be saved: \(error)")))
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
    private func writeSnapshotIfChanged(_ zone: ZoneID) async throws {
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
    private nonisolated static func writeSnapshot<Item: ColumnarItem>(
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

    /// Rewrites the log as the live commands once it is large and mostly dead: it holds more than
    /// ``Options/compactionGrowthFactor`` times as many record changes as are live. Counting changes rather
    /// than comparing with the size after the last compaction lets the log shrink once a large queue has
    /// been acknowledged and snapshotted.
    private func compactIfNeeded() throws(FlatSyncError) {
        guard log.byteCount > options.compactionMinimumBytes else { return }
        let live = pending.recordCount() + acknowledgedSinceSnapshot.values.reduce(0) { $0 + $1.count }
        guard recordChangesInLog > options.compactionGrowthFactor * live else { return }
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
        recordChangesInLog = pending.recordCount() + acknowledgedSinceSnapshot.values.reduce(0) { $0 + $1.count }
    }

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
    package func wipe(_ zone: ZoneID) async throws {
        try checkWritable()
        let sequence = takeSequence()
        let removed = hostRecordKeys(in: zone)
        lastWipeSequence[zone] = sequence
        acknowledgedSinceSnapshot[zone] = nil
        pending.clear(zone: zone)
        zones.wipe(zone, at: sequence)
        try await record([.clearedZone(zone, sequence: sequence)])
        recordChangeHub.emit(zone: zone, changed: removed)
        try forgetRefusals(in: zone)
        stateVersion[zone, default: 0] += 1
        try await persistSnapshot(of: zone)
    }

    /// Wipes every zone and the sync bookkeeping, durably: the account changed.
    package func wipeAll(newAccount: String?) async throws {
        try checkWritable()
        let sequence = takeSequence()
        let allZones = Set(zoneIDs).union(zones.hostZones.keys).sorted()
        for zone in allZones { lastWipeSequence[zone] = sequence }
        let removed = allZones.map { (zone: $0, records: hostRecordKeys(in: $0)) }
        acknowledgedSinceSnapshot = [:]
        pending.clearAll()
        for zone in allZones { zones.wipe(zone, at: sequence) }
        try await record([.clearedAll(sequence: sequence)])
        for (zone, records) in removed { recordChangeHub.emit(zone: zone, changed: records) }
        try forgetRefusals(in: nil)
        var file = DeviceFile(deviceID: deviceID)
        file.account = newAccount
        try saveDeviceFile(file)
        for zone in zoneIDs {
            stateVersion[zone, default: 0] += 1
            try await persistSnapshot(of: zone)
        }
    }

    // MARK: - Device file

    /// Durably replaces `device.plist`.
    package func saveDeviceFile(_ file: DeviceFile) throws {
        try checkOpen()
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            try file.encoded(), to: directory.appendingPathComponent(Recovery.deviceFileName))
        deviceFile = file
    }
}

/// The position of each article's change in a batch mutation's list, for merging a batch's changes to one
/// record: open addressing over the article IDs' bytes (see ``HistoryTable/hash(utf8:isASCII:)``), which
/// costs a third of a `[RecordID: Int]`'s hashing.
private struct BatchIndex {
    private var slots: [Int32]
    private var keys: [String] = []
    private let mask: Int

    /// An empty index with room for `capacity` articles (at most half full, so probes stay short).
    private init(capacity: Int) {
        var size = 2
        while size < capacity * 2 { size <<= 1 }
        slots = [Int32](repeating: -1, count: size)
        mask = size - 1
        keys.reserveCapacity(capacity)
    }

    /// An index of `articles` (those of a batch's changes so far), at their positions, with room for
    /// `capacity` articles.
    init(articles: some Sequence<String>, capacity: Int) {
        self.init(capacity: capacity)
        for (position, articleID) in articles.enumerated() { _ = insert(articleID, index: position) }
    }

    /// Records that `articleID`'s change is at `index` (the number of articles inserted so far), or returns
    /// the index it was given before.
    mutating func insert(_ articleID: String, index: Int) -> Int? {
        // Checked in release builds too: a position out of step would merge one article's change into another's.
        precondition(index == keys.count, "changes are appended in the order their articles are inserted")
        var key = articleID
        let hash = key.withUTF8 { utf8 in
            let raw = UnsafeRawBufferPointer(utf8)
            return HistoryTable.hash(utf8: raw, isASCII: CompactString.isASCII(raw))
        }
        var slot = Int(hash) & mask
        while slots[slot] >= 0 {
            let other = Int(slots[slot])
            if keys[other] == articleID { return other }
            slot = (slot + 1) & mask
        }
        slots[slot] = Int32(keys.count)
        keys.append(articleID)
        return nil
    }
}

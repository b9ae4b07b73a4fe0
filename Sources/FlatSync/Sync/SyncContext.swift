#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// FlatSync's host-facing facade: a device directory kept in sync with one account's private database.
///
/// A context owns the ``LocalStore`` (reading list, history, durable command queue) and one
/// `AsyncSerialQueue` that runs all sync work one job at a time: sending the queued commands (push)
/// and fetching the server's changes with change tokens (pull). Reading-list changes are sent at once;
/// history changes after a debounce. Time comes from the injected clock, so tests control it.
///
/// ```swift
/// let context = try await SyncContext.open(
///     directory: url,
///     account: CloudAccount(id: "user-1", transport: cloud)
/// )
/// try await context.start()                       // make sure the zones exist; send and fetch
/// try await context.readingList.add("article-1")  // durable now, sent right away
/// let summary = try await context.syncNow()        // pull to refresh: send, then fetch
/// for await event in context.events() { print(event) }
/// ```
///
/// The host forwards system signals: ``handleRemoteNotification(userInfo:)`` for pushes,
/// ``networkDidBecomeAvailable()`` when connectivity returns, ``accountDidChange(to:)`` when the user
/// signs in, out, or switches accounts.
public actor SyncContext: LocalChangeObserver {
    /// How a context syncs.
    public struct Configuration: Sendable {
        /// When a mutation counts as done. Default: ``Durability/fsync``.
        public var durability: Durability = .fsync
        /// The device's ID in history items; `nil` keeps the one saved in the directory (a random UUID
        /// made on first open), which is what most hosts want. An ID given here must be unique to the
        /// device: the engine recognises its own writes on the server by it, so two devices sharing an ID
        /// would take each other's changes for their own.
        public var deviceID: String?
        /// Time for debounces and retries.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// The time stamped on entries and history items.
        public var currentDate: @Sendable () -> Date = { Date() }
        /// How long history changes wait before they are sent; each new change pushes it back.
        public var historyDebounce: Duration = .seconds(5)
        /// The most records in one modify request (never more than the transport accepts).
        public var batchSize = 100
        /// The most records one fetch page returns.
        public var fetchResultsLimit = 400
        /// How long to wait after a failure.
        public var retryPolicy = RetryPolicy.default
        /// Seeds the retry jitter, for tests that need it to repeat; `nil` seeds from the system.
        public var randomSeed: UInt64?
        /// How long after a local change the snapshot is written.
        public var snapshotDelay: Duration = .seconds(1)
        /// How long history items are kept, and which seed a fresh zone.
        public var historyRetention = HistoryRetention.default
        /// The host-defined record types to sync beside the reading list and history (see
        /// ``SyncableRecord``); read and write them through ``SyncContext/records(_:)``.
        public var recordTypes: [any SyncableRecord.Type] = []
        /// Where the store's file-system calls go: the real file system, or a test double.
        package var fileSystem = FileSystem.posix

        /// The default configuration: `fsync` durability, the continuous clock, a 5 s history debounce.
        public init() {}

        /// A configuration with a clock (a `TestClock` in tests) and the rest as defaults.
        public init(clock: any Clock<Duration>) {
            self.clock = clock
        }

        var storeOptions: LocalStore.Options {
            var options = LocalStore.Options(
                durability: durability, deviceID: deviceID, clock: clock, currentDate: currentDate,
                snapshotDelay: snapshotDelay, historyRetention: historyRetention, recordTypes: recordTypes
            )
            options.fileSystem = fileSystem
            return options
        }
    }

    /// The store this context syncs.
    package nonisolated let localStore: LocalStore
    /// The reading list; changes are sent at once.
    public nonisolated var readingList: ReadingList { ReadingList(store: localStore, observer: self) }
    /// The reading history; changes are sent after ``Configuration/historyDebounce``.
    public nonisolated var history: ReadingHistory { ReadingHistory(store: localStore, observer: self) }
    /// The values of a host-defined record type registered in ``Configuration/recordTypes``; changes are
    /// sent after the type's ``SyncableRecord/sendDebounce`` (at once unless the type says otherwise).
    public nonisolated func records<Value: SyncableRecord>(_ type: Value.Type) -> RecordStore<Value> {
        RecordStore(store: localStore, observer: self)
    }
    /// Every zone this context syncs: the built-in ones, then the host zones.
    nonisolated var zoneIDs: [ZoneID] { localStore.zoneIDs }

    let configuration: Configuration
    let clock: EngineClock
    let queue = AsyncSerialQueue()
    var account: CloudAccount?
    /// Bumped by every account change; work started for an older epoch stops touching the store.
    var accountEpoch = 0
    var preparedZones: Set<ZoneID>
    /// Zones the server is known to notify this account of (a zone subscription exists); kept with
    /// ``preparedZones`` in `device.plist`.
    var subscribedZones: Set<ZoneID> = []
    /// Saves sent whose outcome is unknown (no response yet, or a lost one), by record: a resend that meets
    /// exactly this content on the server has nothing left to write. Memory only: after a restart the
    /// resend writes once more, which changes nothing but the version.
    var unconfirmedSaves: [RecordID: Record] = [:]
    var paused: PauseReason?
    /// Zones whose parked (refused) changes the next push sends once more: set by ``start()`` and
    /// ``syncNow()``, taken by the push.
    var retryRefusedZones: Set<ZoneID> = []
    /// Zones whose fetch deleted orphaned host records (see ``LocalStore/deleteOrphans(in:)``): a full sync
    /// sends those deletes before it returns.
    var zonesWithOrphansDeleted: Set<ZoneID> = []
    var isStarted = false
    var isClosed = false
    private var random: SeededRandomNumberGenerator
    private var pushTriggers: [ZoneID: SyncTrigger] = [:]
    private var fetchTrigger = SyncTrigger()
    private var zonesToFetch: Set<ZoneID> = []
    private var fullFetchRequested = false
    private var pushFailures: [ZoneID: Int] = [:]
    private var fetchFailures = 0
    private var timers: [TimerKey: ScheduledTimer] = [:]
    private var timerGeneration: UInt64 = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// The summaries of ``syncNow()`` calls still running, by call: every send and fetch that runs while
    /// one is open counts in it, including work queued before the call that it waited behind.
    private var openSummaries: [UInt64: SyncSummary] = [:]
    private var nextSummaryID: UInt64 = 0

    enum TimerKey: Hashable {
        /// A zone's changes wait for a debounce (the history's, or a host type's ``SyncableRecord/sendDebounce``).
        case sendDebounce(ZoneID)
        case pushRetry(ZoneID)
        case fetchRetry

        /// Fixes the order in which timers due at the same moment fire: by kind, then by zone.
        var rank: (Int, String) {
            switch self {
            case .sendDebounce(let zone): return (zone == .readingHistory ? 0 : 1, zone.name)
            case .pushRetry(let zone): return (zone == .readingList ? 2 : 3, zone.name)
            case .fetchRetry: return (4, "")
            }
        }
    }

    private struct ScheduledTimer {
        var deadline: Duration
        var task: Task<Void, Never>
        var generation: UInt64
    }

    private init(store: LocalStore, account: CloudAccount?, configuration: Configuration) {
        self.localStore = store
        self.account = account
        self.configuration = configuration
        self.clock = EngineClock(configuration.clock)
        self.random = SeededRandomNumberGenerator(seed: configuration.randomSeed ?? .random(in: .min ... .max))
        self.preparedZones = []
    }

    /// Opens the device directory for `account` (`nil`: nobody is signed in, so nothing syncs).
    ///
    /// If the directory holds another account's data (the account changed while the app was not
    /// running), that data, its pending commands and its tokens are wiped first.
    ///
    /// - Throws: ``FlatSyncError`` as ``LocalStore/init(directory:options:)`` does.
    public static func open(
        directory: URL,
        account: CloudAccount?,
        configuration: Configuration = Configuration()
    ) async throws -> SyncContext {
        let store = try LocalStore(directory: directory, options: configuration.storeOptions)
        let context = SyncContext(store: store, account: account, configuration: configuration)
        do {
            try await context.adoptAccountAtOpen()
        } catch {
            try? await store.close()
            throw error
        }
        return context
    }

    private func adoptAccountAtOpen() async throws {
        let device = await localStore.deviceFile
        let stored = device.account
        if let stored, stored != account?.id {
            try await localStore.wipeAll(newAccount: account?.id)
            localStore.eventHub.emitAndKeep(.accountChanged(from: stored, to: account?.id))
        } else if stored == nil, let id = account?.id {
            var file = device
            file.account = id
            try await localStore.saveDeviceFile(file)
        }
        preparedZones = Set(await localStore.deviceFile.preparedZones.map(ZoneID.init))
        subscribedZones = Set((await localStore.deviceFile.subscribedZones ?? []).map(ZoneID.init))
    }

    /// The engine's events, in order: fetches, sends, conflicts, resets, quarantined files, errors.
    public nonisolated func events() -> AsyncStream<SyncEvent> {
        localStore.eventHub.subscribe()
    }

    func emit(_ event: SyncEvent) {
        localStore.eventHub.emit(event)
    }

    // MARK: - Starting, syncing, signals

    /// Makes sure every zone (the two built-in ones and those of registered host types) exists on the
    /// server (creating each once and remembering it, and seeding a new zone with local data), then starts
    /// sending pending commands and fetching changes in the background. Call ``waitUntilIdle()`` to wait for that work.
    ///
    /// In the background it also makes sure the server pushes changes of every zone to the account's
    /// devices (``CloudTransport/subscribeToChanges(in:)``), once, remembered in the directory. A failure
    /// there does not fail `start()`: it is reported as a ``SyncEvent/error(_:)`` event, fetches still find
    /// every change, and the next `start()` tries again.
    ///
    /// Before `start()` nothing is sent or fetched in the background: local changes wait in the queue
    /// (``syncNow()`` still works, since it is an explicit request).
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/accountUnavailable`` without an account; the
    ///   ``CloudError`` that stopped the zones from being prepared (call `start()` again later).
    public func start() async throws {
        try await checkUsable()
        let epoch = accountEpoch
        if let stop = try await queue.perform({ await self.ensurePrepared(self.zoneIDs, epoch: epoch) }) {
            throw stop.error
        }
        isStarted = true
        retryRefusedZones.formUnion(zoneIDs)
        // Before the first fetch, so that a change made after that fetch read the server is pushed.
        queue.enqueue { await self.ensureSubscribed(self.zoneIDs, epoch: epoch) }
        for zone in zoneIDs { requestPush(zone) }
        requestFetch(full: true)
    }

    /// Pull to refresh: sends every pending command (history too, without waiting for its debounce),
    /// then fetches every zone's changes. Clears a pause and any retry wait first, since the user asked,
    /// and sends the changes the server refused once more (see ``RefusedChange``), in case what it
    /// objected to was fixed.
    ///
    /// Sync work already queued (by ``start()``, a local change, a notification) runs first; the summary
    /// counts it too, so it describes everything that happened from this call until it returns.
    /// Failures do not throw: the summary lists them, the work left is retried later, and
    /// ``SyncSummary/isComplete`` says whether everything got through.
    public func syncNow() async throws -> SyncSummary {
        try await syncNow(whenCounting: {})
    }

    /// ``syncNow()``, calling `whenCounting` once its summary counts what finishes (for tests that need
    /// to order work against that moment).
    package func syncNow(whenCounting: @Sendable () -> Void) async throws -> SyncSummary {
        try await checkUsable()
        paused = nil
        retryRefusedZones.formUnion(zoneIDs)
        for key in Array(timers.keys) { cancelTimer(key) }
        let epoch = accountEpoch
        let id = nextSummaryID
        nextSummaryID += 1
        openSummaries[id] = SyncSummary()
        whenCounting()
        do {
            return try await queue.perform { await self.runFullSync(epoch: epoch, summary: id) }
        } catch {
            openSummaries[id] = nil
            throw error
        }
    }

    /// Call for each push notification: the named zones are fetched soon. Notifications that arrive while
    /// a fetch runs cause at most one more fetch.
    public func handleRemoteNotification(zones: [ZoneID]) {
        zonesToFetch.formUnion(zones.filter { zoneIDs.contains($0) })
        requestFetch(full: false)
    }

    /// Call for each notification a ``CloudNotificationSource`` yields: the zones it names are fetched
    /// soon, or, when it asks for the database, every zone that changed. Notifications that arrive while a
    /// fetch runs cause at most one more fetch.
    public func handleRemoteNotification(_ notification: CloudNotification) {
        switch notification.fetch {
        case .zones(let zones): handleRemoteNotification(zones: zones)
        case .database: requestFetch(full: true)
        }
    }

    /// Call from an APNs push handler with the notification's `userInfo`: the payload is read at once
    /// (``CloudNotification/init(userInfo:)``; one FlatSync cannot read asks for a whole fetch) and handed
    /// to the context through its sync queue, so ``waitUntilIdle()`` also waits for the fetch it causes.
    public nonisolated func handleRemoteNotification(userInfo: [AnyHashable: Any]) {
        // Read here, synchronously: `userInfo` is not Sendable, the notification is.
        let notification = CloudNotification(userInfo: userInfo)
        queue.enqueue { await self.handleRemoteNotification(notification) }
    }

    /// Call when the network comes back: work waiting for it (or backing off) runs now.
    public func networkDidBecomeAvailable() {
        var retry: [ZoneID] = []
        for zone in zoneIDs where timers[.pushRetry(zone)] != nil {
            cancelTimer(.pushRetry(zone))
            retry.append(zone)
        }
        for zone in retry { requestPush(zone) }
        if timers[.fetchRetry] != nil {
            cancelTimer(.fetchRetry)
            requestFetch(full: true)
        }
    }

    /// Call when the account changes (`nil`: signed out). The old account's stores, commands and tokens
    /// are wiped before anything else runs, so nothing of one account ever reaches another.
    public func accountDidChange(to newAccount: CloudAccount?) async throws {
        try await localStore.checkOpen()
        let old = account?.id
        guard old != newAccount?.id else {
            // The same account again (signed back in, or a new transport for it): resume if it was the
            // reason sending stopped.
            account = newAccount
            if paused == .notAuthenticated, newAccount != nil {
                paused = nil
                for zone in zoneIDs { requestPush(zone) }
                requestFetch(full: true)
            }
            return
        }
        accountEpoch += 1
        account = nil
        for key in Array(timers.keys) { cancelTimer(key) }
        pushTriggers = [:]
        fetchTrigger.reset()
        queue.cancelAll()
        await queue.waitUntilEmpty()
        try await localStore.wipeAll(newAccount: newAccount?.id)
        preparedZones = []
        subscribedZones = []
        unconfirmedSaves = [:]
        retryRefusedZones = []
        paused = nil
        pushFailures = [:]
        fetchFailures = 0
        zonesToFetch = []
        account = newAccount
        emit(.accountChanged(from: old, to: newAccount?.id))
        if isStarted, newAccount != nil {
            for zone in zoneIDs { requestPush(zone) }
            requestFetch(full: true)
        }
    }

    /// The pending changes the server refused, parked until the schema is fixed (see ``RefusedChange``), in
    /// record order: they are sent again on ``start()`` and ``syncNow()``, or dropped with
    /// ``discardRefusedChanges(_:)``.
    public func refusedChanges() async -> [RefusedChange] {
        await localStore.refusedChanges()
    }

    /// Drops parked changes the server refused (see ``RefusedChange``) and puts the server's version of each
    /// record back on this device (or removes the record, where the server has none): the only way a
    /// refused change leaves without being sent.
    ///
    /// - Parameter ids: the records whose refused changes to drop; `nil` drops every refused change. IDs
    ///   without a refused change are ignored.
    /// - Returns: the records whose changes were dropped.
    /// - Throws: the ``CloudError`` of looking the records up on the server (nothing changed then), or
    ///   ``FlatSyncError`` when the store cannot be written.
    @discardableResult
    public func discardRefusedChanges(_ ids: [RecordID]? = nil) async throws -> [RecordID] {
        try await checkUsable()
        let epoch = accountEpoch
        // In the serial queue: never while a push has these changes on the wire.
        return try await queue.perform { try await self.discardRefused(ids, epoch: epoch) }
    }

    private func discardRefused(_ ids: [RecordID]?, epoch: Int) async throws -> [RecordID] {
        guard epoch == accountEpoch, let transport = account?.transport else { throw CancellationError() }
        let refused = Set(await localStore.refusedChanges().map(\.recordID))
        let targets = (ids.map { Set($0) } ?? refused).intersection(refused).sorted()
        guard !targets.isEmpty else { return [] }
        let servers = try await transport.lookupRecords(targets)
        guard epoch == accountEpoch else { throw CancellationError() }
        for id in targets { unconfirmedSaves[id] = nil }
        return try await localStore.discardRefusedChanges(targets, serverVersions: servers)
    }

    /// Returns once no sync work is queued or running and no timer (debounce, retry) is due. A timer still
    /// in the future counts as idle: advance the clock to make it due.
    public func waitUntilIdle() async {
        while true {
            await queue.waitUntilEmpty()
            let now = clock.now()
            if timers.values.contains(where: { $0.deadline <= now }) {
                await withCheckedContinuation { idleWaiters.append($0) }
                continue
            }
            if queue.isEmpty { return }
        }
    }

    /// Stops syncing, then closes the store (saving its snapshots). Later calls throw
    /// ``FlatSyncError/Code-swift.struct/storeClosed``.
    public func close() async throws {
        guard await stopSyncing() else { return }
        try await localStore.close()
    }

    /// Stops the way a killed process would: sync work is cancelled, no snapshot is written, and the
    /// store gives up its directory with only what its log made durable. For tests of recovery in one
    /// process; a host calls ``close()``.
    package func abandon() async {
        guard await stopSyncing() else { return }
        await localStore.abandon()
    }

    /// Marks the context closed, cancels its timers and queued work and waits for the running job.
    /// Returns false when it was already closed.
    private func stopSyncing() async -> Bool {
        guard !isClosed else { return false }
        isClosed = true
        accountEpoch += 1
        for key in Array(timers.keys) { cancelTimer(key) }
        queue.cancelAll()
        await queue.waitUntilEmpty()
        resumeIdleWaiters()
        return true
    }

    /// What the context is doing, for a status screen.
    public func status() async -> SyncStatus {
        SyncStatus(
            account: account?.id,
            pendingCommands: await localStore.pendingCommands().count,
            pendingRecords: await localStore.pendingRecordCount(),
            refusedRecords: await localStore.refusals.count,
            paused: paused,
            retrying: zoneIDs.filter { timers[.pushRetry($0)] != nil },
            preparedZones: zoneIDs.filter { preparedZones.contains($0) },
            readingListCount: await localStore.readingList.count(),
            historyCount: await localStore.history.count()
        )
    }

    private func checkUsable() async throws {
        try await localStore.checkOpen()
        guard account != nil else {
            throw FlatSyncError(.accountUnavailable, "No account is signed in; call accountDidChange(to:) first.")
        }
    }

    // MARK: - Local changes

    package func localChangeDidBecomeDurable(in zone: ZoneID, debounce: Duration?) async {
        let delay = debounce ?? (zone == .readingHistory ? configuration.historyDebounce : .zero)
        if delay > .zero {
            schedule(.sendDebounce(zone), after: delay)
        } else {
            requestPush(zone)
        }
    }

    // MARK: - Queueing work

    func requestPush(_ zone: ZoneID) {
        guard isStarted, account != nil, paused == nil, !isClosed, timers[.pushRetry(zone)] == nil else { return }
        if pushTriggers[zone, default: SyncTrigger()].request() {
            enqueuePush(zone)
        }
    }

    private func enqueuePush(_ zone: ZoneID) {
        let epoch = accountEpoch
        queue.enqueue { await self.runPushJob(zone, epoch: epoch) }
    }

    private func runPushJob(_ zone: ZoneID, epoch: Int) async {
        guard epoch == accountEpoch else { return }
        pushTriggers[zone, default: SyncTrigger()].started()
        let outcome = await push(zone, epoch: epoch)
        handle(outcome, of: zone)
        let followUp = pushTriggers[zone, default: SyncTrigger()].finished()
        if followUp {
            if outcome.stop == nil {
                enqueuePush(zone)
            } else {
                pushTriggers[zone]?.reset()
            }
        }
    }

    func requestFetch(full: Bool) {
        guard isStarted, account != nil, !isClosed else { return }
        if full { fullFetchRequested = true }
        if fetchTrigger.request() {
            let epoch = accountEpoch
            queue.enqueue { await self.runFetchJob(epoch: epoch) }
        }
    }

    private func runFetchJob(epoch: Int) async {
        guard epoch == accountEpoch else { return }
        fetchTrigger.started()
        let full = fullFetchRequested
        let zones = zonesToFetch
        fullFetchRequested = false
        zonesToFetch = []
        let outcome = await fetch(full: full, zones: zones, epoch: epoch)
        handle(outcome, full: full, zones: zones)
        if fetchTrigger.finished() {
            if outcome.stop == nil {
                queue.enqueue { await self.runFetchJob(epoch: epoch) }
            } else {
                fetchTrigger.reset()
            }
        }
    }

    private func runFullSync(epoch: Int, summary id: UInt64) async -> SyncSummary {
        if epoch == accountEpoch {
            for zone in zoneIDs {
                cancelTimer(.sendDebounce(zone))
                handle(await push(zone, epoch: epoch), of: zone)
            }
            let zones = zonesToFetch
            zonesToFetch = []
            fullFetchRequested = false
            handle(await fetch(full: true, zones: zones, epoch: epoch), full: true, zones: zones)
            let orphaned = zonesWithOrphansDeleted
            zonesWithOrphansDeleted = []
            for zone in zoneIDs where orphaned.contains(zone) && epoch == accountEpoch {
                handle(await push(zone, epoch: epoch), of: zone)
            }
        }
        var summary = openSummaries.removeValue(forKey: id) ?? SyncSummary()
        summary.pendingRecords = await localStore.pendingRecordCount()
        return summary
    }

    // MARK: - Outcomes

    private func handle(_ outcome: PushOutcome, of zone: ZoneID) {
        for id in openSummaries.keys { openSummaries[id]!.add(outcome) }
        guard let stop = outcome.stop else {
            pushFailures[zone] = 0
            return
        }
        switch stop {
        case .retryLater(let after):
            pushFailures[zone, default: 0] += 1
            schedule(.pushRetry(zone), after: retryDelay(failures: pushFailures[zone]!, retryAfter: after))
        case .waitForNetwork:
            pushFailures[zone, default: 0] += 1
            schedule(.pushRetry(zone), after: retryDelay(failures: pushFailures[zone]!, retryAfter: nil))
        case .paused(let reason):
            if paused == nil { emit(.paused(reason: reason)) }
            paused = reason
        case .failed(let error):
            emit(.error(SyncEventError(code: "\(error.code)", message: "Sending \(zone) failed: \(error.message)")))
            pushFailures[zone, default: 0] += 1
            schedule(.pushRetry(zone), after: retryDelay(failures: pushFailures[zone]!, retryAfter: nil))
        case .zoneWiped, .deletedOnServer, .cancelled:
            break
        }
    }

    private func handle(_ outcome: FetchOutcome, full: Bool, zones: Set<ZoneID>) {
        for id in openSummaries.keys { openSummaries[id]!.add(outcome) }
        guard let stop = outcome.stop else {
            fetchFailures = 0
            return
        }
        // Whatever was asked for is asked for again.
        zonesToFetch.formUnion(zones)
        if full { fullFetchRequested = true }
        switch stop {
        case .retryLater(let after):
            fetchFailures += 1
            schedule(.fetchRetry, after: retryDelay(failures: fetchFailures, retryAfter: after))
        case .waitForNetwork:
            fetchFailures += 1
            schedule(.fetchRetry, after: retryDelay(failures: fetchFailures, retryAfter: nil))
        case .paused(let reason):
            if paused == nil { emit(.paused(reason: reason)) }
            paused = reason
        case .failed(let error):
            emit(.error(SyncEventError(code: "\(error.code)", message: "Fetching failed: \(error.message)")))
            fetchFailures += 1
            schedule(.fetchRetry, after: retryDelay(failures: fetchFailures, retryAfter: nil))
        case .zoneWiped, .deletedOnServer, .cancelled:
            break
        }
    }

    private func retryDelay(failures: Int, retryAfter: Duration?) -> Duration {
        configuration.retryPolicy.delay(
            afterFailures: failures, retryAfter: retryAfter, random: random.nextUnitInterval())
    }

    // MARK: - Timers

    private func schedule(_ key: TimerKey, after delay: Duration) {
        guard !isClosed else { return }
        timers[key]?.task.cancel()
        timerGeneration += 1
        let generation = timerGeneration
        let deadline = clock.now() + delay
        let clock = self.clock
        let task = Task {
            do {
                try await clock.sleep(deadline)
            } catch {
                return
            }
            self.timerFired(key, generation: generation)
        }
        timers[key] = ScheduledTimer(deadline: deadline, task: task, generation: generation)
    }

    private func cancelTimer(_ key: TimerKey) {
        timers.removeValue(forKey: key)?.task.cancel()
    }

    /// Fires every timer that is due, not only the one whose task woke: timers that come due together
    /// wake together, and firing them in a fixed order (deadline, then kind) keeps runs repeatable.
    private func timerFired(_ key: TimerKey, generation: UInt64) {
        guard timers[key]?.generation == generation else { return }
        let now = clock.now()
        let due = timers.filter { $0.value.deadline <= now }
            .sorted {
                ($0.value.deadline, $0.key.rank.0, $0.key.rank.1) < ($1.value.deadline, $1.key.rank.0, $1.key.rank.1)
            }
        for (key, timer) in due {
            timers[key] = nil
            timer.task.cancel()
            switch key {
            case .sendDebounce(let zone): requestPush(zone)
            case .pushRetry(let zone): requestPush(zone)
            case .fetchRetry: requestFetch(full: fullFetchRequested)
            }
        }
        resumeIdleWaiters()
    }

    private func resumeIdleWaiters() {
        let waiters = idleWaiters
        idleWaiters = []
        for waiter in waiters { waiter.resume() }
    }
}

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
/// let events = context.events()                   // subscribe first: a stream starts empty
/// Task { for await event in events { print(event) } }
/// try await context.start()                       // make sure the zones exist; send and fetch
/// try await context.readingList.add("article-1")  // durable now, sent right away
/// let summary = try await context.syncNow()        // pull to refresh: send, then fetch
/// ```
///
/// The host forwards system signals: ``handleRemoteNotification(userInfo:)`` for pushes,
/// ``networkDidBecomeAvailable()`` when connectivity returns, ``accountDidChange(to:)`` when the user
/// signs in, out, or switches accounts.
public actor SyncContext: LocalChangeObserver {

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
    /// Applies a ``RecordBatch`` of host records of several types as one durable mutation (all of it or, on
    /// an error, none: see ``LocalStore/apply(_:)``) and sends it after the shortest
    /// ``SyncableRecord/sendDebounce`` of its types. Returns how many records changed.
    @discardableResult
    public nonisolated func apply(_ batch: RecordBatch) async throws -> Int {
        try await localStore.applyDurably(batch, observer: self)
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
    /// Zones found missing whose local data this run has queued, waiting to be created (see
    /// ``ensurePrepared(_:epoch:)``): a second try in the same run does not queue it again. After a restart
    /// it is queued once more, which coalesces with what waits.
    var seededZones: Set<ZoneID> = []
    /// Zones the user deleted that stay deleted until this device has a change to send in them
    /// (``DeviceFile/zonesLeftDeleted``; see ``ensurePrepared(_:epoch:)``).
    var zonesLeftDeleted: Set<ZoneID> = []
    /// Zones this run created since the database token was last saved and has not yet seen exist: the
    /// database lists them as changed, so one of them found missing is not taken as deleted on that word
    /// (see ``stopIfTheUserDeleted(_:via:epoch:)``). A zone leaves it when a fetch of it succeeds, or when
    /// a fetch saves a token listed after its creation.
    var createdSinceToken: Set<ZoneID> = []
    /// Zones the server is known to notify this account of (a zone subscription exists); kept with
    /// ``preparedZones`` in `device.plist`.
    var subscribedZones: Set<ZoneID> = []
    /// Saves sent whose outcome is unknown (no response yet, or a lost one), by record: a resend that meets
    /// exactly this content on the server has nothing left to write. Memory only: after a restart the
    /// resend writes once more, which changes nothing but the version.
    var unconfirmedSaves: [RecordID: Record] = [:]
    var paused: PauseReason?

    /// True while sending and fetching wait for ``accountDidChange(to:)`` (paused for
    /// ``PauseReason/notAuthenticated``): the transport may be signed in since, as another user, whose
    /// database must neither receive this account's data nor fill its stores. Only the host knows who
    /// signed in, so only naming the account again resumes; ``syncNow()`` does not.
    var waitsForTheAccount: Bool { paused == .notAuthenticated }
    /// Zones whose parked (refused) changes the next push sends once more: set by ``start()`` and
    /// ``syncNow()``, taken by the push.
    var retryRefusedZones: Set<ZoneID> = []
    /// How many pushes in a row stopped to wait out the `retryAfter` of a record's error that would otherwise
    /// park its change (see ``CloudErrorPolicy/waitsOnlyForRetryAfter(_:wholeRequest:)``), by record: until
    /// the record goes through or is parked. Kept in `device.plist` after each push that changed it, so an
    /// app used in short sessions still parks a record the server keeps answering "later".
    var refusalWaits: [RecordID: Int] = [:]
    /// The same for requests refused as a whole, which would otherwise be halved, by zone: until a push of the
    /// zone ends with nothing left or halves the request.
    var requestRefusalWaits: [ZoneID: Int] = [:]
    /// The two counts as `device.plist` holds them, so that a push writes the file only when they changed.
    var savedRefusalWaits = RefusalWaitCounts()
    /// Zones whose fetch deleted orphaned host records (see ``deleteOrphans(in:via:epoch:)``): a full sync
    /// sends those deletes before it returns.
    var zonesWithOrphansDeleted: Set<ZoneID> = []
    /// Zones whose last push or fetch was answered missing while the zone list named them (see
    /// ``wipeZoneIfUnlisted(_:via:epoch:)``): a full fetch goes on past such a zone rather than stop.
    var zonesAnsweredMissingWhileListed: Set<ZoneID> = []
    var isStarted = false
    var isClosed = false
    /// The source ``follow(_:)`` was given, kept after its stream ends so that signing in again restarts it.
    var followedSource: (any CloudNotificationSource)?
    /// The task reading ``followedSource``'s stream; nil when it is not read.
    var followTask: Task<Void, Never>?
    /// Bumped whenever following starts or stops, so a stream that ended late changes nothing.
    var followGeneration: UInt64 = 0
    var random: SeededRandomNumberGenerator
    var pushTriggers: [ZoneID: SyncTrigger] = [:]
    var fetchTrigger = SyncTrigger()
    var zonesToFetch: Set<ZoneID> = []
    var fullFetchRequested = false
    var pushFailures: [ZoneID: Int] = [:]
    var fetchFailures = 0
    var timers: [TimerKey: ScheduledTimer] = [:]
    var timerGeneration: UInt64 = 0
    var idleWaiters: [CheckedContinuation<Void, Never>] = []
    /// The summaries of ``syncNow()`` calls still running, by call: every send and fetch that runs while
    /// one is open counts in it, including work queued before the call that it waited behind.
    var openSummaries: [UInt64: SyncSummary] = [:]
    var nextSummaryID: UInt64 = 0

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

    struct ScheduledTimer {
        var deadline: Duration
        var task: Task<Void, Never>
        var generation: UInt64
    }

    init(store: LocalStore, account: CloudAccount?, configuration: Configuration) {
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
    /// running), that data, its pending commands and its tokens are wiped first. So is it when `account`
    /// is `nil`: `nil` says the user signed out, not that you could not tell who is signed in. Without a
    /// network at launch, open with the account the directory holds (``accountID(storedIn:)``) and call
    /// ``accountDidChange(to:)`` if the server later names someone else.
    ///
    /// - Throws: ``FlatSyncError`` as ``LocalStore/init(directory:options:)`` does;
    ///   ``FlatSyncError/Code-swift.struct/invalidArgument`` when the account's transport cannot write
    ///   the context's records (``CloudTransport/prepareToWrite(_:)`` with ``Configuration/schema``).
    public static func open(
        directory: URL,
        account: CloudAccount?,
        configuration: Configuration = Configuration()
    ) async throws -> SyncContext {
        try account?.transport.prepareToWrite(configuration.schema)
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

    /// The ID of the account whose data the directory holds (the one it was last opened for), or nil when it
    /// holds none (never opened, opened signed out, or its device file damaged).
    ///
    /// What to open with when the server cannot say who is signed in, as with no network at launch:
    ///
    /// ```swift
    /// let id: String?
    /// do {
    ///     id = try await transport.currentUser().userRecordName
    /// } catch let error as CloudError where error.code.isTransient {
    ///     id = try SyncContext.accountID(storedIn: deviceDirectory)  // check again once online
    /// }
    /// ```
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the device file cannot be read.
    public static func accountID(storedIn directory: URL) throws(FlatSyncError) -> String? {
        let path = directory.standardizedFileURL.appendingPathComponent(DeviceFile.fileName).path
        guard let data = try FileSystem.posix.readFile(path) else { return nil }
        // A damaged file is quarantined when the directory opens, and its account with it.
        return try? DeviceFile.decode(data, path: path).account
    }

    func adoptAccountAtOpen() async throws {
        let device = await localStore.deviceFile
        let stored = device.account
        if let stored, stored != account?.id {
            try await localStore.wipeAll(newAccount: account?.id)
            localStore.eventHub.emitAndKeep(.accountChanged(from: stored, to: account?.id))
        } else if stored == nil, let id = account?.id {
            try await localStore.updateDeviceFile { $0.account = id }
        }
        preparedZones = Set(await localStore.deviceFile.preparedZones.map(ZoneID.init))
        zonesLeftDeleted = Set((await localStore.deviceFile.zonesLeftDeleted ?? []).map(ZoneID.init))
        subscribedZones = Set((await localStore.deviceFile.subscribedZones ?? []).map(ZoneID.init))
        savedRefusalWaits = RefusalWaitCounts(await localStore.deviceFile)
        requestRefusalWaits = savedRefusalWaits.requests
        // A count outlives its record's change (acknowledged, or parked) only if the process ended before
        // the push saved the counts; such a count would shorten the waits of a later change.
        for (id, count) in savedRefusalWaits.records where await localStore.pendingChange(for: id) != nil {
            if await !localStore.isRefused(id) { refusalWaits[id] = count }
        }
        // Before anything is sent to it (see `wipeZonesListedDeletedWhileNotOpen`); a wipe that fails is
        // reported and tried again by the first full fetch, and no push goes to the zone meanwhile.
        _ = await wipeZonesListedDeletedWhileNotOpen(epoch: accountEpoch)
    }

    /// Wipes each zone a listing of the database's changes named deleted while a version of the app that did
    /// not register it ran (``DeviceFile/zonesListedWhileNotOpen``), as a deletion listed from this device's
    /// own token: the zone may have been created again since, and would take changes made before the
    /// deletion. A zone wiped since the database token is not wiped again. Returns the zones wiped, and the
    /// stop of a wipe that failed (reported as an error event; its note stays).
    func wipeZonesListedDeletedWhileNotOpen(epoch: Int) async -> (wiped: [ZoneID], stop: Stop?) {
        let device = await localStore.deviceFile
        let wipedSinceToken = Set(device.zonesWipedSinceToken ?? [])
        var wiped: [ZoneID] = []
        for zone in zoneIDs where device.zonesListedWhileNotOpen?[zone.name] == .deleted {
            guard !wipedSinceToken.contains(zone.name) else { continue }
            if let stop = await wipeZone(zone, epoch: epoch) { return (wiped, stop) }
            wiped.append(zone)
        }
        return (wiped, nil)
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
    /// Offline (or when the server asks to wait), `start()` starts all the same: each send and fetch makes
    /// sure of its zone first and retries as after any transient failure (see
    /// ``networkDidBecomeAvailable()``), so an app opened without a network syncs once it has one.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/accountUnavailable`` without an account; the
    ///   ``CloudError`` that stopped the zones from being prepared when waiting will not fix it (nobody
    ///   signed in, the storage full, a refusal), or the ``FlatSyncError`` of the device's own failure
    ///   (``FlatSyncError/Code-swift.struct/ioFailed``): call `start()` again once it is dealt with. Nobody
    ///   signed in (``CloudError/Code-swift.struct/notAuthenticated``) pauses the context as a send would
    ///   (``PauseReason/notAuthenticated``): once the user signs in, call ``accountDidChange(to:)`` with the
    ///   account the server names, then `start()`.
    public func start() async throws {
        try await checkUsable()
        let epoch = accountEpoch
        switch try await queue.perform({ await self.ensurePrepared(self.zoneIDs, epoch: epoch) }) {
        case nil, .waitForNetwork?, .retryLater?:
            break
        case .paused(.notAuthenticated)?:
            // As after any request that met it: whoever signs in next may be another user, so nothing goes
            // until the host names the account (accountDidChange(to:)), start() again included.
            notePause(.notAuthenticated)
            throw Stop.paused(.notAuthenticated).error
        case let stop?:
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
    /// objected to was fixed. Not a pause for want of an account (``PauseReason/notAuthenticated``): only
    /// ``accountDidChange(to:)`` ends that one, and until then the summary reports it and nothing is done.
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
        if !waitsForTheAccount {  // then it reports the pause and changes nothing
            paused = nil
            retryRefusedZones.formUnion(zoneIDs)
        }
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

    /// Call when the network comes back: work waiting for it (or backing off) runs now, and zones whose
    /// subscription failed (an app started offline, say) are subscribed.
    public func networkDidBecomeAvailable() {
        if isStarted, !isClosed, account != nil {
            let epoch = accountEpoch
            queue.enqueue { await self.ensureSubscribed(self.zoneIDs, epoch: epoch) }
        }
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
    ///
    /// Signing in from signed out keeps what was made while signed out, which belongs to no account, and
    /// sends it to the new one, as opening the directory with that account does (and as Apple's
    /// CKSyncEngine sample uploads everything on sign-in). Signing out wipes, as switching does.
    ///
    /// Also call it after the user signs in again, paused for want of an account
    /// (``PauseReason/notAuthenticated``), with the account the server now says is signed in: the same
    /// account resumes sending and fetching, which nothing else does.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/invalidArgument`` when the new account's transport
    ///   cannot write the context's records (nothing changes then), as ``open(directory:account:configuration:)``.
    public func accountDidChange(to newAccount: CloudAccount?) async throws {
        try await localStore.checkOpen()
        try newAccount?.transport.prepareToWrite(configuration.schema)
        let old = account?.id
        guard old != newAccount?.id else {
            // The same account again (signed back in, or a new transport for it): resume if it was the
            // reason sending stopped.
            account = newAccount
            if newAccount != nil, followTask == nil { startFollowing() }
            if paused == .notAuthenticated, newAccount != nil {
                paused = nil
                if isStarted, !isClosed {
                    let epoch = accountEpoch
                    queue.enqueue { await self.ensureSubscribed(self.zoneIDs, epoch: epoch) }
                }
                for zone in zoneIDs { requestPush(zone) }
                requestFetch(full: true)
            }
            return
        }
        accountEpoch += 1
        account = nil  // before the wait: a `follow(_:)` meanwhile starts nothing until the switch is done
        await stopFollowing()
        for key in Array(timers.keys) { cancelTimer(key) }
        pushTriggers = [:]
        fetchTrigger.reset()
        queue.cancelAll()
        await queue.waitUntilEmpty()
        if old == nil, let id = newAccount?.id, await localStore.deviceFile.account == nil {
            // Signed out until now: the data is no account's. What a sign-out wiped is not here.
            try await localStore.updateDeviceFile { $0.account = id }
        } else {
            try await localStore.wipeAll(newAccount: newAccount?.id)
        }
        preparedZones = []
        seededZones = []
        zonesLeftDeleted = []
        createdSinceToken = []
        zonesAnsweredMissingWhileListed = []
        subscribedZones = []
        unconfirmedSaves = [:]
        retryRefusedZones = []
        refusalWaits = [:]
        requestRefusalWaits = [:]
        savedRefusalWaits = RefusalWaitCounts()
        paused = nil
        pushFailures = [:]
        fetchFailures = 0
        zonesToFetch = []
        account = newAccount
        if newAccount != nil { startFollowing() }  // a new push token, for the session signed in now
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
    /// refused change leaves without being sent. A record removed so takes the records it owns (a
    /// `deleteSelf` reference) with it, as a delete would. It works by record: an edit made after the
    /// refusal joined the refused change and goes with it; to keep such an edit, save it again after
    /// discarding.
    ///
    /// - Parameter ids: the records whose refused changes to drop; `nil` drops every refused change. IDs
    ///   without a refused change are ignored.
    /// - Returns: the records whose changes were dropped.
    /// - Throws: the ``CloudError`` of looking the records up on the server (nothing changed then;
    ///   ``CloudError/Code-swift.struct/notAuthenticated`` without asking, while syncing is paused for want
    ///   of an account), or ``FlatSyncError`` when the store cannot be written.
    @discardableResult
    public func discardRefusedChanges(_ ids: [RecordID]? = nil) async throws -> [RecordID] {
        try await checkUsable()
        let epoch = accountEpoch
        // In the serial queue: never while a push has these changes on the wire.
        return try await queue.perform { try await self.discardRefused(ids, epoch: epoch) }
    }

    func discardRefused(_ ids: [RecordID]?, epoch: Int) async throws -> [RecordID] {
        guard epoch == accountEpoch, let transport = account?.transport else { throw CancellationError() }
        let refused = Set(await localStore.refusedChanges().map(\.recordID))
        let targets = (ids.map { Set($0) } ?? refused).intersection(refused).sorted()
        guard !targets.isEmpty else { return [] }
        guard !waitsForTheAccount else {
            throw CloudError(.notAuthenticated, "No account can be used: call accountDidChange(to:) once signed in.")
        }
        let servers = try await transport.lookupRecords(targets)
        guard epoch == accountEpoch else { throw CancellationError() }
        for id in targets { unconfirmedSaves[id] = nil }
        let dropped = try await localStore.discardRefusedChanges(targets, serverVersions: servers)
        // A record that goes with its change (new, the server has none) takes the records it owns with it,
        // as a delete would: they waited for it, unsent, and would otherwise stay until a fetch's clean-up.
        // Only theirs: the zone may be part fetched, and a record whose owner is still to come is no orphan.
        for (zone, ids) in Dictionary(grouping: dropped, by: \.zone).sorted(by: { $0.key < $1.key }) {
            _ = try await localStore.deleteOrphans(in: zone, owners: ids.map(\.name))
            requestPush(zone)
        }
        // The records a dropped delete took with it come back as the server has them, level by level. If the
        // server cannot be asked now, the push just asked for settles them.
        // The changes are dropped already: a failure here is the push's to meet again, not the caller's.
        var owners = dropped
        while !owners.isEmpty {
            let cascaded = await localStore.pendingCascadedDeletes(of: owners)
            let (settled, stop) = await settleCascadedDeletes(
                cascaded.map(\.change), commandOf: Dictionary(cascaded.map { ($0.change.recordID, $0.command) }) { $1 },
                via: transport, epoch: epoch)
            guard stop == nil else { break }
            owners = settled
        }
        return dropped
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
        // The last push's counts, which its own save skipped once the context was closing.
        try? await saveRefusalWaits()
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
    func stopSyncing() async -> Bool {
        guard !isClosed else { return false }
        isClosed = true
        accountEpoch += 1
        await stopFollowing()
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

    func checkUsable() async throws {
        try await localStore.checkOpen()
        guard account != nil else {
            throw FlatSyncError(.accountUnavailable, "No account is signed in; call accountDidChange(to:) first.")
        }
    }

}

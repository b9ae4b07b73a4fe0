#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Synchronization

// The write path: a mutation validated, applied to the zone states, logged and queued, and how
// concurrent writers share it (see `WriteCombiner`).

extension LocalStore {
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
    nonisolated func applyDurably(request: Request) async throws -> Int {
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
    func combine(
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
    func perform(_ request: Request) throws -> Applied {
        switch request {
        case .single(.readingList(let change)): return try applyMutation(\.readingList, [change])
        case .single(.history(let change)): return try applyMutation(\.history, [change])
        case .mutation(let apply): return try apply(self)
        }
    }

    /// Applies `requests` in order, running neighbouring single changes of one zone as one batch; returns
    /// each request's result.
    func applyInOrder(_ requests: [Request]) -> [Result<Applied, any Error>] {
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
    static func sameZone(_ lhs: SingleChange?, _ rhs: SingleChange?) -> Bool {
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
    func applySingles(_ singles: [SingleChange]) -> [Result<Applied, any Error>] {
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
        try checkMutable()
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
        // For the list's or the history's observers (`changes()`), when there are any.
        let observed = recordChangeHub.isObserved ? Self.observedKeys(of: changes.prefix(itemsChanged), Item.self) : []
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
        recordChangeHub.emit(zone: Item.zone, changed: observed)
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
    func logAndQueueAtOnce(_ mutation: consuming Mutation) throws(FlatSyncError) -> AppendLog.Ticket {
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

    /// The keys under which ``RecordChangeHub`` tells the reading list's or the history's observers about
    /// changes to their items: the item type's record type and each article's ID.
    static func observedKeys<Item: SyncedItem>(
        of changes: some Sequence<RecordChange>, _ type: Item.Type
    ) -> [(recordType: String, name: String)] {
        changes.compactMap { Item.observedKey(ofRecordNamed: $0.recordID.name) }
    }

    /// Uses up the next mutation sequence number, once the run's session is noted (``checkMutable()``).
    package func takeSequence() -> UInt64 {
        assert(ownWritesCache?.currentSession != nil, "a run notes its session before its first mutation")
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
        recordChangeHub.emit(
            zone: .readingHistory, changed: expired.map { (ReadingHistoryItem.recordType, $0.articleID) })
        stateDidChange(.readingHistory)
        return expired.count
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

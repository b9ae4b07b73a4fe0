#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// How work reaches the serial queue: local changes, push and fetch triggers, their outcomes, and the
// timers (debounces, retries) on the injected clock.

extension SyncContext {
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

    func enqueuePush(_ zone: ZoneID) {
        let epoch = accountEpoch
        queue.enqueue { await self.runPushJob(zone, epoch: epoch) }
    }

    func runPushJob(_ zone: ZoneID, epoch: Int) async {
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

    func runFetchJob(epoch: Int) async {
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

    func runFullSync(epoch: Int, summary id: UInt64) async -> SyncSummary {
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
        // Changes a store saved in an earlier run, in a zone no store of this run registers: kept, and sent
        // when one does; said here, since they keep the sync from being complete.
        for (zone, count) in await localStore.pendingRecordCountsOfUnregisteredZones() {
            summary.problems.append(
                SyncProblem(
                    .noStoreForZone, zone: zone,
                    message: "\(count) change\(count == 1 ? "" : "s") wait\(count == 1 ? "s" : "") for a store of "
                        + "this zone to be registered again (Configuration.recordTypes)"))
        }
        return summary
    }

    // MARK: - Outcomes

    func handle(_ outcome: PushOutcome, of zone: ZoneID) {
        for id in openSummaries.keys { openSummaries[id]!.add(outcome, of: zone) }
        guard let stop = outcome.stop else {
            pushFailures[zone] = 0
            return
        }
        switch stop {
        case .retryLater(let after, _):
            pushFailures[zone, default: 0] += 1
            scheduleRetry(
                .pushRetry(zone), after: retryDelay(failures: pushFailures[zone]!, retryAfter: after), stop, zone)
        case .waitForNetwork:
            pushFailures[zone, default: 0] += 1
            scheduleRetry(
                .pushRetry(zone), after: retryDelay(failures: pushFailures[zone]!, retryAfter: nil), stop, zone)
        case .paused(let reason):
            notePause(reason)
        case .failed, .failedOnDevice:
            emit(.error(stop.problem(in: zone)!.saying("sending failed")))
            pushFailures[zone, default: 0] += 1
            scheduleRetry(
                .pushRetry(zone), after: retryDelay(failures: pushFailures[zone]!, retryAfter: nil), stop, zone)
        case .zoneWiped, .deletedOnServer, .cancelled:
            break
        }
    }

    func handle(_ outcome: FetchOutcome, full: Bool, zones: Set<ZoneID>) {
        for id in openSummaries.keys { openSummaries[id]!.add(outcome) }
        guard let stop = outcome.stop else {
            fetchFailures = 0
            return
        }
        // Whatever was asked for is asked for again.
        zonesToFetch.formUnion(zones)
        if full { fullFetchRequested = true }
        switch stop {
        case .retryLater(let after, _):
            fetchFailures += 1
            scheduleRetry(.fetchRetry, after: retryDelay(failures: fetchFailures, retryAfter: after), stop, nil)
        case .waitForNetwork:
            fetchFailures += 1
            scheduleRetry(.fetchRetry, after: retryDelay(failures: fetchFailures, retryAfter: nil), stop, nil)
        case .paused(let reason):
            notePause(reason)
        case .failed, .failedOnDevice:
            emit(.error(stop.problem(in: nil)!.saying("fetching failed")))
            fetchFailures += 1
            scheduleRetry(.fetchRetry, after: retryDelay(failures: fetchFailures, retryAfter: nil), stop, nil)
        case .zoneWiped, .deletedOnServer, .cancelled:
            break
        }
    }

    /// Pauses for `reason`, announcing it unless the context is paused for it already: a quota pause that
    /// becomes one for want of an account (a fetch meets it) is announced too, as only the host ends it.
    func notePause(_ reason: PauseReason) {
        if paused != reason { emit(.paused(reason: reason)) }
        paused = reason
    }

    /// Schedules the retry of a push (of `zone`) or a fetch that stopped with `stop`, and says so.
    private func scheduleRetry(_ key: TimerKey, after delay: Duration, _ stop: Stop, _ zone: ZoneID?) {
        schedule(key, after: delay)
        if let problem = stop.problem(in: zone) { emit(.willRetry(problem, after: delay)) }
    }

    func retryDelay(failures: Int, retryAfter: Duration?) -> Duration {
        configuration.retryPolicy.delay(
            afterFailures: failures, retryAfter: retryAfter, random: random.nextUnitInterval())
    }

    // MARK: - Timers

    func schedule(_ key: TimerKey, after delay: Duration) {
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

    func cancelTimer(_ key: TimerKey) {
        timers.removeValue(forKey: key)?.task.cancel()
    }

    /// Fires every timer that is due, not only the one whose task woke: timers that come due together
    /// wake together, and firing them in a fixed order (deadline, then kind) keeps runs repeatable.
    func timerFired(_ key: TimerKey, generation: UInt64) {
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

    func resumeIdleWaiters() {
        let waiters = idleWaiters
        idleWaiters = []
        for waiter in waiters { waiter.resume() }
    }
}

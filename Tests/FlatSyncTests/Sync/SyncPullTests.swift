import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// Fetching: paging, resets after an expired token, pending edits laid over fetched records, account
/// changes, and the coalescing of notifications.
@Suite struct SyncPullTests {
    /// `base`, but every answer to a database fetch from a nil token also lists the reading list as deleted
    /// by the user: whether CloudKit lists old zone deletions from nil is not known, and the emulators never do.
    static func listingReadingListDeletedFromNil(_ base: any CloudTransport) -> InterceptingTransport {
        InterceptingTransport(
            base,
            databaseChanges: { token, changes in
                guard token == nil else { return changes }
                var changes = changes
                changes.deletedZones.append(ZoneDeletion(zone: .readingList, reason: .deletedByUser))
                return changes
            })
    }

    /// A page that says more is coming but holds nothing and gives back the token it was asked with would be
    /// asked for again at once, for ever: the fetch stops there and is tried again later. (Not an answer
    /// CloudKit is known to give; a client must not spin on one.) The stalled answers end after 20, so that
    /// without the guard the test ends too, and counts them.
    @Test(arguments: [false, true])
    func aPageThatMakesNoProgressIsNotAskedForAgainAtOnce(database: Bool) async throws {
        try await SyncHarness.run { harness in
            let stalls = Mutex<Int?>(nil)
            @Sendable func stalling(_ token: ChangeToken?) -> Bool {
                token != nil
                    && stalls.withLock { left in
                        guard let count = left, count > 0 else { return false }
                        left = count - 1
                        return true
                    }
            }
            let transport = InterceptingTransport(
                harness.cloud,
                databaseChanges: { token, changes in
                    guard database, let token, stalling(token) else { return changes }
                    return DatabaseChanges(changedZones: [], deletedZones: [], token: token, moreComing: true)
                },
                zoneChanges: { token, changes in
                    guard !database, let token, stalling(token) else { return changes }
                    return ZoneChanges(changedRecords: [], deletedRecordIDs: [], token: token, moreComing: true)
                })
            let a = try await harness.device("A", transport: transport, start: false)
            try await a.readingList.add("x")
            #expect(try await a.syncNow().isComplete, "the tokens are saved")
            let b = try await harness.device("B", start: false)
            try await b.readingList.add("y")  // so that A's fetch has a zone to fetch
            #expect(try await b.syncNow().isComplete)
            let kind: RequestKind = database ? .fetchDatabaseChanges : .fetchZoneChanges
            let before = transport.count(kind)
            stalls.withLock { $0 = 20 }
            let stalled = try await a.syncNow()
            #expect(!stalled.isComplete)
            #expect(
                stalled.problems.contains { $0.message.contains("the token it was asked with") }, "\(stalled.problems)")
            #expect(transport.count(kind) == before + 1, "not asked again at once")
            stalls.withLock { $0 = 0 }
            #expect(try await a.syncNow().isComplete)
            #expect(await a.readingList.contains("y"))
            try await a.close()
            try await b.close()
        }
    }

    /// `cloud`, refusing once (the server asking to slow down) the zone fetch numbered as `refuse` says: a
    /// large zone's fetch throttled midway.
    static func refusingAFetchPage(
        _ cloud: InMemoryCloud
    ) -> (transport: InterceptingTransport, refuse: @Sendable (_ number: Int) -> Void) {
        let refused = Mutex<Int?>(nil)
        let transport = InterceptingTransport(cloud) { kind, number in
            if kind == .fetchZoneChanges, refused.withLock({ $0 == number }) {
                await cloud.setFaultPlan(.failNext(1, .fetchZoneChanges, with: .requestRateLimited))
            }
        }
        return (transport, { number in refused.withLock { $0 = number } })
    }

    @Test func tokenExpiryMidwayThroughPagingRefetchesFromTheStart() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.history.apply((0..<4).map { .visit(articleID: "old\($0)") })
            _ = try await a.syncNow()
            // Once armed, the server expires every token just before B asks for its second page.
            let cloud = harness.cloud
            let armedAt = ArmedCounter()
            let transport = InterceptingTransport(cloud) { kind, number in
                if kind == .fetchZoneChanges, armedAt.isSecondAfterArming(number) {
                    await cloud.expireAllChangeTokens()
                }
            }
            let b = try await harness.device("B", transport: transport) { $0.fetchResultsLimit = 3 }
            #expect(await b.history.count() == 4)
            try await a.history.apply((0..<10).map { .visit(articleID: "new\($0)") })
            _ = try await a.syncNow()
            armedAt.arm(at: transport.count(.fetchZoneChanges))
            let events = b.events()
            let summary = try await b.syncNow()
            #expect(summary.resets == [SyncSummary.ZoneReset(zone: .readingHistory, reason: .tokenExpired)])
            #expect(await b.history.count() == 14)
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
            #expect(await collect(events).contains(.zoneReset(zone: .readingHistory, reason: .tokenExpired)))
        }
    }

    /// The same, as a test writes it with a fault plan that lets the first page through
    /// (`failNext(_:_:with:after:)`): directly, and over CKWS, where no code for an expired token is
    /// documented and the emulator answers as its route says (ckws.md §4).
    @Test(arguments: SyncHarness.Route.allCases)
    func aTokenRefusedAfterTheFirstPageRefetchesFromTheStart(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B") { $0.fetchResultsLimit = 3 }
            try await a.history.apply((0..<10).map { .visit(articleID: "new\($0)") })
            _ = try await a.syncNow()
            await harness.cloud.resetCounters()
            await harness.cloud.setFaultPlan(.failNext(1, .fetchZoneChanges, with: .changeTokenExpired, after: 1))
            let summary = try await b.syncNow()
            #expect(summary.resets == [SyncSummary.ZoneReset(zone: .readingHistory, reason: .tokenExpired)])
            #expect(await harness.cloud.faultPlan().isEmpty)
            let counters = await harness.cloud.counters()
            #expect(counters.faultsInjected.values.reduce(0, +) == 1)
            #expect(await b.history.count() == 10)
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    /// Also when the server tells of deletions from no token (`reportsDeletions`), as CloudKit's native
    /// API does; which CloudKit Web Services does is not known.
    @Test(arguments: [false, true])
    func aResetDeletesWhatTheServerNoLongerHasExceptPendingChanges(reportsDeletions: Bool) async throws {
        try await SyncHarness.run { harness in
            await harness.cloud.setReportsDeletionsFromNoToken(reportsDeletions)
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            try await a.readingList.apply([.add(articleID: "kept"), .add(articleID: "gone"), .add(articleID: "edited")])
            await a.waitUntilIdle()
            _ = try await b.syncNow()
            // While B is away, A removes two entries and the server forgets B's token.
            try await a.readingList.apply([.remove(articleID: "gone"), .remove(articleID: "edited")])
            await a.waitUntilIdle()
            await harness.cloud.expireAllChangeTokens()
            // B re-saves one of them offline (its edit must survive the reset), then syncs.
            await harness.cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .networkUnavailable))
            try await b.readingList.remove("edited")
            try await b.readingList.add("edited", title: "mine")
            await b.waitUntilIdle()
            #expect(await b.localStore.pendingRecordCount() == 1)
            let summary = try await b.syncNow()
            #expect(summary.resets.contains { $0.zone == .readingList && $0.reason == .tokenExpired })
            #expect(Set(await b.readingList.entries().map(\.articleID)) == ["kept", "edited"])
            #expect(await b.readingList.entry("edited")?.title == "mine")
            _ = try await a.syncNow()
            #expect(await DeviceView(a) == DeviceView(b))
            #expect(try await DeviceView(server: harness.cloud) == DeviceView(b))
            // What B's reset met: the server tells of "gone" from no token only when set to.
            let fromNoToken = try await harness.cloud.fetchZoneChanges(in: .readingList, since: nil, resultsLimit: 100)
            #expect(fromNoToken.deletedRecordIDs.contains(ReadingListEntry.recordID(for: "gone")) == reportsDeletions)
            try await a.close()
            try await b.close()
        }
    }

    /// A zone that an answer from a nil token lists as deleted by the user, and that then turns out missing,
    /// is wiped, as a deletion reported from a token is, and not created again with the local data. Over
    /// CloudKit Web Services, which reports a user-deleted zone as ZONE_NOT_FOUND.
    @Test func aZoneListedDeletedFromNilThatIsMissingIsWipedNotCreatedAgain() async throws {
        try await SyncHarness.run(via: .http) { harness in
            let cloud = harness.cloud
            let transport = Self.listingReadingListDeletedFromNil(harness.transport("A"))
            let a = try await harness.device("A", transport: transport)
            try await a.readingList.add("x")
            #expect(try await a.syncNow().isComplete)
            try await cloud.deleteZoneAsUser(.readingList)
            await cloud.expireAllChangeTokens()
            let summary = try await a.syncNow()
            #expect(summary.resets.contains(SyncSummary.ZoneReset(zone: .readingList, reason: .deletedByUser)))
            #expect(await a.readingList.entries().isEmpty)
            #expect(try await !cloud.listZones().contains(.readingList), "not created again")
            try await a.close()
        }
    }

    /// A long fetch keeps what it took before a later page failed: the next fetch resumes after it rather
    /// than starting over (a large zone throttled midway would otherwise never finish).
    @Test func aLongFetchThatFailsMidwayResumesAfterWhatItTook() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.readingList.apply((0..<2_500).map { .add(articleID: "a\($0)") })
            #expect(try await a.syncNow().isComplete)
            // The 8th page asked for is refused once: 7 pages of 200 came before it.
            let (transport, refuse) = Self.refusingAFetchPage(harness.cloud)
            refuse(8)
            let b = try await harness.device("B", transport: transport, start: false) { $0.fetchResultsLimit = 200 }
            let first = try await b.syncNow()
            #expect(!first.isComplete)
            let kept = await b.readingList.entries().count
            #expect(kept >= 1_000 && kept <= 1_400, "\(kept) entries kept from the first pages")
            let before = transport.count(.fetchZoneChanges)
            #expect(try await b.syncNow().isComplete)
            let pages = transport.count(.fetchZoneChanges) - before
            #expect(pages <= (2_500 - kept) / 200 + 2, "\(pages) pages: resumed, not from the start (13 + 1)")
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    /// A reset goes in parts too: one throttled midway resumes, across a restart even, as a reset after the
    /// part it took, and only its last part deletes what the server no longer has.
    @Test func aResetThatFailsMidwayResumesAsAResetAfterWhatItTook() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.readingList.apply((0..<2_500).map { .add(articleID: "a\($0)") })
            #expect(try await a.syncNow().isComplete)
            let cloud = harness.cloud
            let (transport, refuse) = Self.refusingAFetchPage(cloud)
            let pagesOf200: (inout SyncContext.Configuration) -> Void = { $0.fetchResultsLimit = 200 }
            var b = try await harness.device("B", transport: transport, configure: pagesOf200)
            #expect(await b.readingList.count() == 2_500)
            // While B is away, A removes five entries and the server forgets every token.
            try await a.readingList.apply((0..<5).map { .remove(articleID: "a\($0)") })
            #expect(try await a.syncNow().isComplete)
            await cloud.expireAllChangeTokens()
            // B's reset is refused at its 8th page asked for: one part of 1,000 records came before it.
            refuse(transport.count(.fetchZoneChanges) + 8)
            #expect(try await !b.syncNow().isComplete)
            #expect(await b.localStore.isResetting(.readingList))
            #expect(await b.readingList.entry("a0") != nil, "deleted only once the reset is over")
            try await b.close()
            b = try await harness.device("B", transport: transport, start: false, configure: pagesOf200)
            #expect(await b.localStore.isResetting(.readingList), "kept across a restart")
            let before = transport.count(.fetchZoneChanges)
            let summary = try await b.syncNow()
            #expect(summary.isComplete)
            // The history, not reached before the failure, has its own reset now: its expired token and one page.
            #expect(summary.resets.map(\.zone) == [.readingList, .readingHistory])
            #expect(summary.resets.allSatisfy { $0.reason == .tokenExpired })
            let pages = transport.count(.fetchZoneChanges) - before
            #expect(
                pages <= 10,
                "\(pages) pages: resumed after the 1,000 records taken (8 + 2), not from the start (13 + 2)")
            #expect(await !b.localStore.isResetting(.readingList))
            #expect(await b.readingList.entry("a0") == nil)
            #expect(await b.readingList.count() == 2_495)
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    @Test func aResetFromANilTokenWipesNoZoneItsAnswerListsAsDeleted() async throws {
        // A nil-token answer that lists the zone as deleted, as CloudKit might (see the transport's helper).
        try await SyncHarness.run { harness in
            let cloud = harness.cloud
            let transport = Self.listingReadingListDeletedFromNil(cloud)
            let a = try await harness.device("A", transport: transport)
            try await a.readingList.add("synced")
            _ = try await a.syncNow()
            // The database token expires while a change cannot be sent: the fetch resets from nil with it pending.
            await cloud.expireAllChangeTokens()
            await cloud.setFaultPlan(.failNext(100, .modifyRecords, with: .zoneBusy))
            try await a.readingList.add("unsent")
            let summary = try await a.syncNow()
            #expect(!summary.resets.contains { $0.reason == .deletedByUser }, "\(summary.resets)")
            #expect(Set(await a.readingList.entries().map(\.articleID)) == ["synced", "unsent"])
            #expect(await a.localStore.pendingRecordCount() == 1)
            await cloud.setFaultPlan(.none)
            #expect(try await a.syncNow().isComplete)
            #expect(Set(await cloud.records(in: .readingList).map(\.id.name)) == ["rl-synced", "rl-unsent"])
            try await a.close()
        }
    }

    /// A save that meets a newer server version, when this device deleted the record while the save was on
    /// the wire, is not merged back: the delete goes out with the tag the device had and loses to the
    /// version it never saw, like any delete, so the device and the server agree as soon as the sends are
    /// done. (Merged back, the entry showed here while the delete removed it from the server, and a note
    /// saved on it there was deleted as an orphan: an acknowledged note lost, found by the simulation with
    /// small pages, seed 196.)
    @Test func aDeleteMadeWhileItsSaveWasOnTheWireLosesToTheVersionTheSaveMet() async throws {
        try await SyncHarness.run { harness in
            let b = try await harness.device("B") { $0.recordTypes = [TestNote.self] }
            try await b.readingList.add("x", title: "B's")
            await b.waitUntilIdle()
            let cloud = harness.cloud
            let hold = FirstSendHold()
            // What A shows, and what the server holds, once A's sends are done and before its fetch.
            let probe = Mutex<(@Sendable () async -> Bool)?>(nil)
            let seenBeforeFetch = Mutex<(shown: Bool, onServer: Bool)?>(nil)
            let transport = InterceptingTransport(cloud) { kind, number in
                await hold.pass(kind, number)
                if kind == .fetchDatabaseChanges, let look = probe.withLock({ $0 }) {
                    let shown = await look()
                    let onServer = await cloud.records(in: .readingList).contains { $0.id.name == "rl-x" }
                    seenBeforeFetch.withLock { $0 = $0 ?? (shown, onServer) }
                }
            }
            // A has not fetched B's entry: its add goes out as a create, and meets B's version.
            let a = try await harness.device("A", transport: transport, start: false) {
                $0.recordTypes = [TestNote.self]
            }
            probe.withLock { $0 = { await a.readingList.contains("x") } }
            try await a.readingList.add("x")
            let sync = Task { try await a.syncNow() }
            await hold.reached.wait()
            try await a.readingList.remove("x")
            hold.release()
            #expect(try await sync.value.isComplete)
            let seen = try #require(seenBeforeFetch.withLock { $0 })
            #expect(seen.shown == seen.onServer, "A shows what the server holds: \(seen)")
            #expect(seen.onServer, "the delete lost to B's version, which it never saw")
            #expect(await a.readingList.entry("x")?.title == "B's")
            try await a.records(TestNote.self).save(TestNote(id: "n", articleID: "x", text: "t"))
            #expect(try await a.syncNow().isComplete)
            _ = try await b.syncNow()
            #expect(await DeviceView(a) == DeviceView(b))
            #expect(try await DeviceView(server: cloud) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    /// A save that finds its record deleted on the server, when this device deleted it too while the save
    /// was on the wire, is not sent again as a create: the record is not brought back, even for a moment.
    @Test func aSaveWhoseRecordBothSidesDeletedIsNotCreatedAgain() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false)
            let b = try await harness.device("B")
            try await a.history.visit("x")
            #expect(try await a.syncNow().isComplete)
            _ = try await b.syncNow()
            try await b.history.remove("x")
            _ = try await b.syncNow()
            let hold = FirstSendHold()
            let transport = InterceptingTransport(harness.cloud) { await hold.pass($0, $1) }
            try await a.close()
            let again = try await harness.device("A", transport: transport, start: false)
            try await again.history.visit("x")  // an update: A still has x and its tag
            let saved = await harness.cloud.counters().recordsSaved
            let sync = Task { try await again.syncNow() }
            await hold.reached.wait()
            try await again.history.remove("x")
            hold.release()
            let summary = try await sync.value
            #expect(summary.isComplete, "\(summary.problems)")
            #expect(await harness.cloud.records(in: .readingHistory).isEmpty)
            #expect(await again.history.item("x") == nil)
            #expect(await harness.cloud.counters().recordsSaved == saved, "x was not created again")
            try await again.close()
            try await b.close()
        }
    }

    @Test func aPendingEditSurvivesARemoteDelete() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            try await a.history.visit("h")
            _ = try await a.syncNow()
            _ = try await b.syncNow()
            try await a.history.remove("h")
            _ = try await a.syncNow()
            // B likes the item; its send fails, so the like is pending when B fetches A's delete.
            await harness.cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .zoneBusy))
            try await b.history.setLiking("h", .liked)
            let first = try await b.syncNow()
            #expect(first.fetched == 0 && first.deleted == 0, "the remote delete did not remove the pending edit")
            #expect(await b.history.item("h")?.liking == .liked)
            _ = try await b.syncNow()
            _ = try await a.syncNow()
            #expect(await a.history.item("h")?.liking == .liked, "the edit beat the delete everywhere")
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    @Test func anAccountChangeWipesTheOldAccountBeforeAnythingIsSent() async throws {
        try await SyncHarness.run { harness in
            let bobsCloud = InMemoryCloud()
            let a = try await harness.device("A", account: "alice")
            try await a.readingList.add("alice-synced")
            await a.waitUntilIdle()
            // Alice's next changes cannot be sent yet.
            await harness.cloud.setFaultPlan(.failNext(100, with: .networkUnavailable))
            try await a.readingList.add("alice-pending")
            try await a.history.visit("alice-history")
            #expect(await a.localStore.pendingRecordCount() == 2)
            let events = a.events()
            try await a.accountDidChange(to: CloudAccount(id: "bob", transport: bobsCloud))
            #expect(await a.readingList.entries().isEmpty)
            #expect(await a.history.items().isEmpty)
            #expect(await a.localStore.pendingRecordCount() == 0)
            try await a.readingList.add("bob-1")
            _ = try await a.syncNow()
            let bobs = Set(await bobsCloud.records(in: .readingList).map(\.id.name))
            #expect(bobs == ["rl-bob-1"], "nothing of Alice's reached Bob's database")
            #expect(await bobsCloud.records(in: .readingHistory).isEmpty)
            try await a.close()
            #expect(await collect(events).contains(.accountChanged(from: "alice", to: "bob")))
            // Opening the directory for someone else wipes it too.
            let reopened = try await harness.device("A", account: "carol", transport: InMemoryCloud())
            #expect(await reopened.readingList.entries().isEmpty)
            try await reopened.close()
        }
    }

    /// What is made signed out belongs to no account: signing in sends it to the account, as opening the
    /// directory with that account does. What the sign-out wiped stays wiped.
    @Test(arguments: [false, true])
    func signingInFromSignedOutSendsWhatWasMadeSignedOut(wasSignedIn: Bool) async throws {
        try await SyncHarness.run { harness in
            let bobsCloud = InMemoryCloud()
            let a: SyncContext
            if wasSignedIn {
                a = try await harness.device("A", account: "alice")
                try await a.readingList.add("alice-1")
                await a.waitUntilIdle()
                try await a.accountDidChange(to: nil)
                #expect(await a.readingList.entries().isEmpty, "signing out wipes Alice's data")
            } else {
                a = try await SyncContext.open(
                    directory: harness.directory.appendingPathComponent("A"), account: nil,
                    configuration: harness.configuration())
            }
            try await a.readingList.add("signed-out")
            let events = a.events()
            try await a.accountDidChange(to: CloudAccount(id: "bob", transport: bobsCloud))
            #expect(await a.readingList.entries().map(\.articleID) == ["signed-out"])
            #expect(try await a.syncNow().isComplete)
            #expect(Set(await bobsCloud.records(in: .readingList).map(\.id.name)) == ["rl-signed-out"])
            #expect(try SyncContext.accountID(storedIn: harness.directory.appendingPathComponent("A")) == "bob")
            try await a.close()
            #expect(await collect(events).contains(.accountChanged(from: nil, to: "bob")))
        }
    }

    @Test func aNotificationStormDuringAFetchCausesOneMoreFetch() async throws {
        try await SyncHarness.run { harness in
            let fetchStarted = Gate()
            let release = Gate()
            let holding = HoldState()
            let transport = InterceptingTransport(harness.cloud) { kind, _ in
                guard kind == .fetchZoneChanges, holding.takeFirst() else { return }
                fetchStarted.open()
                await release.wait()
            }
            let a = try await harness.device("A", transport: transport)
            holding.arm()
            let before = transport.count(.fetchZoneChanges)
            await a.handleRemoteNotification(zones: [.readingList])
            await fetchStarted.wait()
            for _ in 0..<50 { await a.handleRemoteNotification(zones: [.readingList, .readingHistory]) }
            release.open()
            await a.waitUntilIdle()
            // The held fetch (one zone), then exactly one more fetch (both zones).
            #expect(transport.count(.fetchZoneChanges) - before == 3)
            try await a.close()
        }
    }

    @Test func historyChangesWaitForTheDebounceAndEachChangePushesItBack() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h1")
            harness.clock.advance(by: .milliseconds(4_900))
            await a.waitUntilIdle()
            try await a.history.visit("h2")
            harness.clock.advance(by: .milliseconds(4_900))
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == 0)
            harness.clock.advance(by: .milliseconds(100))
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == 1, "one request for both visits")
            #expect(await harness.cloud.records(in: .readingHistory).count == 2)
            try await a.close()
        }
    }

    @Test func readingListChangesAreSentAtOnce() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == 1)
            try await a.close()
        }
    }

    @Test func tenThousandMutationsOnAHundredArticlesSendAHundredRecordsInOneRequest() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            for round in 0..<100 {
                _ = try await a.history.apply(
                    (0..<100).map { .visit(articleID: "article-\($0)", version: Int64(round)) })
            }
            let summary = try await a.syncNow()
            #expect(summary.sent == 100)
            #expect(await harness.cloud.counters().modifyRequests == 1)
            #expect(await harness.cloud.counters().recordsSaved == 100)
            try await a.close()
        }
    }

    @Test func batchesHoldAtMostTheBatchSize() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.readingList.apply((0..<250).map { .add(articleID: "a\($0)") })
            await a.waitUntilIdle()
            #expect(await harness.cloud.counters().modifyRequests == 3)
            #expect(await harness.cloud.records(in: .readingList).count == 250)
            try await a.close()
        }
    }

    @Test func aSyncReportsItsWorkAsEventsInOrder() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            var events = b.events().makeAsyncIterator()
            _ = try await b.syncNow()
            #expect(await events.next() == .willFetch(zone: .readingList))
            #expect(await events.next() == .didFetch(zone: .readingList, changed: 1, deleted: 0))
            try await a.close()
            try await b.close()
        }
    }
}

/// Counts requests from the moment it is armed.
final class ArmedCounter: Sendable {
    private let start = Mutex<Int?>(nil)
    func arm(at count: Int) { start.withLock { $0 = count } }
    func isSecondAfterArming(_ number: Int) -> Bool { start.withLock { $0.map { number == $0 + 2 } ?? false } }
}

/// Holds only the first request after `arm()`.
final class HoldState: Sendable {
    private let state = Mutex<(armed: Bool, taken: Bool)>((false, false))
    func arm() { state.withLock { $0.armed = true } }
    func takeFirst() -> Bool {
        state.withLock { state in
            guard state.armed, !state.taken else { return false }
            state.taken = true
            return true
        }
    }
}

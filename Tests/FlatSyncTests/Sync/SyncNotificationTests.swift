import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// What the engine does with a push (an APNs `userInfo`, a source's ``CloudNotification``), and how it
/// makes sure pushes come at all: one zone subscription per zone, made once from `start()`.
@Suite struct SyncNotificationTests {
    static func userInfo(_ text: String) -> [AnyHashable: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    static func zonePush(_ zone: ZoneID) -> [AnyHashable: Any] {
        userInfo(
            #"{"aps":{"content-available":1},"ck":{"ce":2,"cid":"iCloud.x","nid":"n","ckuserid":"_u","fet":{"zid":"\#(zone.name)","zoid":"_u","dbs":2,"sid":"flatsync-\#(zone.name)"}}}"#
        )
    }

    // MARK: - Notifications

    /// A subscription that failed at start (the network dropped just then) is made when the network comes
    /// back, with no second start(): a host that saw start() succeed does not call it again.
    @Test func subscriptionsThatFailedAtStartAreMadeWhenTheNetworkIsBack() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A", start: false)
            await harness.cloud.setFaultPlan(.failNext(1, .modifySubscriptions, with: .networkUnavailable))
            try await a.start()
            await a.waitUntilIdle()
            #expect(await harness.cloud.subscriptions().isEmpty)
            await harness.cloud.setFaultPlan(.none)
            await a.networkDidBecomeAvailable()
            await a.waitUntilIdle()
            #expect(Set(await harness.cloud.subscriptions().map(\.zone)) == Set(ZoneID.builtIn))
            try await a.close()
        }
    }

    @Test func aPushHandlersZoneNotificationFetchesThatZoneAndIdleWaitsForIt() async throws {
        try await SyncHarness.run { harness in
            let transport = InterceptingTransport(harness.cloud) { _, _ in }
            let a = try await harness.device("A")
            let b = try await harness.device("B", transport: transport)
            try await a.readingList.add("pushed")
            await a.waitUntilIdle()
            let (zones, database) = (transport.count(.fetchZoneChanges), transport.count(.fetchDatabaseChanges))
            b.handleRemoteNotification(userInfo: Self.zonePush(.readingList))  // synchronous: nonisolated
            await b.waitUntilIdle()
            #expect(await b.readingList.entry("pushed") != nil)
            #expect(transport.count(.fetchZoneChanges) == zones + 1, "the zone the push named")
            #expect(transport.count(.fetchDatabaseChanges) == database, "not the whole database")
            try await a.close()
            try await b.close()
        }
    }

    @Test(arguments: [
        #"{"ck":{"nid":"n","met":{"dbs":2,"sid":"db"}}}"#, "{}", #"{"ck":{"fet":{"sid":"s"}}}"#,
        #"{"aps":{"content-available":1}}"#,
    ])
    func aDatabaseNotificationOrOneThatCannotBeReadFetchesTheWholeDatabase(frame: String) async throws {
        try await SyncHarness.run { harness in
            let transport = InterceptingTransport(harness.cloud) { _, _ in }
            let a = try await harness.device("A")
            let b = try await harness.device("B", transport: transport)
            try await a.history.visit("seen")
            _ = try await a.syncNow()
            let database = transport.count(.fetchDatabaseChanges)
            b.handleRemoteNotification(userInfo: Self.userInfo(frame))
            await b.waitUntilIdle()
            #expect(transport.count(.fetchDatabaseChanges) == database + 1)
            #expect(await b.history.item("seen") != nil)
            try await a.close()
            try await b.close()
        }
    }

    @Test func aSourcesNotificationsAreHandledByWhatTheyAskFor() async throws {
        try await SyncHarness.run { harness in
            let transport = InterceptingTransport(harness.cloud) { _, _ in }
            let b = try await harness.device("B", transport: transport)
            let (zones, database) = (transport.count(.fetchZoneChanges), transport.count(.fetchDatabaseChanges))
            await b.handleRemoteNotification(CloudNotification(fetch: .zones([ZoneID("_defaultZone")]), reason: .query))
            await b.waitUntilIdle()
            #expect(transport.count(.fetchZoneChanges) == zones, "a zone FlatSync does not use fetches nothing")
            await b.handleRemoteNotification(.wholeDatabase())
            await b.waitUntilIdle()
            #expect(transport.count(.fetchDatabaseChanges) == database + 1)
            try await b.close()
        }
    }

    // MARK: - Subscriptions

    @Test func startSubscribesToBothZonesOnceAndRemembersItAcrossRestarts() async throws {
        try await SyncHarness.run { harness in
            let transport = InterceptingTransport(harness.cloud) { _, _ in }
            let a = try await harness.device("A", transport: transport)
            #expect(transport.count(.modifySubscriptions) == 1)
            #expect(
                await harness.cloud.subscriptions().map(\.id) == ["flatsync-ReadingHistory", "flatsync-ReadingList"])
            #expect(await a.localStore.deviceFile.subscribedZones == ["ReadingList", "ReadingHistory"])
            try await a.start()
            await a.waitUntilIdle()
            try await a.close()
            let reopened = try await harness.device("A", transport: transport)
            #expect(transport.count(.modifySubscriptions) == 1, "remembered in device.plist")
            try await reopened.close()
        }
    }

    @Test func aSecondDeviceFindsTheSubscriptionsAndDoesNotFail() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B", start: false)
            let events = b.events()
            try await b.start()
            await b.waitUntilIdle()
            #expect(await b.localStore.deviceFile.subscribedZones == ["ReadingList", "ReadingHistory"])
            #expect(await harness.cloud.subscriptions().count == 2, "one per zone for the account, not per device")
            try await a.close()
            try await b.close()
            #expect(!(await collect(events)).contains { if case .error = $0 { return true } else { return false } })
        }
    }

    @Test func aFailedSubscriptionNeitherFailsStartNorRetriesUntilTheNextStart() async throws {
        try await SyncHarness.run { harness in
            await harness.cloud.setFaultPlan(.failNext(1, .modifySubscriptions, with: .serviceUnavailable))
            let a = try await harness.device("A", start: false)
            let events = a.events()
            try await a.start()
            await a.waitUntilIdle()
            #expect(await harness.cloud.subscriptions().isEmpty)
            #expect(await a.localStore.deviceFile.subscribedZones == nil)
            try await a.readingList.add("still-syncs")
            await a.waitUntilIdle()
            #expect(await harness.cloud.records(in: .readingList).count == 1)
            harness.clock.advance(by: .seconds(3_600))
            await a.waitUntilIdle()
            #expect(await harness.cloud.subscriptions().isEmpty, "no retry loop")
            try await a.start()
            await a.waitUntilIdle()
            #expect(await harness.cloud.subscriptions().count == 2, "the next start tries again")
            try await a.close()
            let errors = await collect(events).compactMap { event -> SyncProblem? in
                if case .error(let error) = event { return error } else { return nil }
            }
            #expect(errors.count == 1)
            #expect(errors.first?.message.hasPrefix("subscribing to changes in ReadingList, ReadingHistory") == true)
        }
    }

    @Test func aZoneCreatedAnewIsSubscribedAgain() async throws {
        // Test clouds drop a zone's subscriptions with the zone (assumed: CloudKit documents neither way).
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            try await harness.cloud.deleteZoneAsUser(.readingList)
            #expect(await harness.cloud.subscriptions().map(\.zone) == [.readingHistory])
            _ = try await a.syncNow()  // learns of the deletion and wipes the zone
            try await a.readingList.add("y")  // creates the zone again
            await a.waitUntilIdle()
            #expect(await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-y"])
            #expect(await harness.cloud.subscriptions().map(\.zone).sorted() == [.readingHistory, .readingList])
            try await a.close()
        }
    }

    @Test func signingOutLeavesTheAccountsSubscriptions() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.accountDidChange(to: nil)
            try await a.close()
            #expect(await harness.cloud.subscriptions().count == 2, "the engine never deletes a subscription")
        }
    }
}

import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// The pause for want of an account holds every path to the server (a review found three open).
@Suite struct AccountPauseTests {
    private func serverNames(_ cloud: InMemoryCloud, _ zone: ZoneID = .readingList) async -> Set<String> {
        Set(await cloud.records(in: zone).map(\.id.name))
    }

    /// `start()` that meets notAuthenticated while preparing the zones pauses as a send would: the host may
    /// sign the user in again as another Apple ID on the same transport, so calling `start()` again sends
    /// nothing until the host names the account. (It used to throw and leave no pause, and the next
    /// `start()` sent this account's changes to whoever had signed in.)
    @Test func aStartThatMeetsNotAuthenticatedWaitsForTheAccountToo() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            let a = try await harness.device("A", start: false)
            try await a.readingList.add("x")
            await harness.cloud.setFaultPlan(.failNext(1, .listZones, with: .notAuthenticated))
            let error = await #expect(throws: CloudError.self) { try await a.start() }
            #expect(error?.code == .notAuthenticated)
            #expect(await a.status().paused == .notAuthenticated, "the 401 is a pause like any other")

            // The transport is signed in again, as someone: nothing goes until the host names them.
            let before = await harness.cloud.counters().requests
            _ = try? await a.start()
            await a.waitUntilIdle()
            let after = await harness.cloud.counters()
            #expect(after.requests == before, "no request before accountDidChange(to:): \(after.requestsByKind)")
            #expect(await serverNames(harness.cloud).isEmpty, "this account's change reached the signed-in database")
            try await a.close()
        }
    }

    /// Paused for want of an account, neither `networkDidBecomeAvailable()` nor `start()` called again
    /// subscribes the zones through the transport, which may be signed in as another user by then (the
    /// subscriptions would be made in that user's database, and this account's zones marked subscribed).
    @Test func aPauseForWantOfAnAccountSubscribesNothing() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            let cloud = harness.cloud
            let a = try await harness.device("A", start: false)
            // Offline at start: the subscriptions fail, to be made when the network returns.
            await cloud.setFaultPlan(.failNext(1, .modifySubscriptions, with: .networkUnavailable))
            try await a.start()
            await a.waitUntilIdle()
            await cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .notAuthenticated))
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            #expect(await a.status().paused == .notAuthenticated)

            let before = await cloud.counters().requests
            await a.networkDidBecomeAvailable()
            await a.waitUntilIdle()
            let afterNetwork = await cloud.counters()
            #expect(
                afterNetwork.requests == before,
                "networkDidBecomeAvailable() reached the server: \(afterNetwork.requestsByKind)")
            try await a.start()
            await a.waitUntilIdle()
            #expect(await cloud.counters().requests == before, "start() reached the server")
            try await a.close()
        }
    }

    /// Paused for a full quota, a fetch (which a quota pause does not stop) meets notAuthenticated: the pause
    /// becomes one for want of an account, which only the host can end, and a second `paused` event says
    /// so, so a host that follows the events shows the sign-in page.
    @Test func aPauseForWantOfAnAccountAfterAQuotaPauseIsAnnounced() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            let cloud = harness.cloud
            let a = try await harness.device("A")
            let events = a.events()
            await cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .quotaExceeded))
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            #expect(await a.status().paused == .quotaExceeded)
            await cloud.setFaultPlan(.failNext(1, .fetchZoneChanges, with: .notAuthenticated))
            await a.handleRemoteNotification(zones: [.readingList])
            await a.waitUntilIdle()
            #expect(await a.status().paused == .notAuthenticated)
            try await a.close()
            let pauses = await collect(events).filter {
                if case .paused = $0 { return true } else { return false }
            }
            #expect(pauses == [.paused(reason: .quotaExceeded), .paused(reason: .notAuthenticated)])
        }
    }
}

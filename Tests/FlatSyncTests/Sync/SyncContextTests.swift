import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct SyncContextTests {
    @Test func theAccountADirectoryHoldsIsWhatToOpenWithOffline() async throws {
        try await SyncHarness.run { harness in
            let directory = harness.directory.appendingPathComponent("A")
            #expect(try SyncContext.accountID(storedIn: directory) == nil, "never opened")
            let a = try await harness.device("A", account: "alice")
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            await harness.cloud.setFaultPlan(.failNext(1_000, with: .networkUnavailable))
            try await a.readingList.add("unsent")
            try await a.close()
            // Launched without a network: the server cannot say who is signed in.
            let stored = try SyncContext.accountID(storedIn: directory)
            #expect(stored == "alice")
            let again = try await harness.device("A", account: try #require(stored))
            #expect(Set(await again.readingList.entries().map(\.articleID)) == ["x", "unsent"])
            #expect(await again.localStore.pendingRecordCount() == 1, "nothing wiped, the unsent change kept")
            try await again.close()

            try Data("not a property list".utf8).write(to: directory.appendingPathComponent("device.plist"))
            #expect(try SyncContext.accountID(storedIn: directory) == nil, "a damaged file holds no account")
        }
    }

    @Test func startingOfflineStartsAllTheSameAndSyncsOnceTheNetworkIsBack() async throws {
        try await SyncHarness.run { harness in
            // A first launch without a network: the zones cannot even be listed.
            await harness.cloud.setFaultPlan(.failNext(1_000, with: .networkUnavailable))
            let a = try await harness.device("A", start: false)
            try await a.readingList.add("x")
            try await a.start()
            await a.waitUntilIdle()
            #expect(await a.localStore.pendingRecordCount() == 1)
            #expect(await harness.cloud.records(in: .readingList).isEmpty)
            await harness.cloud.setFaultPlan(.none)
            await a.networkDidBecomeAvailable()
            await a.waitUntilIdle()
            #expect(await a.localStore.pendingRecordCount() == 0, "sent without another start()")
            #expect(await harness.cloud.records(in: .readingList).map(\.id.name) == ["rl-x"])
            try await a.close()
        }
    }

    @Test func startingThrowsWhatWaitingWillNotFix() async throws {
        try await SyncHarness.run { harness in
            await harness.cloud.setFaultPlan(.failNext(1, .listZones, with: .notAuthenticated))
            let a = try await harness.device("A", start: false)
            let error = await #expect(throws: CloudError.self) { try await a.start() }
            #expect(error?.code == .notAuthenticated)
            // Signed in again: the host names the account first, as after any pause for want of one.
            try await a.accountDidChange(to: CloudAccount(id: "user", transport: harness.transport("A")))
            try await a.start()
            try await a.close()
        }
    }

    @Test func aSaveOnOneDeviceReachesTheOther() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            try await a.readingList.add("article-1", title: "Tides")
            await a.waitUntilIdle()
            #expect(await harness.cloud.records(in: .readingList).count == 1)
            let summary = try await b.syncNow()
            #expect(summary.fetched == 1)
            #expect(await b.readingList.entry("article-1")?.title == "Tides")
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }
}

@Suite struct SyncSummaryTests {
    @Test func nothingIsSentBeforeStartAndSyncNowCountsTheWorkItWaitedBehind() async throws {
        try await SyncHarness.run { harness in
            let hold = FirstSendHold()
            let transport = InterceptingTransport(harness.cloud) { await hold.pass($0, $1) }
            let a = try await harness.device("A", transport: transport, start: false)
            try await a.readingList.apply([.add(articleID: "x"), .add(articleID: "y")])
            await a.waitUntilIdle()
            #expect(transport.count(.modifyRecords) == 0, "not started: the changes wait")
            try await a.start()  // queues a send (held on the wire) and a fetch
            await hold.reached.wait()
            // The held send finishes only once syncNow counts: it must be in the summary.
            let result = try await a.syncNow(whenCounting: { hold.release() })
            #expect(result.sent == 2, "the send it waited behind counts")
            #expect(result.isComplete)
            try await a.close()
        }
    }

    @Test func aDevicesOwnWritesComingBackAreNotCountedAsFetched() async throws {
        try await SyncHarness.run { harness in
            // A not started: a started device sends "x" at once, and that push could end before the summary
            // opens.
            let a = try await harness.device("A", start: false)
            let b = try await harness.device("B")
            try await a.readingList.add("x")
            try await a.history.visit("h")
            let first = try await a.syncNow()
            #expect(first.sent == 2 && first.fetched == 0)
            let second = try await b.syncNow()
            #expect(second.fetched == 2)
            try await a.close()
            try await b.close()
        }
    }
}

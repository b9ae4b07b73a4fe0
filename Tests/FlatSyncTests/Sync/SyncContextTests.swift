import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct SyncContextTests {
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
            let sendStarted = Gate()
            let release = Gate()
            let transport = InterceptingTransport(harness.cloud) { kind, number in
                guard kind == .modifyRecords, number == 1 else { return }
                sendStarted.open()
                await release.wait()
            }
            let a = try await harness.device("A", transport: transport, start: false)
            try await a.readingList.apply([.add(articleID: "x"), .add(articleID: "y")])
            await a.waitUntilIdle()
            #expect(transport.count(.modifyRecords) == 0, "not started: the changes wait")
            try await a.start()  // queues a send (held on the wire) and a fetch
            await sendStarted.wait()
            // The held send finishes only once syncNow counts: it must be in the summary.
            let result = try await a.syncNow(whenCounting: { release.open() })
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

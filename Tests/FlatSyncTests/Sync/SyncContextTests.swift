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

import FlatSync
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@Suite struct SyncEventRecorderTests {
    @Test func holdsEachStepsEventsWithTheContextOpenAndForgetsThemOnRequest() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let context = try await SyncContext.open(
                directory: directory, account: CloudAccount(id: "user", transport: cloud),
                configuration: SyncContext.Configuration(clock: TestClock()))
            let recorder = SyncEventRecorder(context)
            #expect(recorder.events.isEmpty, "a clean open keeps no events")

            try await context.readingList.add("x")
            #expect(try await context.syncNow().isComplete)
            let firstSync = recorder.events
            #expect(firstSync.contains(.willSend(zone: .readingList, saves: 1, deletes: 0)))
            #expect(firstSync.contains(.didSend(zone: .readingList, saved: 1, deleted: 0, failed: 0)))
            let sendIndex = try #require(firstSync.firstIndex(of: .willSend(zone: .readingList, saves: 1, deletes: 0)))
            let doneIndex = try #require(
                firstSync.firstIndex(of: .didSend(zone: .readingList, saved: 1, deleted: 0, failed: 0)))
            #expect(sendIndex < doneIndex, "in the order they were sent")

            recorder.removeAll()
            #expect(recorder.events.isEmpty)
            await cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .zoneBusy))
            try await context.readingList.remove("x")
            _ = try await context.syncNow()
            let retries = recorder.events.filter { if case .willRetry = $0 { true } else { false } }
            #expect(retries.count == 1, "\(recorder.events)")
            #expect(!recorder.events.contains(.willSend(zone: .readingList, saves: 1, deletes: 0)), "forgotten")
            try await context.close()
        }
    }

    @Test func startsWithTheEventsKeptFromOpening() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory)
            for i in 0..<5 { try await store.readingList.add("a\(i)") }
            try await store.close()
            let url = directory.appendingPathComponent("reading-list.plist")
            var bytes = try Data(contentsOf: url)
            bytes[bytes.count / 2] ^= 0xFF
            try bytes.write(to: url)

            let reopened = try LocalStore(directory: directory)
            let recorder = SyncEventRecorder(reopened)
            guard case .fileQuarantined(let original, _, _) = recorder.events.first else {
                Issue.record("expected the quarantine kept from opening, got \(recorder.events)")
                return
            }
            #expect(original == url.path)
            try await reopened.close()
        }
    }

    @Test func twoRecordersOfOneContextEachHoldEveryEvent() async throws {
        try await withTemporaryDirectory { directory in
            let context = try await SyncContext.open(
                directory: directory, account: CloudAccount(id: "user", transport: InMemoryCloud()))
            let first = SyncEventRecorder(context)
            let second = SyncEventRecorder(context)
            try await context.readingList.add("x")
            #expect(try await context.syncNow().isComplete)
            #expect(!first.events.isEmpty)
            #expect(first.events == second.events)
            try await context.close()
        }
    }
}

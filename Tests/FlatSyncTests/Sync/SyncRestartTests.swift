import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// What a device knows about the server survives a restart, a kill included: a delete made after the app
/// starts again must still delete, not lose to the device's own earlier write.
@Suite struct SyncRestartTests {
    /// The change tags a send learns are written to the snapshot before the log lets the commands go, so
    /// a kill right after the send keeps them.
    @Test func aKillAfterASendKeepsTheChangeTagsTheServerGave() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.readingList.add("x")
            try await a.history.visit("h")
            harness.clock.advance(by: .seconds(5))  // the history debounce: sends, and no fetch after them
            await a.waitUntilIdle()
            #expect(await a.localStore.pendingRecordCount() == 0)
            await a.abandon()

            // Checked before starting, since a fetch would bring the tags back (at the cost of a download).
            let again = try await harness.device("A", start: false)
            for id in [ReadingListEntry.recordID(for: "x"), ReadingHistoryItem.recordID(for: "h")] {
                let server = await harness.cloud.records(in: id.zone).first { $0.id == id }
                #expect(server?.changeTag != nil)
                #expect(await again.localStore.changeTag(for: id) == server?.changeTag, "\(id)")
            }
            #expect(await again.localStore.pendingRecordCount() == 0)
            #expect(await harness.cloud.counters().recordsSaved == 2, "nothing was sent twice")
            try await again.close()
        }
    }

    /// A like is committed but its response is lost, and the app quits or is killed before it resends.
    /// After the restart the user removes the item: the delete meets the like on the server, written by
    /// this very device, and must delete it rather than let it win as if another device had made it.
    @Test(arguments: [false, true])
    func aDeleteAfterARestartBeatsTheDevicesOwnLostWrite(killed: Bool) async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h")
            _ = try await a.syncNow()
            await harness.cloud.setFaultPlan(.loseResponses(1, .modifyRecords))
            try await a.history.setLiking("h", .liked)
            harness.clock.advance(by: .seconds(5))  // the history debounce: a send, and no fetch after it
            await a.waitUntilIdle()
            let committed = try await harness.cloud.records(in: .readingHistory).map(ReadingHistoryItem.init(record:))
            #expect(committed.map(\.liking) == [.liked])
            #expect(await a.localStore.pendingRecordCount() == 1, "the device cannot know the like was committed")
            if killed { await a.abandon() } else { try await a.close() }

            // The user removes the item before the app has started syncing again: the delete joins the
            // pending like, with the tag from before the like.
            let again = try await harness.device("A", start: false)
            #expect(await again.localStore.pendingRecordCount() == 1)
            try await again.history.remove("h")
            try await again.start()
            let summary = try await again.syncNow()
            #expect(summary.isComplete)
            #expect(await harness.cloud.records(in: .readingHistory).isEmpty, "the removal was lost")
            #expect(await again.history.item("h") == nil)
            try await again.close()
        }
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// `ReadingList.changes()` and `ReadingHistory.changes()`: every path that changes an entry or an item names
/// it, once per change the store takes in, and nothing else does.
@Suite struct BuiltInChangeStreamTests {
    // A missing element would leave `next()` waiting: the limit cancels the wait (it then returns nil).
    @Test(.timeLimit(.minutes(1))) func localChangesNameTheirArticlesOncePerMutation() async throws {
        try await withTemporaryDirectory { directory in
            let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
            let now = Mutex(start)
            var options = LocalStore.Options(durability: .buffered)
            options.currentDate = { now.withLock { $0 } }
            let store = try LocalStore(directory: directory, options: options)
            var list = store.readingList.changes().makeAsyncIterator()
            var history = store.history.changes().makeAsyncIterator()
            try await store.readingList.add("b")
            #expect(await list.next() == ["b"])
            #expect(try await store.readingList.add("b") == false)  // Nothing changed, nothing is named.
            try await store.readingList.apply([.add(articleID: "c"), .add(articleID: "a"), .remove(articleID: "b")])
            #expect(await list.next() == ["a", "b", "c"], "one element for the batch, sorted")

            try await store.history.visit("old")
            #expect(await history.next() == ["old"])
            now.withLock { $0 = start.addingTimeInterval(89 * 86_400) }
            try await store.history.visit("recent")
            #expect(await history.next() == ["recent"])
            now.withLock { $0 = start.addingTimeInterval(91 * 86_400) }
            #expect(await store.history.prune() == 1)
            #expect(await history.next() == ["old"], "a prune names what it removed")

            try await store.close()
            #expect(await list.next() == nil, "closing the store ends the streams")
            #expect(await history.next() == nil)
        }
    }

    @Test(.timeLimit(.minutes(1))) func changesFromTheServerAreNamedToo() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            var list = b.readingList.changes().makeAsyncIterator()
            var history = b.history.changes().makeAsyncIterator()
            let events = b.events()

            try await a.readingList.apply([.add(articleID: "x"), .add(articleID: "y")])
            try await a.history.visit("x")
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await list.next() == ["x", "y"], "a fetch")
            #expect(await history.next() == ["x"])

            try await a.readingList.remove("y")
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await list.next() == ["y"], "a remote delete")

            // A conflict: both devices visit x again; B's save meets A's version and takes in the merge.
            try await a.history.visit("x")
            #expect(try await a.syncNow().isComplete)
            try await b.history.visit("x")
            #expect(await history.next() == ["x"], "B's own visit")
            #expect(try await b.syncNow().isComplete)
            #expect(await history.next() == ["x"], "the merge")

            // A reset: the server forgot B's token and no longer has x.
            try await a.readingList.remove("x")
            #expect(try await a.syncNow().isComplete)
            await harness.cloud.expireAllChangeTokens()
            #expect(try await b.syncNow().resets.contains { $0.zone == .readingList })
            #expect(await list.next() == ["x"], "a reset's delete")

            // An account change wipes everything, and says so.
            try await b.readingList.add("z")
            #expect(await list.next() == ["z"])
            try await b.accountDidChange(to: CloudAccount(id: "other", transport: InMemoryCloud()))
            #expect(await list.next() == ["z"], "the wipe")
            #expect(await history.next() == ["x"], "the wipe")
            try await a.close()
            try await b.close()
            #expect(await list.next() == nil)
            #expect(await collect(events).contains(.conflictResolved(ReadingHistoryItem.recordID(for: "x"))))
        }
    }
}

import FlatSyncTestSupport
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// A store with a fixed clock far in the future for snapshot debouncing, so tests decide when snapshots
/// are written, and a counter for dates so every mutation gets a distinct, increasing time.
func testOptions(durability: Durability = .fsync, deviceID: String = "test-device") -> LocalStore.Options {
    let counter = DateCounter()
    return LocalStore.Options(
        durability: durability, deviceID: deviceID, currentDate: { counter.next() }, snapshotDelay: .seconds(3_600)
    )
}

final class DateCounter: Sendable {
    private let value = AtomicCounter()
    func next() -> Date { Date(timeIntervalSinceReferenceDate: 800_000_000 + Double(value.increment())) }
}

final class AtomicCounter: Sendable {
    private let storage = Mutex<Int>(0)
    func increment() -> Int {
        storage.withLock {
            $0 += 1; return $0
        }
    }
}

/// Everything a store shows, for comparing a store before and after a reopen.
struct StoreContents: Equatable {
    var entries: [ReadingListEntry]
    var items: [ReadingHistoryItem]
    var pending: [Command]

    init(_ store: LocalStore) async {
        entries = await store.readingList.entries()
        items = await store.history.items()
        pending = await store.pendingCommands()
    }
}

@Suite struct LocalStoreTests {
    /// A wipe forgets the zone's sync bookkeeping in the same write as its note, before its log entry: a
    /// process killed after the wipe, before the sync engine saved its own bookkeeping, used to leave the
    /// wiped zone counted as prepared, and a later fetch finding it missing took that for a second deletion
    /// and wiped what was changed since (found by a review).
    @Test func aWipeForgetsTheZonesSyncBookkeepingWithItsNote() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("old")
            try await store.updateDeviceFile { file in
                file.preparedZones = ["ReadingList", "ReadingHistory"]
                file.subscribedZones = ["ReadingList", "ReadingHistory"]
                file.refusalWaits = ["ReadingList": ["rl-old": 1]]
            }
            let failure = try await store.wipe(.readingList)
            #expect(failure == nil)
            await store.abandon()  // before the sync engine saves what it knows

            let reopened = try LocalStore(directory: directory, options: testOptions())
            let file = await reopened.deviceFile
            #expect(file.preparedZones == ["ReadingHistory"])
            #expect(file.subscribedZones == ["ReadingHistory"])
            #expect(file.refusalWaits?["ReadingList"] == nil)
            #expect(await reopened.readingList.entries().isEmpty)
            try await reopened.close()
        }
    }

    /// A wipe noted in `device.plist` whose log entry never landed (the process ended between the two) is
    /// finished when the store opens: the zone's data and pending changes, all from before the wipe, go,
    /// with its sync bookkeeping. A change made after that survives the next open: the wipe is not done
    /// twice.
    @Test func aNotedWipeTheLogDoesNotHoldIsFinishedWhenTheStoreOpens() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("old")
            try await store.history.visit("kept")
            try await store.checkMutable()
            let sequence = await store.takeSequence()
            try await store.updateDeviceFile { file in
                file.preparedZones = ["ReadingList", "ReadingHistory"]
                file.subscribedZones = ["ReadingList"]
                file.requestRefusalWaits = ["ReadingList": 2]
                file.noteWipe(of: .readingList, sequence: sequence)
            }
            await store.abandon()  // the process ends before the wipe

            let reopened = try LocalStore(directory: directory, options: testOptions())
            let events = reopened.events()
            #expect(await reopened.readingList.entries().isEmpty)
            #expect(await reopened.pendingCommands().map(\.zone) == [.readingHistory])
            #expect(await reopened.history.items().map(\.articleID) == ["kept"])
            let file = await reopened.deviceFile
            #expect(file.preparedZones == ["ReadingHistory"])
            #expect(file.subscribedZones == [])
            #expect(file.requestRefusalWaits?["ReadingList"] == nil)
            #expect(file.zonesWipedSinceToken == ["ReadingList"], "kept until a token is saved past the deletion")
            try await reopened.readingList.add("new")
            await reopened.abandon()
            #expect(await collect(events) == [.zoneReset(zone: .readingList, reason: .deletedByUser)])

            let third = try LocalStore(directory: directory, options: testOptions())
            #expect(await third.readingList.entries().map(\.articleID) == ["new"])
            try await third.close()
        }
    }

    @Test func roundTripsThroughItsPlistFiles() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("a1", title: "Tides")
            try await store.readingList.add("a2")
            try await store.history.visit("a1", version: 3)
            try await store.history.setLiking("a2", .liked)
            let before = await StoreContents(store)
            try await store.close()
            for name in [
                "reading-list.plist", "reading-history.plist", "device.plist", "device-id.plist", "commands.log",
                "lock",
            ] {
                #expect(permissions(of: directory.appendingPathComponent(name)) == 0o600, "\(name)")
            }
            let snapshot = try Data(contentsOf: directory.appendingPathComponent("reading-list.plist"))
            #expect(snapshot.prefix(8) == Data("bplist00".utf8))
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(await StoreContents(reopened) == before)
            #expect(reopened.deviceID == "test-device")
            try await reopened.close()
        }
    }

    @Test(arguments: Durability.allCases)
    func everyKindOfMutationSurvivesAnAbandonedProcess(durability: Durability) async throws {
        let mutations: [(String, (LocalStore) async throws -> Void)] = [
            ("add", { try await $0.readingList.add("new", title: "T") }),
            ("remove", { try await $0.readingList.remove("kept") }),
            ("visit", { try await $0.history.visit("h", version: 9) }),
            ("markSeen", { try await $0.history.markSeen("seen-only", version: 2) }),
            ("markRead", { try await $0.history.markRead("h") }),
            ("like", { try await $0.history.setLiking("h", .liked) }),
            ("dislike", { try await $0.history.setLiking("h", .disliked) }),
            ("unlike", { try await $0.history.setLiking("liked", .none) }),
            ("offensive", { try await $0.history.markOffensive("h") }),
            ("consumed", { try await $0.history.markConsumed("h") }),
            ("disablePruning", { try await $0.history.disablePruning("h") }),
            ("removeHistory", { try await $0.history.remove("liked") }),
            ("clear", { try await $0.history.clear() }),
            (
                "batch",
                {
                    _ = try await $0.readingList.apply([
                        .add(articleID: "b1"), .add(articleID: "b2"), .remove(articleID: "b1"),
                    ])
                }
            ),
        ]
        for (name, mutation) in mutations {
            try await withTemporaryDirectory { directory in
                let store = try LocalStore(directory: directory, options: testOptions(durability: durability))
                try await store.readingList.add("kept")
                try await store.history.visit("liked")
                try await store.history.setLiking("liked", .liked)
                try await store.persistSnapshot(of: .readingList)
                try await store.persistSnapshot(of: .readingHistory)
                try await mutation(store)
                let before = await StoreContents(store)
                await store.abandon()
                let reopened = try LocalStore(directory: directory, options: testOptions(durability: durability))
                #expect(await StoreContents(reopened) == before, "\(name), \(durability)")
                try await reopened.close()
            }
        }
    }

    @Test func invalidInputThrowsATypedErrorAndChangesNothingOnDisk() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("a")
            let before = try Self.filesAndContents(directory)
            await expectError(.invalidArticleID) { try await store.readingList.add("") }
            await expectError(.invalidArticleID) { try await store.readingList.add(String(repeating: "x", count: 257)) }
            await expectError(.invalidArticleID) { try await store.history.visit("bad\u{7}") }
            await expectError(.invalidArgument) { try await store.history.visit("ok", version: -2) }
            // A batch with one bad change writes none of them.
            await expectError(.invalidArticleID) {
                try await store.readingList.apply([.add(articleID: "fine"), .add(articleID: "tab\t")])
            }
            #expect(try Self.filesAndContents(directory) == before)
            #expect(await store.readingList.contains("fine") == false)
            #expect(await store.pendingRecordCount() == 1)
            try await store.close()
        }
    }

    @Test func mutationsSayWhetherTheyChangedAnything() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            #expect(try await store.readingList.add("a"))
            #expect(try await !store.readingList.add("a"), "already saved")
            #expect(try await store.history.markRead("h"))
            #expect(try await !store.history.markRead("h"), "already read")
            #expect(try await store.history.setLiking("h", .liked))
            #expect(try await !store.history.setLiking("h", .liked))
            #expect(try await store.history.visit("h"), "a visit always counts")
            #expect(try await store.history.clear() == 1)
            #expect(try await !store.history.remove("h"), "already gone")
            #expect(await store.pendingRecordCount() == 2)
            try await store.close()
        }
    }

    @Test func aSecondOpenerGetsStoreLocked() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            expectError(.storeLocked) { try LocalStore(directory: directory, options: testOptions()) }
            try await store.close()
            let again = try LocalStore(directory: directory, options: testOptions())
            try await again.close()
            await expectError(.storeClosed) { try await store.readingList.add("late") }
        }
    }

    @Test func aDamagedSnapshotIsQuarantinedAndTheLoggedDataComesBack() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            for i in 0..<20 { try await store.readingList.add("a\(i)") }
            let before = await StoreContents(store)
            try await store.close()
            let url = directory.appendingPathComponent("reading-list.plist")
            var bytes = try Data(contentsOf: url)
            bytes[bytes.count / 2] ^= 0xFF
            try bytes.write(to: url)

            let reopened = try LocalStore(directory: directory, options: testOptions())
            guard case .fileQuarantined(let original, let movedTo, _) = reopened.eventHub.keptEvents.first else {
                Issue.record("expected a quarantine event")
                return
            }
            #expect(original == url.path)
            #expect(try Data(contentsOf: URL(fileURLWithPath: movedTo)) == bytes, "the damaged file is kept as it was")
            // Nothing was sent yet, so every mutation is still in the log and the list comes back whole.
            #expect(await StoreContents(reopened) == before)
            #expect(await reopened.zones.readingList.changeToken == nil)
            // The event also reaches subscribers that come later.
            var events = reopened.events().makeAsyncIterator()
            #expect(await events.next() == reopened.eventHub.keptEvents.first)
            try await reopened.close()
        }
    }

    @Test func aDamagedLogKeepsTheCommandsBeforeTheDamage() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("first")
            let logURL = directory.appendingPathComponent("commands.log")
            let sizeAfterFirst = store.logByteCount
            try await store.readingList.add("second")
            try await store.readingList.add("third")
            await store.abandon()
            var bytes = try Data(contentsOf: logURL)
            bytes[sizeAfterFirst + 20] ^= 0x01  // inside the second entry
            try bytes.write(to: logURL)

            let reopened = try LocalStore(directory: directory, options: testOptions())
            guard case .fileQuarantined = reopened.eventHub.keptEvents.first else {
                Issue.record("expected a quarantine event")
                return
            }
            #expect(await reopened.readingList.entries().map(\.articleID) == ["first"])
            #expect(try fileNames(in: directory).contains { $0.hasPrefix("commands.log.corrupt-") })
            try await reopened.readingList.add("after")
            try await reopened.close()
            let again = try LocalStore(directory: directory, options: testOptions())
            #expect(Set(await again.readingList.entries().map(\.articleID)) == ["first", "after"])
            try await again.close()
        }
    }

    @Test func manyMutationsOnFewArticlesLeaveOneChangePerArticle() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions(durability: .buffered))
            for round in 0..<20 {
                _ = try await store.history.apply((0..<100).map { .visit(articleID: "a\($0)", version: Int64(round)) })
            }
            #expect(await store.pendingRecordCount() == 100)
            #expect(await store.pendingCommands().count == 1)
            try await store.close()
        }
    }

    @Test func compactionKeepsTheQueueAndEverythingNoSnapshotHolds() async throws {
        try await withTemporaryDirectory { directory in
            var options = testOptions()
            options.compactionMinimumBytes = 1
            let store = try LocalStore(directory: directory, options: options)
            for i in 0..<30 { try await store.readingList.add("a\(i % 10)") }
            for i in 0..<10 { try await store.readingList.remove("a\(i)") }
            try await store.history.visit("h1")
            try await store.history.visit("h2")
            // Send a round: h1 is acknowledged, h2 stays sealed; no snapshot holds either.
            let round = try await store.sealPendingCommands(in: .readingHistory)
            try await store.acknowledge([ReadingHistoryItem.recordID(for: "h1")], in: round[0].id)
            try await store.history.visit("h3")
            let before = await StoreContents(store)
            let sizeBefore = store.logByteCount
            try await store.compact()
            #expect(store.logByteCount < sizeBefore)
            await store.abandon()
            let reopened = try LocalStore(directory: directory, options: options)
            #expect(await StoreContents(reopened) == before)
            #expect(await reopened.history.item("h1") != nil, "acknowledged, in no snapshot, kept by compaction")
            try await reopened.close()
        }
    }

    @Test func aQueueAcknowledgedAndSnapshottedIsCompactedAway() async throws {
        try await withTemporaryDirectory { directory in
            var options = testOptions()
            options.compactionMinimumBytes = 1
            let store = try LocalStore(directory: directory, options: options)
            // One large batch, then more batches: every change is live, so nothing is compacted.
            for batch in 0..<4 {
                try await store.history.apply((0..<200).map { .visit(articleID: "a\(batch)-\($0)") })
            }
            let allPending = store.logByteCount
            // A send round acknowledges everything; the changes stay live until a snapshot holds them.
            let round = try await store.sealPendingCommands(in: .readingHistory)
            for command in round { try await store.acknowledge(Array(command.changes.keys), in: command.id) }
            try await store.unsealPendingCommands(in: .readingHistory)
            #expect(store.logByteCount > allPending)
            // Once the snapshot holds them, the log is dead weight and is rewritten to almost nothing.
            try await store.persistSnapshot(of: .readingHistory)
            #expect(store.logByteCount < allPending / 10)
            let before = await StoreContents(store)
            await store.abandon()
            let reopened = try LocalStore(directory: directory, options: options)
            #expect(await StoreContents(reopened) == before)
            #expect(await reopened.history.count() == 800)
            try await reopened.close()
        }
    }

    /// An app the system kills never closes its store: a log of few bytes but many sent changes is
    /// compacted once a snapshot holds them, so that the next open does not replay them all.
    @Test func sentChangesInASnapshotAreCompactedAwayWithoutAClose() async throws {
        for (visits, compacted) in [(600, true), (400, false)] {
            try await withTemporaryDirectory { directory in
                let store = try LocalStore(directory: directory, options: testOptions())
                for batch in 0..<(visits / 100) {
                    try await store.history.apply((0..<100).map { .visit(articleID: "a\(batch)-\($0)") })
                }
                let round = try await store.sealPendingCommands(in: .readingHistory)
                for command in round { try await store.acknowledge(Array(command.changes.keys), in: command.id) }
                try await store.unsealPendingCommands(in: .readingHistory)
                let sent = store.logByteCount
                #expect(sent < 256 << 10, "below the byte bound")
                try await store.persistSnapshot(of: .readingHistory)
                if compacted {
                    #expect(store.logByteCount < sent / 10, "\(visits) sent changes are rewritten away")
                } else {
                    #expect(store.logByteCount == sent, "\(visits) sent changes are not worth a rewrite")
                }
                let before = await StoreContents(store)
                await store.abandon()
                let reopened = try LocalStore(directory: directory, options: testOptions())
                #expect(await StoreContents(reopened) == before)
                #expect(await reopened.history.count() == visits)
                try await reopened.close()
            }
        }
    }

    /// The number of entries in a closed store's log.
    private func logEntries(in directory: URL) throws -> Int {
        let url = directory.appendingPathComponent("commands.log")
        let (log, recovery) = try AppendLog.open(at: url, durability: .fsync)
        log.close()
        return recovery.payloads.count
    }

    @Test func closingRewritesALogOfManySmallEntriesAsOneEntryPerCommand() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            for i in 0..<100 { try await store.history.visit("a\(i)") }
            try await store.readingList.add("saved")
            // A round out when the store closes: its command is restored as sealed, then unsealed on open.
            _ = try await store.sealPendingCommands(in: .readingList)
            let before = await StoreContents(store)
            try await store.close()
            // The counters, and one entry per command (and the seal).
            #expect(try logEntries(in: directory) <= 4)
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(await StoreContents(reopened) == before)
            #expect(await reopened.pendingRecordCount() == 101)
            try await reopened.close()
        }
    }

    @Test func closingRewritesALogOfFewEntriesHoldingManySentChanges() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            // One entry of 1,000 changes (under 256 KiB), sent and acknowledged: the snapshot close writes holds
            // them, so the log is compacted then.
            try await store.history.apply((0..<1_000).map { .visit(articleID: "a\($0)") })
            let round = try await store.sealPendingCommands(in: .readingHistory)
            for command in round { try await store.acknowledge(Array(command.changes.keys), in: command.id) }
            try await store.unsealPendingCommands(in: .readingHistory)
            try await store.history.visit("pending")
            let before = await StoreContents(store)
            try await store.close()
            // The counters and the one pending visit: the snapshot holds the 1,000, so reopening replays none.
            #expect(try logEntries(in: directory) <= 2)
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(await StoreContents(reopened) == before)
            #expect(await reopened.history.count() == 1_001)
            #expect(await reopened.pendingRecordCount() == 1)
            try await reopened.close()
        }
    }

    @Test func closingLeavesALogOfFewEntriesAsItIs() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            for i in 0..<10 { try await store.history.visit("a\(i)") }
            let logURL = directory.appendingPathComponent("commands.log")
            // Its entries: while open the file also holds the space reserved after them.
            let bytes = try Data(contentsOf: logURL).prefix(store.logByteCount)
            try await store.close()
            #expect(try Data(contentsOf: logURL) == bytes, "ten entries are not worth a rewrite at close")
            #expect(try logEntries(in: directory) == 10)
        }
    }

    @Test func wipingAZoneSurvivesAReopenEvenBeforeItsSnapshotIsWritten() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("gone")
            try await store.history.visit("stays")
            try await store.persistSnapshot(of: .readingList)
            let snapshotURL = directory.appendingPathComponent("reading-list.plist")
            let preWipeSnapshot = try Data(contentsOf: snapshotURL)
            let unsaved = try await store.wipe(.readingList)
            #expect(unsaved == nil)
            try await store.readingList.add("after-wipe")
            let before = await StoreContents(store)
            await store.abandon()
            // Put the pre-wipe snapshot back, as if the wipe's snapshot never reached the disk.
            try preWipeSnapshot.write(to: snapshotURL)
            let reopened = try LocalStore(directory: directory, options: testOptions())
            #expect(await StoreContents(reopened) == before)
            #expect(await reopened.readingList.entries().map(\.articleID) == ["after-wipe"])
            try await reopened.close()
        }
    }

    static func filesAndContents(_ directory: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try fileNames(in: directory) {
            result[name] = try Data(contentsOf: directory.appendingPathComponent(name))
        }
        return result
    }
}

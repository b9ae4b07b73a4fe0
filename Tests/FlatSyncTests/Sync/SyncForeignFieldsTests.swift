import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// Fields another client wrote — a native app on the same container, a newer version of this one — survive
/// this device: it keeps them with the record, and its saves send only the fields it changed, so the
/// server keeps them too. Every test runs against the in-memory cloud and through CloudKit Web Services.
@Suite struct SyncForeignFieldsTests {
    static let routes: [SyncHarness.Route] = [.direct, .http]

    /// Fields of every kind FlatSync does not use, the asset uploaded to `cloud` as another client uploads
    /// one (a save must carry the upload's receipt).
    static func foreign(_ cloud: InMemoryCloud) async -> [String: FieldValue] {
        [
            "summary": .string("A summary another app wrote"),
            "scores": .list([.int(3), .int(5)]),
            "source": .reference(RecordReference(recordName: "rl-h", action: .none)),
            "place": .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":48.85,"longitude":2.35}"#)),
            "cover": await cloud.uploadAsset(Data("cover bytes".utf8)),
        ]
    }

    /// True when `kept` is `sent` as a client reads it back: an asset is the same bytes (a read carries no
    /// receipt, and over CKWS a download link); any other value is equal.
    private func isKept(_ kept: FieldValue?, _ sent: FieldValue) -> Bool {
        if let asset = sent.assetValue { return kept?.assetValue == asset }
        return kept == sent
    }

    /// Writes the history record of `articleID` as another client would: `fields` over the server's current
    /// record (a fresh item's, when there is none), without a tag check, sending only those fields as a
    /// native client sends a record's changed keys (a fetched asset's description cannot be sent back).
    private func writeAsAnotherClient(
        _ cloud: InMemoryCloud, _ articleID: String, _ fields: [String: FieldValue]
    ) async throws {
        let id = ReadingHistoryItem.recordID(for: articleID)
        let existing = try await cloud.lookupRecords([id])[id]
        var record = existing ?? ReadingHistoryItem(articleID: articleID).record
        record.fields = existing == nil ? record.fields.merging(fields) { $1 } : fields
        record.lastModifiedBy = "native-app"
        let result = try await cloud.modifyRecords(
            saving: [RecordSave(record, policy: .changedKeys)], deleting: [], atomically: true)
        #expect(result.failed.isEmpty)
    }

    private func serverRecord(_ cloud: InMemoryCloud, _ articleID: String) async -> Record? {
        await cloud.records(in: .readingHistory).first { $0.id == ReadingHistoryItem.recordID(for: articleID) }
    }

    /// A change made while an earlier change of the same record is out, when that send then fails: the
    /// next send carries both changes' fields. It used to carry only the later change's (a save sends the
    /// keys it changed, and the later change was made with only its own), so the earlier change never
    /// reached the server, and the next fetch took it back on this device too.
    @Test(arguments: Self.routes)
    func aChangeMadeWhileAnEarlierOneIsOutGoesWithItWhenTheSendFails(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let cloud = harness.cloud
            let editAt = Mutex<Int?>(nil)
            let device = Mutex<SyncContext?>(nil)
            let transport = InterceptingTransport(harness.transport("A")) { kind, number in
                guard kind == .modifyRecords, number == editAt.withLock({ $0 }), let a = device.withLock({ $0 })
                else { return }
                _ = try? await a.history.markConsumed("h")
                await cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .networkUnavailable))
            }
            let a = try await harness.device("A", transport: transport, start: false)
            device.withLock { $0 = a }
            _ = try await a.history.visit("h", version: 1)
            #expect(try await a.syncNow().isComplete)
            #expect(try await a.history.setLiking("h", .liked))
            editAt.withLock { $0 = transport.count(.modifyRecords) + 1 }
            #expect(try await !a.syncNow().isComplete, "the send of the liking failed")
            #expect(try await a.syncNow().isComplete)
            let server = try ReadingHistoryItem(record: try #require(await serverRecord(cloud, "h")))
            #expect(server.isLiked, "the change that was out when the next was made")
            #expect(server.flags.contains(.consumed))
            let here = try #require(await a.history.item("h"))
            #expect(here.isLiked && here.flags.contains(.consumed))
            device.withLock { $0 = nil }
            try await a.close()
        }
    }

    /// Devices A and B sharing the history item "h", which B has liked since A last fetched; then A removes
    /// it and syncs, and `meanwhile` runs on A while that delete is on the wire. Returns both devices and the
    /// events A emitted from the removal on.
    private func aDeleteOutWhileAChanges(
        _ harness: SyncHarness, meanwhile: @escaping @Sendable (SyncContext) async -> Void
    ) async throws -> (a: SyncContext, b: SyncContext, events: AsyncStream<SyncEvent>) {
        let editAt = Mutex<Int?>(nil)
        let device = Mutex<SyncContext?>(nil)
        let transport = InterceptingTransport(harness.transport("A")) { kind, number in
            guard kind == .modifyRecords, number == editAt.withLock({ $0 }),
                let a = device.withLock({ $0.take() })
            else { return }
            await meanwhile(a)
        }
        let a = try await harness.device("A", transport: transport, start: false)
        device.withLock { $0 = a }
        let b = try await harness.device("B", start: false)
        _ = try await a.history.visit("h", version: 1)
        #expect(try await a.syncNow().isComplete)
        #expect(try await b.syncNow().isComplete)
        try await b.history.setLiking("h", .liked)
        #expect(try await b.syncNow().isComplete, "a version A has not seen")

        #expect(try await a.history.remove("h"))
        editAt.withLock { $0 = transport.count(.modifyRecords) + 1 }
        let events = a.events()
        _ = try await a.syncNow()
        #expect(try await a.syncNow().isComplete)
        return (a, b, events)
    }

    /// A record changed again while its delete is out, when the delete then loses to another device's newer
    /// version: the change made meanwhile is merged with that version and sent. The record used to take the
    /// server's version alone, and the change (a visit here) was lost on this device and on the server.
    /// Found by the simulation once it changed records while their sends were on the wire.
    @Test(arguments: Self.routes)
    func aChangeMadeWhileADeleteIsOutSurvivesTheDeleteLosing(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b, events) = try await aDeleteOutWhileAChanges(harness) { a in
                _ = try? await a.history.visit("h", version: 5)
            }
            let server = try ReadingHistoryItem(record: try #require(await serverRecord(harness.cloud, "h")))
            #expect(server.maxVersionSeen == 5, "the visit made while the delete was out")
            #expect(server.isLiked, "B's edit, which beat the delete")
            let here = try #require(await a.history.item("h"))
            #expect(here.maxVersionSeen == 5 && here.isLiked)
            try await a.close()
            try await b.close()
            #expect(await collect(events).contains(.conflictResolved(ReadingHistoryItem.recordID(for: "h"))))
        }
    }

    /// The same, when the record is deleted again while the first delete is out: the second delete was not
    /// made in view of the version that beat the first either, and loses to it too. It used to go out with
    /// that version's tag and delete it (found by a review).
    @Test(arguments: Self.routes)
    func aDeleteMadeWhileAnEarlierDeleteIsOutLosesToTheSameEdit(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b, _) = try await aDeleteOutWhileAChanges(harness) { a in
                _ = try? await a.history.visit("h", version: 5)
                _ = try? await a.history.remove("h")
            }
            let server = try #require(await serverRecord(harness.cloud, "h"), "B's edit beat both deletes")
            #expect(try ReadingHistoryItem(record: server).isLiked)
            #expect(await a.history.item("h")?.isLiked == true)
            try await a.close()
            try await b.close()
        }
    }

    @Test(arguments: Self.routes)
    func fieldsAnotherClientWroteAreKeptHereAndOnTheServer(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h", version: 1)
            _ = try await a.syncNow()
            let foreign = await Self.foreign(harness.cloud)
            try await writeAsAnotherClient(harness.cloud, "h", foreign)
            _ = try await a.syncNow()
            let kept = try #require(await a.history.record("h"))
            for (key, value) in foreign { #expect(isKept(kept[key], value), "\(key) is kept on the device") }

            // A's own edit goes out as an update of the fields it changed: the other client's stay.
            try await a.history.setLiking("h", .liked)
            try await a.history.visit("h", version: 4)
            let summary = try await a.syncNow()
            #expect(summary.isComplete)
            let server = try #require(await serverRecord(harness.cloud, "h"))
            for (key, value) in foreign { #expect(isKept(server[key], value), "\(key) survives A's save") }
            #expect(try ReadingHistoryItem(record: server).liking == .liked)
            #expect(try ReadingHistoryItem(record: server).maxVersionSeen == 4)
            #expect(try await DeviceView(server: harness.cloud) == DeviceView(a))
            try await a.close()

            // Through a restart the device still shows them (the snapshot keeps them).
            let reopened = try await harness.device("A", start: false)
            let again = try #require(await reopened.history.record("h"))
            for (key, value) in foreign { #expect(isKept(again[key], value), "\(key) survives a restart") }
            try await reopened.close()
        }
    }

    /// Another client saved versions that do not read here: a reading-list entry and a recipe without a field
    /// CloudKit cannot make required. This device's saves of the same records meet them as conflicts: its
    /// versions, which read, are kept and sent whole, over the other client's extra fields, so every device
    /// reads the records again. (The recipe took the server's version, and its acknowledged save was lost; the
    /// entry's item table kept the device's entry.)
    @Test(arguments: Self.routes)
    func anUnreadableVersionGivesWayToThisDevicesSave(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let cloud = harness.cloud
            let a = try await harness.device("A") { $0.recordTypes = testRecordTypes }
            let entryID = ReadingListEntry.recordID(for: "y")
            let unreadable = [
                Record(
                    id: entryID, type: ReadingListEntry.recordType,
                    fields: ["articleID": .string("y"), "title": .string("theirs"), "summary": .string("kept")]),
                Record(id: TestRecipe.recordID("r1"), type: TestRecipe.recordType, fields: ["servings": .int(6)]),
            ]
            for record in unreadable {
                let result = try await cloud.modifyRecords(
                    saving: [RecordSave(record, policy: .allKeys)], deleting: [], atomically: true)
                #expect(result.failed.isEmpty)
            }
            try await a.readingList.add("y", title: "mine")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "Soup", servings: 4))
            #expect(try await a.syncNow().isComplete)

            let entry = try #require(await cloud.lookupRecords([entryID])[entryID])
            #expect(try ReadingListEntry(record: entry).title == "mine", "the server's entry reads now")
            #expect(entry["summary"] == .string("kept"), "the other client's own field stays")
            #expect(await a.readingList.entry("y")?.title == "mine")
            #expect(
                await a.records(TestRecipe.self).value("r1").map { [$0.title, "\($0.servings)"] } == ["Soup", "4"])

            let b = try await harness.device("B") { $0.recordTypes = testRecordTypes }
            #expect(await b.readingList.entry("y")?.title == "mine")
            #expect(
                await b.records(TestRecipe.self).value("r1").map { [$0.title, "\($0.servings)"] } == ["Soup", "4"])
            #expect(await DeviceView(a) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    @Test(arguments: Self.routes)
    func aConflictWithAnotherClientsEditKeepsBothEdits(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h", version: 1)
            _ = try await a.syncNow()
            // Another client writes after A last fetched; A's edit meets it as a conflict.
            try await writeAsAnotherClient(harness.cloud, "h", ["summary": .string("fresh")])
            try await a.history.markOffensive("h")
            let summary = try await a.syncNow()
            #expect(summary.isComplete)
            let server = try #require(await serverRecord(harness.cloud, "h"))
            #expect(server["summary"] == .string("fresh"))
            #expect(try ReadingHistoryItem(record: server).flags.contains(.offensive))
            #expect(await a.history.record("h")?["summary"] == .string("fresh"))
            try await a.close()
        }
    }

    @Test(arguments: Self.routes)
    func aDeleteThenANewItemReplacesTheRecordWhole(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h", version: 1)
            try await a.history.markRead("h")
            _ = try await a.syncNow()
            let foreign = await Self.foreign(harness.cloud)
            try await writeAsAnotherClient(harness.cloud, "h", foreign)
            _ = try await a.syncNow()
            // Removed and visited again before a sync: one save that stands for the delete and the new item.
            try await a.history.remove("h")
            try await a.history.visit("h", version: 2)
            _ = try await a.syncNow()
            let server = try #require(await serverRecord(harness.cloud, "h"))
            let item = try ReadingHistoryItem(record: server)
            #expect(item.maxVersionSeen == 2)
            #expect(item.readCount == 1, "the new item's count, not the deleted one's")
            for key in foreign.keys { #expect(server[key] == nil, "\(key) went with the deleted record") }
            #expect(await a.history.record("h")?["summary"] == nil)
            #expect(try await DeviceView(server: harness.cloud) == DeviceView(a))
            try await a.close()
        }
    }

    @Test(arguments: Self.routes)
    func aDeleteAndANewItemLoseTheReplaceToAnEditTheDeleteDidNotSee(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h", version: 1)
            _ = try await a.syncNow()
            // A forgets and revisits the item; meanwhile, unseen by A, another client edits it.
            try await a.history.remove("h")
            try await a.history.visit("h", version: 2)
            try await writeAsAnotherClient(harness.cloud, "h", ["summary": .string("written while A was away")])
            let summary = try await a.syncNow()
            #expect(summary.isComplete)
            let server = try #require(await serverRecord(harness.cloud, "h"))
            #expect(server["summary"] == .string("written while A was away"), "an edit beats a delete it did not see")
            #expect(try ReadingHistoryItem(record: server).maxVersionSeen == 2)
            try await a.close()
        }
    }

    /// A save merged with a server version goes out whole: the merge may have changed fields the user did
    /// not (here the read flag, which the server's record — deleted and created again by another device —
    /// no longer holds).
    @Test(arguments: Self.routes)
    func aSaveMergedWithARecreatedRecordSendsEveryFieldItHas(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            try await b.history.visit("h", version: 1)  // read, visited once
            _ = try await b.syncNow()
            _ = try await a.syncNow()
            try await a.history.remove("h")
            _ = try await a.syncNow()
            try await b.history.setLiking("h", .disliked)  // pending on B; it has not heard of the delete
            // B's send fails; its fetch then hears of the delete, keeps the pending edit and clears the tag.
            await harness.cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .networkUnavailable))
            _ = try await b.syncNow()
            #expect(await b.localStore.changeTag(for: ReadingHistoryItem.recordID(for: "h")) == nil)
            try await a.history.setLiking("h", .liked)  // A creates the record again, without B's fields
            _ = try await a.syncNow()
            let summary = try await b.syncNow()  // B's create meets A's record: merged, and sent whole
            #expect(summary.isComplete)
            let server = try ReadingHistoryItem(record: try #require(await serverRecord(harness.cloud, "h")))
            #expect(server.isRead, "the read flag only B's older version held")
            #expect(server.readCount == 1)
            _ = try await a.syncNow()
            #expect(try await DeviceView(server: harness.cloud) == DeviceView(a))
            #expect(try await DeviceView(server: harness.cloud) == DeviceView(b))
            try await a.close()
            try await b.close()
        }
    }

    /// The same as a conflict, when a fetch meets the other client's edit first: the save that stood for a
    /// delete goes out as an update of every field, and the other client's fields stay.
    @Test(arguments: Self.routes)
    func aFetchMeetingAnEditBeforeADeleteAndANewItemAreSentKeepsTheEdit(route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A")
            try await a.history.visit("h", version: 1)
            _ = try await a.syncNow()
            try await a.history.remove("h")
            try await a.history.visit("h", version: 2)  // waits for the history debounce
            try await writeAsAnotherClient(harness.cloud, "h", ["summary": .string("written while A waited")])
            await a.handleRemoteNotification(zones: [.readingHistory])
            await a.waitUntilIdle()  // the fetch merges the pending save with the other client's version
            harness.clock.advance(by: .seconds(5))
            await a.waitUntilIdle()  // the send
            #expect(await a.localStore.pendingRecordCount() == 0)
            let server = try #require(await serverRecord(harness.cloud, "h"))
            #expect(server["summary"] == .string("written while A waited"))
            #expect(try ReadingHistoryItem(record: server).maxVersionSeen == 2)
            try await a.close()
        }
    }
}

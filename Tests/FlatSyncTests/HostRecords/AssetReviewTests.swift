import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// A review of the asset commits (f53f8b4..7e34b51) found each of these; each test failed before its fix.
@Suite struct AssetReviewTests {
    /// A card whose caption may be cleared, beside an asset.
    struct Card: SyncableRecord, Codable {
        static let zone = ZoneID("Cards")
        static let recordType = "Card"
        static let fieldTypes: [String: CloudSchema.FieldType] = ["caption": .string, "image": .asset]
        var id: String
        var caption: String?
        var image: CloudAsset?
    }

    private let bytes = Data((0..<5_000).map { UInt8($0 % 251) })

    /// Clearing another field of a record whose asset another client uploaded is a change that removes a
    /// field: `request(for:)` sends it as a `replace` with every field, the fetched asset description
    /// (no `receipt`) among them, which Types.html says a save needs. The transport asks for the asset again
    /// (`assets/rereference`) first; it used to send it as it was, and the change parked. (Leaving it out of
    /// a replace would null the asset instead.)
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func clearingAnotherFieldOfARecordWithAFetchedAssetIsNotRefused(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await harness.device("A") { $0.recordTypes = [Card.self] }
            let image = await harness.cloud.uploadAsset(bytes)
            let record = Record(
                id: Card.recordID("c1"), type: Card.recordType, fields: ["caption": .string("Tides"), "image": image])
            _ = try await harness.cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
            _ = try await a.syncNow()

            var card = try #require(await a.records(Card.self).value("c1"))
            card.caption = nil
            #expect(try await a.records(Card.self).save(card))
            _ = try await a.syncNow()

            let refused = await a.refusedChanges()
            #expect(refused.isEmpty, "clearing the caption parked the change: \(refused)")
            let server = try #require(await harness.cloud.records(in: Card.zone).first { $0.id.name == "c1" })
            #expect(server.fields["caption"] == nil)
            #expect(server.fields["image"]?.assetValue == image.assetValue, "the asset stays on the server")
            try await a.close()
        }
    }

    /// A zone no store of this run registers, whose records live only in the log (acknowledged, no snapshot
    /// yet: a kill within `snapshotDelay`), has no snapshot for the collector at open to stand down for: it
    /// now reads every zone the replay rebuilt, where it read only the registered ones and deleted the files
    /// such records name.
    @Test func aZoneNotOpenWhoseRecordsAreOnlyInTheLogKeepsItsFiles() async throws {
        try await withTemporaryDirectory { directory in
            var options = LocalStore.Options(durability: .fsync, recordTypes: [TestPhoto.self])
            options.snapshotDelay = .seconds(3_600)
            let store = try LocalStore(directory: directory, options: options)
            let image = try await store.makeAsset(TestPhoto.bytes(version: 5))
            try await store.records(TestPhoto.self).save(TestPhoto(id: "p1", caption: "v5", image: image))
            // What a push does once the server took the record (its bytes uploaded).
            for command in try await store.sealPendingCommands(in: TestPhoto.zone) {
                try await store.acknowledge(Array(command.changes.keys), in: command.id)
            }
            try await store.unsealPendingCommands(in: TestPhoto.zone)
            await store.abandon()  // killed before the snapshot
            let snapshot = directory.appendingPathComponent(LocalStore.snapshotFileName(TestPhoto.zone)).path
            #expect(!FileManager.default.fileExists(atPath: snapshot))

            // A run that does not register photos (another process on the directory, an older build).
            let without = try LocalStore(
                directory: directory, options: LocalStore.Options(durability: .fsync, recordTypes: [TestRecipe.self]))
            await without.abandon()

            let with = try LocalStore(directory: directory, options: options)
            let photo = try #require(await with.records(TestPhoto.self).value("p1"))
            let kept = try #require(photo.image)
            #expect(kept == image)
            #expect((try? with.localData(of: kept)) == TestPhoto.bytes(version: 5), "the record's file was deleted")
            try await with.close()
        }
    }

    /// MistKit saw 421 Misdirected Request, live, when one HTTP/2 connection served the API host and the
    /// asset host. With a host-supplied `http` (not `URLSessionExchange.shared`) and no `assetHTTP`, uploads
    /// go through that same exchange: a 421 is the request's failure, tried again, not the record's (it was
    /// parked as any 4xx).
    @Test func aMisdirectedUploadIsTriedAgainNotParked() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("f1")
            try Data("hello".utf8).write(to: file)
            let exchange = ScriptedExchange([
                .json(#"{"tokens":[{"recordName":"p1","fieldName":"image","url":"https://cvws.example/up/1"}]}"#),
                HTTPExchangeResponse(status: 421, body: Data("Misdirected Request".utf8)),
                .json(#"{"records":[]}"#),
            ])
            let save = RecordSave(
                Record(
                    id: RecordID(zone: ZoneID("Photos"), name: "p1"), type: "Photo",
                    fields: ["image": CloudAsset.localFieldValue(file: "f1", size: 5, path: file.path)]))
            var thrown: CloudError?
            var result: ModifyRecordsResult?
            do {
                result = try await makeTransport(exchange).modifyRecords(saving: [save], deleting: [], atomically: true)
            } catch let error as CloudError {
                thrown = error
            }
            let failure = result?.failed[save.record.id]
            #expect(
                thrown?.isTransient == true || failure?.isTransient == true,
                "421 parked the record: failed \(String(describing: failure)), thrown \(String(describing: thrown))")
        }
    }

    /// Undoing a delete before it is sent: the record comes back with the asset it held (the server still has
    /// both). The save was refused, as the stored record is gone, and the photo lost once the delete was sent.
    @Test func undoingADeleteBeforeItIsSentKeepsTheAsset() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A") { $0.recordTypes = [Card.self] }
            let image = await harness.cloud.uploadAsset(bytes)
            let record = Record(
                id: Card.recordID("c1"), type: Card.recordType, fields: ["caption": .string("Tides"), "image": image])
            _ = try await harness.cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
            _ = try await a.syncNow()
            let card = try #require(await a.records(Card.self).value("c1"))
            _ = try await a.records(Card.self).delete("c1")
            await #expect(throws: Never.self, "the undo is refused") { try await a.records(Card.self).save(card) }
            try await a.close()
        }
    }

    /// A host type may live in a built-in zone (TestNote lives in the reading list's; the DocC sample too).
    struct Clipping: SyncableRecord, Codable {
        static let zone = ZoneID.readingList
        static let recordType = "Clipping"
        static let fieldTypes: [String: CloudSchema.FieldType] = ["caption": .string, "image": .asset]
        var id: String
        var caption: String?
        var image: CloudAsset?
    }

    /// The collector at open walked only `registry.hostZones`, which leaves out the built-in zones: the files
    /// of host records kept there were named by nothing once their changes were acknowledged, and the next
    /// open deleted them, under a record that still names them.
    @Test func anAcknowledgedAssetOfAHostRecordInABuiltInZoneSurvivesAReopen() async throws {
        try await withTemporaryDirectory { directory in
            let options = LocalStore.Options(durability: .fsync, recordTypes: [Clipping.self])
            let store = try LocalStore(directory: directory, options: options)
            let image = try await store.makeAsset(TestPhoto.bytes(version: 9))
            try await store.records(Clipping.self).save(Clipping(id: "c1", caption: "v9", image: image))
            for command in try await store.sealPendingCommands(in: Clipping.zone) {
                try await store.acknowledge(Array(command.changes.keys), in: command.id)
            }
            try await store.unsealPendingCommands(in: Clipping.zone)
            try await store.close()

            let reopened = try LocalStore(directory: directory, options: options)
            let clipping = try #require(await reopened.records(Clipping.self).value("c1"))
            let kept = try #require(clipping.image)
            #expect(kept == image)
            #expect((try? reopened.localData(of: kept)) == TestPhoto.bytes(version: 9), "the record's file was deleted")
            try await reopened.close()
        }
    }

    /// The same through a context: the device pushes its clipping, the fetch that would bring it back fails,
    /// it restarts: its own record's image must still read.
    @Test func aDeviceReadsItsOwnAssetInABuiltInZoneAfterARestart() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A") { $0.recordTypes = [Clipping.self] }
            let image = try await a.makeAsset(bytes)
            #expect(try await a.records(Clipping.self).save(Clipping(id: "c1", caption: "x", image: image)))
            // The push goes through; the network drops before the fetch that would bring the record back.
            await harness.cloud.setFaultPlan(.failNext(100, .fetchZoneChanges, with: .networkUnavailable))
            _ = try? await a.syncNow()
            #expect(await a.status().pendingRecords == 0, "pushed")
            try await a.close()

            // Restarted offline (or before its next fetch): the record is still the one it made.
            let again = try await harness.device("A") { $0.recordTypes = [Clipping.self] }
            let clipping = try #require(await again.records(Clipping.self).value("c1"))
            let held = try #require(clipping.image)
            let read = try? await again.data(of: held, in: clipping)
            #expect(read == bytes, "held \(held), local file \(String(describing: held.localFile))")

            // Back online, the user clears the caption: a replace, which sends the image made here, whose
            // file is gone: the change parks, and every retry meets the same missing file.
            await harness.cloud.setFaultPlan(.none)
            var edited = clipping
            edited.caption = nil
            #expect(try await again.records(Clipping.self).save(edited))
            _ = try? await again.syncNow()
            let refused = await again.refusedChanges()
            #expect(refused.isEmpty, "\(refused)")
            try await again.close()
        }
    }

    /// A push cuts requests by `RequestBatches.byteBudget` (512 KB); `approximateSize` counts an asset as its
    /// small JSON description, so one `records/modify` could carry 200 assets of up to 15 MB, whose upload URLs
    /// are all asked for first and are "valid for a limited time (15 minutes)" (UploadAssets.html). An asset
    /// made here now counts its bytes.
    @Test func assetsCountTowardsARequestsBytes() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A") { $0.recordTypes = [Card.self] }
            let images = [
                try await a.makeAsset(Data(repeating: 0, count: 1_000_000)),
                try await a.makeAsset(Data(repeating: 1, count: 1_000_000)),
                try await a.makeAsset(Data(repeating: 2, count: 1_000_000)),
            ]
            await harness.cloud.resetCounters()
            // One mutation, so that the three wait together, whatever push the save starts.
            var batch = RecordBatch()
            try batch.save((0..<3).map { Card(id: "c\($0)", caption: "x", image: images[$0]) })
            try await a.apply(batch)
            _ = try await a.syncNow()
            #expect(await a.status().pendingRecords == 0)
            let requests = await harness.cloud.counters().requests(.modifyRecords)
            #expect(requests >= 3, "3 MB of assets went in \(requests) request(s)")
            try await a.close()
        }
    }
}

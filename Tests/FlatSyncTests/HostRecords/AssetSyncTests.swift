import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// A host's records that hold assets another client uploaded (a native app saving a `CKAsset`): they sync
/// with the asset's description, the bytes download on demand, and a save keeps or drops such an asset but
/// cannot give another record's; an asset made on a device goes up with its record.
@Suite struct AssetSyncTests {
    typealias Photo = TestPhoto

    private let bytes = Data((0..<5_000).map { UInt8($0 % 253) })

    private func device(_ harness: SyncHarness, _ name: String = "A") async throws -> SyncContext {
        try await harness.device(name) { $0.recordTypes = [Photo.self] }
    }

    /// Another client uploads `data` and saves a photo holding it, straight to the server.
    @discardableResult
    private func savePhotoAsAnotherClient(
        _ harness: SyncHarness, _ name: String = "p1", caption: String = "Tides", data: Data
    ) async throws -> Record {
        let image = await harness.cloud.uploadAsset(data)
        let record = Record(
            id: Photo.recordID(name), type: Photo.recordType, fields: ["caption": .string(caption), "image": image])
        let result = try await harness.cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
        return try #require(result.saved[record.id])
    }

    private func serverPhoto(_ harness: SyncHarness, _ name: String = "p1") async -> Record? {
        await harness.cloud.records(in: Photo.zone).first { $0.id.name == name }
    }

    @Test(arguments: [SyncHarness.Route.direct, .http])
    func aDeviceReadsAnotherClientsAssetAndDownloadsItsBytes(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await device(harness)
            try await savePhotoAsAnotherClient(harness, data: bytes)
            _ = try await a.syncNow()

            let photo = try #require(await a.records(Photo.self).value("p1"))
            let image = try #require(photo.image)
            #expect(image.size == Int64(bytes.count))
            #expect(try await a.data(of: image, in: photo) == bytes)
            #expect(await harness.cloud.counters().requests(.downloadAsset) == 1)
            try await a.close()
        }
    }

    /// Editing another field sends that field only: the asset stays on the server (sent back, its
    /// description would be refused, having no receipt), and no change is parked.
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func editingAnotherFieldKeepsTheAsset(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await device(harness)
            let original = try await savePhotoAsAnotherClient(harness, data: bytes)
            _ = try await a.syncNow()
            var photo = try #require(await a.records(Photo.self).value("p1"))

            // The server's record changes (a fresh link comes with it over HTTP); the value read before still
            // holds the older copy of the same asset, which is no change of it.
            let tagged = try #require(await serverPhoto(harness)).changeTag
            var touched = original
            touched.fields = ["caption": .string("Tides at noon")]
            touched.changeTag = tagged
            _ = try await harness.cloud.modifyRecords(saving: [RecordSave(touched)], deleting: [], atomically: true)
            _ = try await a.syncNow()

            photo.caption = "Tides at dusk"
            #expect(try await a.records(Photo.self).save(photo))
            _ = try await a.syncNow()
            #expect(await a.refusedChanges().isEmpty)
            let server = try #require(await serverPhoto(harness))
            #expect(server.fields["caption"] == .string("Tides at dusk"))
            #expect(server.fields["image"]?.assetValue == original.fields["image"]?.assetValue)
            let kept = try #require(await a.records(Photo.self).value("p1")?.image)
            #expect(try await a.data(of: kept, in: photo) == bytes)
            try await a.close()
        }
    }

    /// This device's edit meets another client's newer version: the merged record goes out whole, as an
    /// update, without the asset (the server keeps it; its description, without a receipt, would be
    /// refused), and nothing is parked.
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func aMergedSaveLeavesTheAssetToTheServer(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await device(harness)
            let original = try await savePhotoAsAnotherClient(harness, data: bytes)
            _ = try await a.syncNow()
            var photo = try #require(await a.records(Photo.self).value("p1"))

            // The other client writes a field this device does not declare, unseen by A.
            var theirs = original
            theirs.fields = ["rating": .int(5)]
            theirs.changeTag = try #require(await serverPhoto(harness)).changeTag
            _ = try await harness.cloud.modifyRecords(saving: [RecordSave(theirs)], deleting: [], atomically: true)
            photo.caption = "Tides at dusk"
            #expect(try await a.records(Photo.self).save(photo))
            _ = try await a.syncNow()

            #expect(await a.refusedChanges().isEmpty)
            let server = try #require(await serverPhoto(harness))
            #expect(server.fields["caption"] == .string("Tides at dusk"))
            #expect(server.fields["rating"] == .int(5))
            #expect(server.fields["image"]?.assetValue == original.fields["image"]?.assetValue)
            try await a.close()
        }
    }

    /// An asset made on one device is uploaded with its record; another device reads the record and
    /// downloads the bytes; the device that made it reads them from its own directory.
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func anAssetMadeOnOneDeviceReachesAnother(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await device(harness, "A")
            let b = try await device(harness, "B")
            let image = try await a.makeAsset(bytes)
            #expect(image.fileChecksum == nil && image.size == Int64(bytes.count))
            let photo = Photo(id: "p1", caption: "Tides", image: image)
            #expect(try await a.records(Photo.self).save(photo))
            // A reads the bytes from its directory, offline too.
            let requestsBefore = await harness.cloud.counters().requests
            #expect(try await a.data(of: image, in: photo) == bytes)
            #expect(await harness.cloud.counters().requests == requestsBefore, "read from A's own directory")
            _ = try await a.syncNow()
            #expect(await a.refusedChanges().isEmpty)

            let server = try #require(await serverPhoto(harness))
            let uploaded = try #require(server.fields["image"]?.assetValue)
            #expect(uploaded.fileChecksum != nil && uploaded.size == Int64(bytes.count))
            #expect(server.fields["image"]?.opaqueValue?.json.contains("receipt") == false)

            _ = try await b.syncNow()
            let seen = try #require(await b.records(Photo.self).value("p1"))
            #expect(seen.image == uploaded)
            #expect(try await b.data(of: try #require(seen.image), in: seen) == bytes)
            // A fetches its own save back: it keeps its asset as it made it, and reads it from its directory.
            _ = try await a.syncNow()
            let mine = try #require(await a.records(Photo.self).value("p1"))
            #expect(mine.image?.localFile == image.localFile)
            let requestsAfterSync = await harness.cloud.counters().requests
            #expect(try await a.data(of: try #require(mine.image), in: mine) == bytes)
            #expect(await harness.cloud.counters().requests == requestsAfterSync, "not downloaded again")
            try await a.close()
            try await b.close()
        }
    }

    /// A save that gives a field an asset its record does not hold and that was not made here (another
    /// record's, one from another client's upload, or a made-up one whose file the store lacks) is refused
    /// before anything is written: the server takes a description back only from an upload.
    @Test func aSaveCannotGiveAFieldAnotherAsset() async throws {
        try await SyncHarness.run { harness in
            let a = try await device(harness)
            try await savePhotoAsAnotherClient(harness, "p1", data: bytes)
            try await savePhotoAsAnotherClient(harness, "p2", data: Data("other".utf8))
            _ = try await a.syncNow()
            let p1 = try #require(await a.records(Photo.self).value("p1"))
            let p2 = try #require(await a.records(Photo.self).value("p2"))

            var swapped = p1
            swapped.image = p2.image
            let error = await #expect(throws: FlatSyncError.self) { try await a.records(Photo.self).save(swapped) }
            #expect(error?.code == .invalidArgument)
            let copy = Photo(id: "p3", caption: "copy", image: p1.image)
            await #expect(throws: FlatSyncError.self) { try await a.records(Photo.self).save(copy) }
            let uploaded = try #require(CloudAsset(await harness.cloud.uploadAsset(bytes)))
            swapped.image = uploaded
            await #expect(throws: FlatSyncError.self) { try await a.records(Photo.self).save(swapped) }
            let forged = try #require(CloudAsset(CloudAsset.localFieldValue(file: "no-such-file", size: 3)))
            swapped.image = forged
            await #expect(throws: FlatSyncError.self) { try await a.records(Photo.self).save(swapped) }

            #expect(await a.records(Photo.self).value("p1") == p1, "nothing changed")
            #expect(await a.records(Photo.self).value("p3") == nil)
            #expect(await a.status().pendingRecords == 0)
            try await a.close()
        }
    }

    /// Dropping the asset removes the field, here and on the server (which forgets the bytes once no record
    /// names them).
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func droppingTheAssetRemovesTheField(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await device(harness)
            try await savePhotoAsAnotherClient(harness, data: bytes)
            _ = try await a.syncNow()
            var photo = try #require(await a.records(Photo.self).value("p1"))
            photo.image = nil
            #expect(try await a.records(Photo.self).save(photo))
            _ = try await a.syncNow()
            #expect(await a.refusedChanges().isEmpty)
            #expect(try #require(await serverPhoto(harness)).fields["image"] == nil)
            #expect(await a.records(Photo.self).value("p1")?.image == nil)
            try await a.close()
        }
    }

    /// CloudKit's links expire: a download the server refuses looks the record up again and downloads
    /// through the fresh link, once; when the record is gone, the asset is unknown.
    @Test func anExpiredLinkIsRenewedByLookingTheRecordUp() async throws {
        try await SyncHarness.run(via: .http) { harness in
            let a = try await device(harness)
            try await savePhotoAsAnotherClient(harness, data: bytes)
            _ = try await a.syncNow()
            let photo = try #require(await a.records(Photo.self).value("p1"))
            let image = try #require(photo.image)

            harness.expireAssetLinks()
            await harness.cloud.resetCounters()
            #expect(try await a.data(of: image, in: photo) == bytes)
            let counters = await harness.cloud.counters()
            #expect(counters.requests(.lookupRecords) == 1)
            #expect(counters.requests(.downloadAsset) == 1, "the expired link is refused before the server counts it")

            harness.expireAssetLinks()
            let tag = try #require(await serverPhoto(harness)).changeTag
            _ = try await harness.cloud.modifyRecords(
                saving: [], deleting: [RecordDeletion(Photo.recordID("p1"), changeTag: tag)], atomically: true)
            let error = await #expect(throws: CloudError.self) { try await a.data(of: image, in: photo) }
            #expect(error?.code == .unknownItem)
            try await a.close()
        }
    }

    /// While the context waits for the host to name the account, the transport may be signed in as someone
    /// else: a download sends nothing.
    @Test func noDownloadWhileTheContextWaitsForTheAccount() async throws {
        try await SyncHarness.run { harness in
            let a = try await device(harness)
            try await savePhotoAsAnotherClient(harness, data: bytes)
            _ = try await a.syncNow()
            let photo = try #require(await a.records(Photo.self).value("p1"))
            await harness.cloud.setFaultPlan(.failNext(1, .modifyRecords, with: .notAuthenticated))
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            #expect(await a.status().paused == .notAuthenticated)

            let before = await harness.cloud.counters().requests
            let error = await #expect(throws: CloudError.self) {
                try await a.data(of: try #require(photo.image), in: photo)
            }
            #expect(error?.code == .notAuthenticated)
            #expect(await harness.cloud.counters().requests == before)
            try await a.close()
        }
    }
}

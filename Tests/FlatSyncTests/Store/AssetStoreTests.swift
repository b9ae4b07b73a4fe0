import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// Assets made on this device: their files in the store's `assets` folder, durable before the asset is
/// handed out, and deleted when the store opens once no record names them.
@Suite struct AssetStoreTests {
    private func open(_ directory: URL, types: [any SyncableRecord.Type] = [TestPhoto.self]) throws -> LocalStore {
        try LocalStore(directory: directory, options: LocalStore.Options(durability: .fsync, recordTypes: types))
    }

    private func assetFiles(_ store: LocalStore) -> [String] {
        (try? fileNames(in: store.assetsDirectory)) ?? []
    }

    @Test func anAssetSavedInARecordIsReadBackAfterAReopen() async throws {
        try await withTemporaryDirectory { directory in
            let store = try open(directory)
            let image = try await store.makeAsset(TestPhoto.bytes(version: 7))
            #expect(try await store.records(TestPhoto.self).save(TestPhoto(id: "p1", caption: "v7", image: image)))
            try await store.close()

            let reopened = try open(directory)
            let photo = try #require(await reopened.records(TestPhoto.self).value("p1"))
            #expect(photo.image == image)
            #expect(try reopened.localData(of: try #require(photo.image)) == TestPhoto.bytes(version: 7))
            #expect(assetFiles(reopened).count == 1)
            try await reopened.close()
        }
    }

    /// An asset never saved, one a later save replaced and one a save dropped are deleted at the next open;
    /// the one a record holds stays.
    @Test func filesNoRecordNamesAreDeletedAtTheNextOpen() async throws {
        try await withTemporaryDirectory { directory in
            let store = try open(directory)
            _ = try await store.makeAsset(Data("never saved".utf8))
            let first = try await store.makeAsset(TestPhoto.bytes(version: 1))
            try await store.records(TestPhoto.self).save(TestPhoto(id: "p1", caption: "v1", image: first))
            let second = try await store.makeAsset(TestPhoto.bytes(version: 2))
            try await store.records(TestPhoto.self).save(TestPhoto(id: "p1", caption: "v2", image: second))
            let dropped = try await store.makeAsset(TestPhoto.bytes(version: 3))
            try await store.records(TestPhoto.self).save(TestPhoto(id: "p2", caption: "v3", image: dropped))
            try await store.records(TestPhoto.self).save(TestPhoto(id: "p2", caption: "v3", image: nil))
            #expect(assetFiles(store).count == 4, "nothing is deleted while the store is open")
            try await store.close()

            let reopened = try open(directory)
            #expect(assetFiles(reopened) == [try #require(second.localFile)])
            let photo = try #require(await reopened.records(TestPhoto.self).value("p1"))
            #expect(try reopened.localData(of: try #require(photo.image)) == TestPhoto.bytes(version: 2))
            try await reopened.close()
        }
    }

    /// A run that does not register the photos' type does not read their zone: their files wait for a run
    /// that does.
    @Test func aZoneNotOpenKeepsItsFiles() async throws {
        try await withTemporaryDirectory { directory in
            let store = try open(directory)
            let image = try await store.makeAsset(TestPhoto.bytes(version: 4))
            try await store.records(TestPhoto.self).save(TestPhoto(id: "p1", caption: "v4", image: image))
            try await store.close()

            let without = try open(directory, types: [TestRecipe.self])
            #expect(assetFiles(without).count == 1)
            try await without.close()
            let with = try open(directory)
            let photo = try #require(await with.records(TestPhoto.self).value("p1"))
            #expect(try with.localData(of: try #require(photo.image)) == TestPhoto.bytes(version: 4))
            try await with.close()
        }
    }

    @Test func anAssetOverTheLimitIsRefusedAndWritesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let store = try open(directory)
            let error = await #expect(throws: FlatSyncError.self) {
                try await store.makeAsset(Data(count: LocalStore.maximumAssetSize + 1))
            }
            #expect(error?.code == .recordTooLarge)
            #expect(assetFiles(store).isEmpty)
            try await store.close()
            await #expect(throws: FlatSyncError.self) { try await store.makeAsset(Data("late".utf8)) }
        }
    }

    /// A file gone from under the store (removed by hand) is an I/O error when read, and a save naming it is
    /// refused before anything changes.
    @Test func aFileGoneFromUnderTheStoreIsATypedError() async throws {
        try await withTemporaryDirectory { directory in
            let store = try open(directory)
            let image = try await store.makeAsset(Data("gone".utf8))
            try FileManager.default.removeItem(
                at: store.assetsDirectory.appendingPathComponent(try #require(image.localFile)))
            let error = #expect(throws: FlatSyncError.self) { try store.localData(of: image) }
            #expect(error?.code == .ioFailed)
            await #expect(throws: FlatSyncError.self) {
                try await store.records(TestPhoto.self).save(TestPhoto(id: "p1", caption: "x", image: image))
            }
            #expect(await store.records(TestPhoto.self).value("p1") == nil)
            try await store.close()
        }
    }
}

import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// The device that made an asset keeps reading it from its own file once another device's edit of the
/// record's other fields arrives: the checksum the server gave its upload, noted beside the file, says
/// that the server's description names the same bytes. Without a note (lost, damaged, never made) the
/// device downloads them, as before.
@Suite struct AssetUploadNoteTests {
    typealias Photo = TestPhoto

    private let bytes = Data((0..<5_000).map { UInt8($0 % 251) })

    private func device(
        _ harness: SyncHarness, _ name: String, transport: (any CloudTransport)? = nil
    ) async throws -> SyncContext {
        try await harness.device(name, transport: transport) { $0.recordTypes = [Photo.self] }
    }

    /// A makes the photo p1 from `bytes` and sends it; returns the asset A made.
    private func sendPhoto(from a: SyncContext) async throws -> CloudAsset {
        let image = try await a.makeAsset(bytes)
        #expect(try await a.records(Photo.self).save(Photo(id: "p1", caption: "Tides", image: image)))
        #expect(try await a.syncNow().isComplete)
        return image
    }

    /// B fetches the photo p1, changes its caption, and sends it: an edit of the record's other fields.
    private func changeCaptionOnB(_ b: SyncContext) async throws {
        #expect(try await b.syncNow().isComplete)
        var theirs = try #require(await b.records(Photo.self).value("p1"))
        theirs.caption = "Tides at noon"
        #expect(try await b.records(Photo.self).save(theirs))
        #expect(try await b.syncNow().isComplete)
    }

    private func serverImage(_ harness: SyncHarness) async -> CloudAsset? {
        await harness.cloud.records(in: Photo.zone).first { $0.id.name == "p1" }?.fields["image"]?.assetValue
    }

    private func note(_ harness: SyncHarness, _ device: String, of asset: CloudAsset) throws -> URL {
        harness.directory.appendingPathComponent(device).appendingPathComponent(LocalStore.uploadsFolderName)
            .appendingPathComponent(try #require(asset.localFile))
    }

    /// A makes a photo and sends it; B changes its caption; A, reopened or not, takes the caption and keeps
    /// its own file: no download, and its next edit uploads nothing again.
    @Test(arguments: [SyncHarness.Route.direct, .http], [false, true])
    func theMakerKeepsItsFileWhenAnotherDeviceEditsTheCaption(_ route: SyncHarness.Route, reopen: Bool) async throws {
        try await SyncHarness.run(via: route) { harness in
            var a = try await device(harness, "A")
            let b = try await device(harness, "B")
            let image = try await sendPhoto(from: a)
            let uploaded = try #require(await serverImage(harness))
            #expect(
                try String(contentsOf: note(harness, "A", of: image), encoding: .utf8) == uploaded.fileChecksum,
                "the upload's checksum is noted beside the file")

            try await changeCaptionOnB(b)

            if reopen {
                try await a.close()
                a = try await device(harness, "A")
            }
            #expect(try await a.syncNow().isComplete)
            var mine = try #require(await a.records(Photo.self).value("p1"))
            #expect(mine.caption == "Tides at noon")
            #expect(mine.image?.localFile == image.localFile, "still the file A made")
            let requests = await harness.cloud.counters().requests
            #expect(try await a.data(of: try #require(mine.image), in: mine) == bytes)
            #expect(await harness.cloud.counters().requests == requests, "read from A's own directory")
            #expect(await harness.cloud.counters().requests(.downloadAsset) == 0)

            // A's next edit sends its caption only: the server keeps the upload it has.
            mine.caption = "Tides at dusk"
            #expect(try await a.records(Photo.self).save(mine))
            #expect(try await a.syncNow().isComplete)
            #expect(await a.refusedChanges().isEmpty)
            #expect(await serverImage(harness)?.fileChecksum == uploaded.fileChecksum)
            #expect(try await b.syncNow().isComplete)
            let seen = try #require(await b.records(Photo.self).value("p1"))
            #expect(seen.caption == "Tides at dusk")
            #expect(try await b.data(of: try #require(seen.image), in: seen) == bytes)
            try await a.close()
            try await b.close()
        }
    }

    /// A's caption edit meets B's, unseen: the merge goes out whole, as an update that leaves the image to
    /// the server, which holds A's upload; A uploads nothing again and keeps reading its own file.
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func aMergedSaveDoesNotUploadTheMakersAssetAgain(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let a = try await device(harness, "A")
            let b = try await device(harness, "B")
            let image = try await sendPhoto(from: a)
            let uploaded = try #require(await serverImage(harness))

            try await changeCaptionOnB(b)

            // A has not fetched B's version: its edit conflicts, merges, and goes out whole.
            var mine = try #require(await a.records(Photo.self).value("p1"))
            mine.caption = "Tides at dusk"
            #expect(try await a.records(Photo.self).save(mine))
            let uploadsBefore = await harness.cloud.counters().requests(.uploadAssets)
            #expect(try await a.syncNow().isComplete)
            #expect(await harness.cloud.counters().requests(.uploadAssets) == uploadsBefore)
            #expect(await serverImage(harness)?.fileChecksum == uploaded.fileChecksum, "not uploaded again")
            let merged = try #require(await a.records(Photo.self).value("p1"))
            #expect(merged.caption == "Tides at dusk")
            #expect(merged.image?.localFile == image.localFile)
            try await a.close()
            try await b.close()
        }
    }

    /// Other bytes from another device replace A's: A reads the server's description (downloading them),
    /// and at its next open its file and the file's note go.
    @Test func anotherDevicesNewBytesReplaceTheMakersFile() async throws {
        try await SyncHarness.run { harness in
            var a = try await device(harness, "A")
            let b = try await device(harness, "B")
            let image = try await sendPhoto(from: a)
            let file = harness.directory.appendingPathComponent("A").appendingPathComponent("assets")
                .appendingPathComponent(try #require(image.localFile))
            let note = try note(harness, "A", of: image)
            #expect(FileManager.default.fileExists(atPath: note.path))

            // B's new bytes have A's size: the checksum, not the size, tells them apart.
            let other = Data(bytes.reversed())
            #expect(try await b.syncNow().isComplete)
            var theirs = try #require(await b.records(Photo.self).value("p1"))
            theirs.image = try await b.makeAsset(other)
            #expect(try await b.records(Photo.self).save(theirs))
            #expect(try await b.syncNow().isComplete)

            #expect(try await a.syncNow().isComplete)
            let mine = try #require(await a.records(Photo.self).value("p1"))
            #expect(mine.image?.localFile == nil)
            #expect(mine.image?.fileChecksum == (await serverImage(harness))?.fileChecksum)
            #expect(try await a.data(of: try #require(mine.image), in: mine) == other)

            try await a.close()
            a = try await device(harness, "A")
            #expect(!FileManager.default.fileExists(atPath: file.path), "no record holds it")
            #expect(!FileManager.default.fileExists(atPath: note.path), "its note goes with it")
            try await a.close()
            try await b.close()
        }
    }

    /// A note lost, emptied or damaged while A was closed costs one download of bytes A has, nothing else.
    @Test(arguments: ["missing", "empty", "damaged"])
    func aLostOrDamagedNoteCostsOneDownload(_ damage: String) async throws {
        try await SyncHarness.run { harness in
            var a = try await device(harness, "A")
            let b = try await device(harness, "B")
            let image = try await sendPhoto(from: a)
            try await a.close()
            let note = try note(harness, "A", of: image)
            switch damage {
            case "missing": try FileManager.default.removeItem(at: note)
            case "empty": try Data().write(to: note)
            default: try Data("fs0-0\u{0}\u{FF}".utf8).write(to: note)
            }

            try await changeCaptionOnB(b)

            a = try await device(harness, "A")
            #expect(try await a.syncNow().isComplete)
            let mine = try #require(await a.records(Photo.self).value("p1"))
            #expect(mine.caption == "Tides at noon")
            #expect(mine.image?.localFile == nil && mine.image?.fileChecksum != nil, "the server's description")
            #expect(try await a.data(of: try #require(mine.image), in: mine) == bytes)
            #expect(await harness.cloud.counters().requests(.downloadAsset) == 1)
            try await a.close()
            try await b.close()
        }
    }

    /// Where the save's answer carries no description of the asset (CloudKit documents none), the fetch of
    /// the version A's save made names the upload, and is noted.
    @Test func theFetchOfItsOwnVersionNotesTheUploadWhenTheAnswerLacksIt() async throws {
        try await SyncHarness.run { harness in
            let stripping = InterceptingTransport(
                harness.cloud,
                modifyResult: { _, result in
                    var stripped = result
                    for (id, record) in result.saved {
                        stripped.saved[id]?.fields = record.fields.filter { $0.key != "image" }
                    }
                    return stripped
                })
            let a = try await device(harness, "A", transport: stripping)
            let b = try await device(harness, "B")
            let image = try await sendPhoto(from: a)
            let uploaded = try #require(await serverImage(harness))
            #expect(try String(contentsOf: note(harness, "A", of: image), encoding: .utf8) == uploaded.fileChecksum)

            try await changeCaptionOnB(b)
            #expect(try await a.syncNow().isComplete)
            #expect(await a.records(Photo.self).value("p1")?.image?.localFile == image.localFile)
            try await a.close()
            try await b.close()
        }
    }

    /// Where another client's edit lands before A fetches its own version, the save's answer alone names
    /// the upload.
    @Test func theSavesAnswerAloneNamesTheUpload() async throws {
        try await SyncHarness.run { harness in
            let cloud = harness.cloud
            let armed = Mutex(false)
            let editing = InterceptingTransport(
                cloud,
                before: { kind, _ in
                    guard kind == .fetchZoneChanges, armed.withLock({ $0 }) else { return }
                    armed.withLock { $0 = false }
                    // Another client changes the caption between A's push and its fetch.
                    guard var record = await cloud.records(in: Photo.zone).first(where: { $0.id.name == "p1" })
                    else { return }
                    record.fields = ["caption": .string("Tides at noon")]
                    _ = try? await cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
                })
            let a = try await device(harness, "A", transport: editing)
            let image = try await a.makeAsset(bytes)
            #expect(try await a.records(Photo.self).save(Photo(id: "p1", caption: "Tides", image: image)))
            armed.withLock { $0 = true }
            #expect(try await a.syncNow().isComplete)
            #expect(!armed.withLock { $0 }, "the other client wrote")
            let mine = try #require(await a.records(Photo.self).value("p1"))
            #expect(mine.caption == "Tides at noon")
            #expect(mine.image?.localFile == image.localFile)
            #expect(await harness.cloud.counters().requests(.downloadAsset) == 0)
            try await a.close()
        }
    }
}

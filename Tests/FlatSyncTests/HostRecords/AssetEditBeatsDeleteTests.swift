import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// An edit that beats a delete it did not see brings its record back as a new one. A device that holds the
/// record's asset as the server described it cannot send that description back (CloudKit takes one only
/// from an upload, or a rereference of a record that exists): it downloads the bytes first and uploads them
/// with the new record. Found by a newcomer's photo journal (the photo came back without its image, and
/// nothing said so).
@Suite struct AssetEditBeatsDeleteTests {
    typealias Photo = TestPhoto

    private let bytes = Data((0..<6_000).map { UInt8($0 % 247) })

    /// A makes a photo and deletes it; B, which has it from the server, changes its caption without having
    /// seen the delete. Returns B's recorder, after B's sync.
    private func recaptionAfterADelete(
        _ harness: SyncHarness, faults: FaultPlan = .none
    ) async throws -> (a: SyncContext, b: SyncContext, recorder: SyncEventRecorder, summary: SyncSummary) {
        let a = try await harness.device("A") { $0.recordTypes = [Photo.self] }
        let b = try await harness.device("B") { $0.recordTypes = [Photo.self] }
        let image = try await a.makeAsset(bytes)
        #expect(try await a.records(Photo.self).save(Photo(id: "p1", caption: "Tides", image: image)))
        #expect(try await a.syncNow().isComplete)
        #expect(try await b.syncNow().isComplete)
        #expect(try await a.records(Photo.self).delete("p1"))
        #expect(try await a.syncNow().isComplete)
        #expect(await harness.cloud.records(in: Photo.zone).isEmpty)

        var photo = try #require(await b.records(Photo.self).value("p1"))
        #expect(photo.image?.fileChecksum != nil, "B holds the server's description")
        photo.caption = "Tides at noon"
        #expect(try await b.records(Photo.self).save(photo))
        await harness.cloud.setFaultPlan(faults)
        let recorder = SyncEventRecorder(b)
        let summary = try await b.syncNow()
        return (a, b, recorder, summary)
    }

    @Test(arguments: [SyncHarness.Route.direct, .http])
    func theRecordComesBackWithItsAsset(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            let (a, b, recorder, summary) = try await recaptionAfterADelete(harness)
            #expect(summary.isComplete && summary.refused.isEmpty)
            #expect(!recorder.events.contains { if case .error = $0 { true } else { false } })

            let server = try #require(await harness.cloud.records(in: Photo.zone).first)
            #expect(server["caption"] == .string("Tides at noon"))
            let uploaded = try #require(server["image"]?.assetValue)
            #expect(try await harness.cloud.downloadAsset(uploaded) == bytes)
            // B keeps the bytes as its own now, and reads them from its directory.
            let mine = try #require(await b.records(Photo.self).value("p1"))
            #expect(mine.image?.localFile != nil)
            #expect(try await b.data(of: try #require(mine.image), in: mine) == bytes)
            // A has the photo back, with its image.
            #expect(try await a.syncNow().isComplete)
            let back = try #require(await a.records(Photo.self).value("p1"))
            #expect(back.caption == "Tides at noon")
            #expect(try await a.data(of: try #require(back.image), in: back) == bytes)
            try await a.close()
            try await b.close()
        }
    }

    /// Bytes the server no longer gives are lost to the new record: it goes without them, as it did before,
    /// and an error event says so.
    @Test func bytesTheServerNoLongerGivesAreReported() async throws {
        try await SyncHarness.run { harness in
            let (a, b, recorder, summary) = try await recaptionAfterADelete(
                harness, faults: .failNext(1, .downloadAsset, with: .unknownItem))
            #expect(summary.isComplete)
            let reported = recorder.events.contains {
                if case .error(let problem) = $0 { problem.message.contains("image") } else { false }
            }
            #expect(reported, "\(recorder.events)")
            let server = try #require(await harness.cloud.records(in: Photo.zone).first)
            #expect(server["caption"] == .string("Tides at noon"))
            #expect(server["image"] == nil)
            #expect(await b.records(Photo.self).value("p1")?.image == nil)
            try await a.close()
            try await b.close()
        }
    }

    /// A download that fails for now holds the record back, rather than send it without its bytes: the
    /// record goes once a later download gives them (here within the same sync, which tries again when the
    /// network is back).
    @Test func aDownloadThatFailsForNowIsTriedAgain() async throws {
        try await SyncHarness.run { harness in
            let (a, b, _, _) = try await recaptionAfterADelete(
                harness, faults: .failNext(1, .downloadAsset, with: .networkFailure))
            #expect(try await b.syncNow().isComplete)
            let counters = await harness.cloud.counters()
            #expect(counters.faultsInjected["networkFailure"] == 1)
            #expect(counters.requests(.downloadAsset) == 2, "\(counters)")
            #expect(counters.recordsSaved == 2, "the photo's first save, and its return: never without its bytes")
            let server = try #require(await harness.cloud.records(in: Photo.zone).first)
            #expect(try await harness.cloud.downloadAsset(try #require(server["image"]?.assetValue)) == bytes)
            try await a.close()
            try await b.close()
        }
    }
}

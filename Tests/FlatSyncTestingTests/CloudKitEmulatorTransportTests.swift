import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

// The emulator and FlatSync's CloudKitWebServicesTransport, written separately against one wire
// contract, agree: a smoke test of the pair. (The whole conformance suite runs through them once the
// harness has an HTTP case.)

@Suite("CKWS emulator: with the transport")
struct CloudKitEmulatorTransportTests {
    private func transport(_ server: CloudKitWebServicesServer) -> CloudKitWebServicesTransport {
        CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.dev.flatsync.tests", environment: .development, apiToken: "any",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL, requestTimeout: .seconds(20),
                schema: nil))
    }

    @Test func recordsOfEveryFieldTypeRoundTripThroughBothSides() async throws {
        try await withEmulator { server, _ in
            let cloud = transport(server)
            let zone = ZoneID("Notes")
            try await cloud.createZones([zone])
            #expect(try await cloud.listZones() == [zone])
            let fields: [String: FieldValue] = [
                "s": .string("héllo"), "i": .int(.min), "d": .double(-0.1), "b": .bytes(Data([0, 255])),
                "t": .date(Date(timeIntervalSince1970: 1_700_000_000.123)), "l": .list([.int(1), .int(2)]),
                "r": .reference(RecordReference(recordName: "b", action: .deleteSelf)),
                "rl": .list([.reference(RecordReference(recordName: "c", zoneName: "Notes"))]),
                "loc": .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":48.8,"longitude":2.35}"#)),
            ]
            let record = Record(
                id: RecordID(zone: zone, name: "a"), type: "Note", fields: fields, lastModifiedBy: "dev")
            let saved = try await cloud.modifyRecords(saving: [RecordSave(record)], deleting: [], atomically: true)
            let stored = try #require(saved.saved[record.id])
            #expect(stored.fields == fields)
            #expect(stored.lastModifiedBy == "dev")
            #expect(try await server.backing.records(in: zone) == [stored])

            let changes = try await cloud.fetchZoneChanges(in: zone, since: nil, resultsLimit: 500)
            #expect(changes.changedRecords == [stored])
            let conflict = try await cloud.modifyRecords(
                saving: [RecordSave(record.withChangeTag(nil))], deleting: [], atomically: true)
            #expect(conflict.failed[record.id]?.code == .serverRecordChanged)
            #expect(conflict.failed[record.id]?.serverRecord == stored)

            // A list of assets, as another client uploads them: saved without the receipts, fetched with a link
            // for each.
            let uploads = [
                try await server.backing.uploadAsset(Data("abc".utf8)),
                try await server.backing.uploadAsset(Data("de".utf8)),
            ]
            let list = FieldValue.opaque(
                OpaqueFieldValue(
                    type: "ASSETID_LIST",
                    json: "[" + uploads.compactMap { $0.opaqueValue?.json }.joined(separator: ",") + "]"))
            let album = Record(id: RecordID(zone: zone, name: "album"), type: "Album", fields: ["assets": list])
            let savedAlbum = try #require(
                try await cloud.modifyRecords(saving: [RecordSave(album)], deleting: [], atomically: true).saved[
                    album.id])
            let kept = try #require(savedAlbum.fields["assets"]?.opaqueValue)
            #expect(kept.type == "ASSETID_LIST" && !kept.json.contains("receipt"))
            #expect(CloudAsset.identities(in: .opaque(kept)) == CloudAsset.identities(in: list))
            let fetchedAlbum = try #require(
                try await cloud.fetchZoneChanges(in: zone, since: changes.token, resultsLimit: 10).changedRecords.first)
            let linked = try #require(fetchedAlbum.fields["assets"]?.opaqueValue?.json)
            #expect(linked.components(separatedBy: "downloadURL").count == 3, "a link for each asset: \(linked)")

            try await server.backing.deleteZoneAsUser(zone)
            let database = try await cloud.fetchDatabaseChanges(since: nil)
            #expect(database.changedZones.isEmpty)
            await #expect {
                _ = try await cloud.fetchZoneChanges(in: zone, since: changes.token, resultsLimit: 10)
            } throws: {
                ($0 as? CloudError)?.code == .zoneNotFound  // CloudKit has no code of its own for the user's deletion
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func theLongPollSourceHearsOfAChangeInASubscribedZone() async throws {
        try await withEmulator(options: .init(courierHoldTime: .seconds(1))) { server, client in
            let cloud = transport(server)
            try await cloud.createZones([ZoneID("Notes")])
            try await cloud.subscribeToChanges(in: [ZoneID("Notes")])
            let source = LongPollNotificationSource(transport: cloud, pollTimeout: .seconds(30))
            var iterator = source.notifications().makeAsyncIterator()
            // Yielded once the token is registered: from now on the token hears of changes.
            #expect(try await iterator.next() == .wholeDatabase(.gap))
            try await client.modify("Notes", [operation("create", "a")])
            while let next = try await iterator.next() {
                // Keepalives (whole-database fetches) may come first.
                if next == .wholeDatabase(.gap) { continue }
                #expect(next.fetch == .zones([ZoneID("Notes")]))
                #expect(next.reason == .recordZone)
                #expect(next.subscriptionID == "flatsync-Notes")
                break
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aKeepaliveLeadsToAWholeFetchAndAnotherPollOfTheSameToken() async throws {
        let lines = Mutex<[String]>([])
        let options = CloudKitWebServicesServer.Options(
            requestLog: { line in lines.withLock { $0.append(line) } }, courierHoldTime: .seconds(1))
        try await withEmulator(options: options) { server, _ in
            let source = LongPollNotificationSource(transport: transport(server), pollTimeout: .seconds(30))
            var iterator = source.notifications().makeAsyncIterator()
            for _ in 0..<3 {  // the token, then two keepalives
                let next = try await iterator.next()
                #expect(next == .wholeDatabase(.gap))
            }
            let logged = lines.withLock { $0 }
            #expect(logged.filter { $0.contains("/tokens/create 200") }.count == 1)
            #expect(logged.filter { $0.contains("/tokens/register 200") }.count == 1)
            #expect(logged.filter { $0.hasPrefix("GET /aps 200 ") }.count >= 2)
        }
    }
}

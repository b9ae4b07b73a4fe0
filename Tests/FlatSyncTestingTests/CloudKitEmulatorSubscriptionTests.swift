import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// subscriptions/modify, subscriptions/list and subscriptions/lookup on the wire (documented shapes), with
// CloudKit's duplicate rules as observed live for query subscriptions and assumed for zone ones.

@Suite("CKWS emulator: subscriptions")
struct CloudKitEmulatorSubscriptionTests {
    static func zoneSubscription(_ id: String, _ zone: String) -> [String: Any] {
        ["subscriptionID": id, "subscriptionType": "zone", "zoneID": ["zoneName": zone]]
    }

    static func operations(_ operations: [(String, [String: Any])]) -> [String: Any] {
        ["operations": operations.map { ["operationType": $0.0, "subscription": $0.1] as [String: Any] }]
    }

    @Test func createListLookupUpdateAndDelete() async throws {
        try await withEmulator { server, client in
            try await client.createZones(["Notes", "Photos"])
            var notes = Self.zoneSubscription("s-notes", "Notes")
            notes["notificationInfo"] = ["shouldSendContentAvailable": true, "alertBody": "Notes changed"]
            let created = try await client.post(
                "subscriptions/modify",
                Self.operations([("create", notes), ("create", Self.zoneSubscription("s-photos", "Photos"))]))
            #expect(created.status == 200)
            let entries = created.json.objects("subscriptions")
            #expect(entries.map { $0["subscriptionID"] as? String } == ["s-notes", "s-photos"])
            #expect(entries.first?["subscriptionType"] as? String == "zone")
            #expect(entries.first?.object("zoneID")["zoneName"] as? String == "Notes")
            #expect(entries.first?.object("notificationInfo")["alertBody"] as? String == "Notes changed")

            let listed = try await client.get("subscriptions/list")
            #expect(listed.json.objects("subscriptions").compactMap { $0["subscriptionID"] as? String } == [
                "s-notes", "s-photos",
            ])
            #expect(try await client.post("subscriptions/list", [String: Any]()).status == 405, "documented as a GET")

            let looked = try await client.post(
                "subscriptions/lookup", ["subscriptions": [["subscriptionID": "s-photos"], ["subscriptionID": "nope"]]])
            let found = looked.json.objects("subscriptions")
            #expect(found.first?["subscriptionID"] as? String == "s-photos")
            #expect(found.last?["serverErrorCode"] as? String == "NOT_FOUND")
            #expect(found.last?["subscriptionID"] as? String == "nope")

            let changed = try await client.post(
                "subscriptions/modify",
                Self.operations([
                    ("update", Self.zoneSubscription("s-photos", "Photos")), ("delete", ["subscriptionID": "s-notes"]),
                    ("delete", ["subscriptionID": "s-notes"]),
                ]))
            let results = changed.json.objects("subscriptions")
            #expect(results[0]["subscriptionID"] as? String == "s-photos")
            #expect(results[1]["deleted"] as? Bool == true)
            #expect(results[2]["serverErrorCode"] as? String == "NOT_FOUND")
            #expect(try await server.backing.subscriptions().map(\.id) == ["s-photos"])
            let counters = try await server.backing.counters()
            #expect(counters.requests(.modifySubscriptions) == 2 && counters.requests(.listSubscriptions) == 2)
        }
    }

    @Test func creatingAnIDThatExistsReturnsTheExistingSubscription() async throws {
        // Observed live (MistKit #387, PR #416): "creating the SAME subscriptionID twice SUCCEEDS silently".
        try await withEmulator { server, client in
            try await client.createZones(["Notes", "Photos"])
            try await client.subscribe("Notes", id: "mine")
            let again = try await client.post(
                "subscriptions/modify", Self.operations([("create", Self.zoneSubscription("mine", "Photos"))]))
            #expect(again.status == 200)
            let entry = try #require(again.json.objects("subscriptions").first)
            #expect(entry["serverErrorCode"] == nil)
            #expect(entry.object("zoneID")["zoneName"] as? String == "Notes", "the existing one, unchanged")
            #expect(try await server.backing.subscriptions().count == 1)
        }
    }

    @Test func aSecondSubscriptionOfTheSameZoneFailsForItsItemInsideA200() async throws {
        // Observed live for query subscriptions (uniqueness by content, INTERNAL_ERROR "could not find
        // subscription we just created"); assumed for zone subscriptions.
        try await withEmulator { server, client in
            try await client.createZones(["Notes", "Photos"])
            try await client.subscribe("Notes", id: "first")
            let duplicate = try await client.post(
                "subscriptions/modify",
                Self.operations([
                    ("create", Self.zoneSubscription("second", "Notes")),
                    ("create", Self.zoneSubscription("photos", "Photos")),
                ]))
            #expect(duplicate.status == 200)
            let entries = duplicate.json.objects("subscriptions")
            #expect(entries[0]["subscriptionID"] as? String == "second")
            #expect(entries[0]["serverErrorCode"] as? String == "INTERNAL_ERROR")
            #expect(entries[0]["reason"] as? String == "could not find subscription we just created")
            #expect(entries[1]["serverErrorCode"] == nil, "the other item still applies")
            #expect(try await server.backing.subscriptions().map(\.id) == ["first", "photos"])
        }
    }

    @Test func itemsTheEmulatorCannotKeepFailAlone() async throws {
        try await withEmulator { _, client in
            try await client.createZones(["Notes"])
            let answer = try await client.post(
                "subscriptions/modify",
                Self.operations([
                    ("create", ["subscriptionID": "q", "subscriptionType": "query", "query": ["recordType": "Note"]]),
                    ("create", Self.zoneSubscription("missing-zone", "Nowhere")),
                    ("create", ["subscriptionType": "zone", "zoneID": ["zoneName": "Notes"]]),
                    ("update", Self.zoneSubscription("not-there", "Notes")),
                ]))
            #expect(answer.status == 200)
            let codes = answer.json.objects("subscriptions").map { $0["serverErrorCode"] as? String }
            #expect(codes == ["BAD_REQUEST", "ZONE_NOT_FOUND", "BAD_REQUEST", "NOT_FOUND"])
        }
    }

    @Test func aMalformedRequestFailsWhole() async throws {
        try await withEmulator { server, client in
            #expect(try await client.post("subscriptions/modify", ["operations": "no"]).status == 400)
            let unknownType = try await client.post(
                "subscriptions/modify", Self.operations([("replace", Self.zoneSubscription("s", "Notes"))]))
            #expect(unknownType.status == 400)
            #expect(unknownType.json["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect(try await server.backing.subscriptions().isEmpty)
        }
    }

    @Test func aDirectoryCloudKeepsSubscriptionsAndOpensAStateFileFromBeforeThem() async throws {
        try await withTemporaryDirectory { directory in
            // A state file with no subscriptions key: what FlatSync wrote before it kept them.
            var old = CloudDatabase(serverID: 9)
            try old.createZones([ZoneID("Notes")])
            let encoded = try CloudStateFile.encode(old)
            #expect(!String(decoding: encoded, as: UTF8.self).contains("subscriptionsByID"))
            try encoded.write(to: directory.appendingPathComponent(DirectoryCloud.stateFileName))

            let cloud = try DirectoryCloud(directory: directory)
            #expect(try await cloud.subscriptions().isEmpty)
            #expect(try await cloud.listZones() == [ZoneID("Notes")])
            try await cloud.subscribeToChanges(in: [ZoneID("Notes")])
            let reopened = try DirectoryCloud(directory: directory)
            #expect(try await reopened.subscriptions() == [CloudSubscription(id: "flatsync-Notes", zone: ZoneID("Notes"))])
        }
    }
}

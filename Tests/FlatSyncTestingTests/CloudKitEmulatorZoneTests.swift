import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// Golden tests of the emulator's zone and change endpoints: raw JSON in, keys and types checked out.
// What CloudKit documents is checked as such; `purged`, `CHANGE_TOKEN_EXPIRED` and base64 sync tokens
// are emulator behaviour (the wire contract's choices).

@Suite("CKWS emulator: zones and changes")
struct CloudKitEmulatorZoneTests {
    @Test func zonesListAlwaysHasTheDefaultZoneAndAcceptsGetAndPost() async throws {
        try await withEmulator { server, client in
            let created = try await client.createZones(["Notes", "Photos"])
            #expect(created.status == 200)
            #expect(created.header("Content-Type") == "application/json; charset=utf-8")
            let zones = created.json.objects("zones")
            #expect(zones.count == 2)
            #expect(zones.first?.object("zoneID")["zoneName"] as? String == "Notes")
            #expect(zones.first?.object("zoneID")["ownerRecordName"] as? String == "_defaultOwner")
            #expect(zones.first?["atomic"] as? Bool == true)

            let listed = try await client.get("zones/list")
            #expect(listed.status == 200)
            let names = listed.json.objects("zones").map { $0.object("zoneID")["zoneName"] as? String }
            #expect(names == ["_defaultZone", "Notes", "Photos"])
            #expect(
                listed.json.objects("zones").map { $0["atomic"] as? Bool } == [false, true, true],
                "atomic applies to custom zones only (Apple's zone dictionary)")
            #expect(try await client.post("zones/list", [String: Any]()).status == 200)

            let counters = try await server.backing.counters()
            #expect(counters.requestsByKind == [.createZones: 1, .listZones: 2])
        }
    }

    @Test func zonesModifyFailsAZoneInItsEntryAndAnUnreadableRequestWholly() async throws {
        try await withEmulator { server, client in
            try await client.createZones(["Notes"])
            let deleted = try await client.post(
                "zones/modify",
                ["operations": [["operationType": "delete", "zone": ["zoneID": ["zoneName": "Notes"]]]]])
            #expect(deleted.json.objects("zones").first?["deleted"] as? Bool == true)
            #expect(try await server.backing.counters().requests(.deleteZones) == 1)

            // A zone's failure is that zone's entry in a 200, as CloudKit answers (ckws.md §3, MistKit PR
            // #443); the other operations run. (BAD_REQUEST for an empty name is the emulator's choice.)
            let partly = try await client.post(
                "zones/modify",
                [
                    "operations": [
                        ["operationType": "create", "zone": ["zoneID": ["zoneName": "Ok"]]],
                        ["operationType": "create", "zone": ["zoneID": ["zoneName": ""]]],
                        ["operationType": "create", "zone": ["zoneID": ["zoneName": "AlsoOk"]]],
                    ]
                ])
            #expect(partly.status == 200)
            let entries = partly.json.objects("zones")
            #expect(entries.map { $0.object("zoneID")["zoneName"] as? String } == ["Ok", "", "AlsoOk"])
            #expect(entries[0]["serverErrorCode"] == nil && entries[2]["serverErrorCode"] == nil)
            #expect(entries[1]["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect(Set(entries[1].keys) == ["zoneID", "serverErrorCode", "reason"], "Apple's zone error dictionary")
            let listed = try await client.get("zones/list").json.objects("zones")
            #expect(
                Set(listed.compactMap { $0.object("zoneID")["zoneName"] as? String }) == [
                    "_defaultZone", "Ok", "AlsoOk",
                ])

            let unreadable = try await client.post(
                "zones/modify",
                [
                    "operations": [
                        ["operationType": "create", "zone": ["zoneID": ["zoneName": "Later"]]],
                        ["operationType": "rename", "zone": ["zoneID": ["zoneName": "Ok"]]],
                    ]
                ])
            #expect(unreadable.status == 400)
            #expect(unreadable.json["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect(Set(unreadable.json.keys) == ["uuid", "serverErrorCode", "reason"])
            #expect(try await client.get("zones/list").json.objects("zones").count == 3, "nothing was created")
            #expect(try await server.backing.counters().requests(.createZones) == 3, "a refused request counts")
        }
    }

    @Test(arguments: [false, true])
    func databaseChangesListDeletionsFirstWithPurgedOnlyAsAGuess(guessedCodes: Bool) async throws {
        try await withEmulator(options: .init(guessedErrorCodes: guessedCodes)) { server, client in
            try await client.createZones(["Notes", "Photos", "Gone"])
            let first = try await client.post("changes/database", [String: Any]())
            #expect(first.status == 200)
            #expect(first.json["moreComing"] as? Bool == false)
            let token = try #require(first.json["syncToken"] as? String)
            #expect(Data(base64Encoded: token) != nil, "emulator behaviour: base64 of the token's bytes")
            #expect(
                Set(first.json.objects("zones").compactMap { $0.object("zoneID")["zoneName"] as? String })
                    == ["Notes", "Photos", "Gone"])

            try await server.backing.deleteZoneAsUser(ZoneID("Photos"))
            try await client.post(
                "zones/modify",
                ["operations": [["operationType": "delete", "zone": ["zoneID": ["zoneName": "Gone"]]]]])
            try await client.post(
                "zones/modify",
                [
                    "operations": [
                        ["operationType": "delete", "zone": ["zoneID": ["zoneName": "Notes"]]],
                        ["operationType": "create", "zone": ["zoneID": ["zoneName": "Notes"]]],
                    ]
                ])
            let changes = try await client.post("changes/database", ["syncToken": token])
            let zones = changes.json.objects("zones")
            let described = zones.map { zone -> String in
                let name = zone.object("zoneID")["zoneName"] as? String ?? "?"
                if zone["deleted"] as? Bool == true {
                    return name + (zone["purged"] as? Bool == true ? " purged" : " x")
                }
                return name + " changed"
            }
            // Deleted zones first (Photos purged by the user, which only the guessed `purged` flag says), then
            // changed ones: Notes is in both.
            #expect(Set(described.prefix(3)) == ["Gone x", "Notes x", guessedCodes ? "Photos purged" : "Photos x"])
            #expect(described.dropFirst(3) == ["Notes changed"])
        }
    }

    @Test(arguments: [false, true])
    func anUnusableDatabaseTokenIsExpiredAtRequestLevel(guessedCodes: Bool) async throws {
        try await withEmulator(options: .init(guessedErrorCodes: guessedCodes)) { _, client in
            for token in ["", "not base64!", Data("garbage".utf8).base64EncodedString()] {
                let response = try await client.post("changes/database", ["syncToken": token])
                #expect(response.status == 400)
                #expect(
                    response.json["serverErrorCode"] as? String
                        == (guessedCodes ? "CHANGE_TOKEN_EXPIRED" : "BAD_REQUEST")
                )
            }
            let absent = try await client.post("changes/database", ["syncToken": NSNull()])
            #expect(absent.status == 200, "null is no token, not an empty one")
        }
    }

    @Test func zoneChangesCarryEveryFieldTypeExactly() async throws {
        try await withEmulator { _, client in
            try await client.createZones(["Notes"])
            // Raw JSON text, so that big integers and odd doubles are exactly what a client would send.
            let request = #"""
                {"zoneID":{"zoneName":"Notes"},"operations":[{"operationType":"create","record":{
                  "recordName":"all","recordType":"Note","fields":{
                    "s":{"value":"héllo 👋\n","type":"STRING"},
                    "max":{"value":9223372036854775807,"type":"INT64"},
                    "min":{"value":-9223372036854775808,"type":"INT64"},
                    "d":{"value":0.30000000000000004,"type":"DOUBLE"},
                    "t":{"value":1700000000123,"type":"TIMESTAMP"},
                    "tf":{"value":1700000000123.0,"type":"TIMESTAMP"},
                    "b":{"value":"AP+A","type":"BYTES"},
                    "sl":{"value":["a",""],"type":"STRING_LIST"},
                    "il":{"value":[1,-2],"type":"INT64_LIST"},
                    "tl":{"value":[0],"type":"TIMESTAMP_LIST"},
                    "el":{"value":[],"type":"STRING_LIST"},
                    "guess":{"value":7},
                    "fsLastModifiedBy":{"value":"device-A","type":"STRING"}}}}]}
                """#
            let saved = try await client.post("records/modify", Data(request.utf8))
            #expect(saved.status == 200)
            let page = try await client.post("changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"]]]])
            #expect(page.status == 200)
            let zone = try #require(page.json.objects("zones").first)
            #expect(zone["moreComing"] as? Bool == false)
            #expect(zone["syncToken"] is String)
            let record = try #require(zone.objects("records").first)
            #expect(Set(record.keys) == recordKeys)
            #expect(record["deleted"] as? Bool == false)
            let fields = record.object("fields")
            func field(_ key: String) -> (type: String?, value: Any?) {
                (fields.object(key)["type"] as? String, fields.object(key)["value"])
            }
            #expect(field("s").type == "STRING" && field("s").value as? String == "héllo 👋\n")
            #expect(field("max").type == "INT64" && (field("max").value as? NSNumber)?.int64Value == .max)
            #expect(field("min").type == "INT64" && (field("min").value as? NSNumber)?.int64Value == .min)
            #expect(field("d").type == "DOUBLE")
            #expect(field("t").type == "TIMESTAMP" && "\(field("t").value!)" == "1700000000123", "integer milliseconds")
            #expect("\(field("tf").value!)" == "1700000000123")
            #expect(field("b").type == "BYTES" && field("b").value as? String == "AP+A")
            #expect(field("sl").type == "STRING_LIST" && field("sl").value as? [String] == ["a", ""])
            #expect(field("il").type == "INT64_LIST")
            #expect(field("tl").type == "TIMESTAMP_LIST")
            #expect(field("el").type == "STRING_LIST" && (field("el").value as? [Any])?.isEmpty == true)
            #expect(field("guess").type == "INT64", "an untyped integer is an INT64, as CKWS guesses")
            // The writer: a reserved field; modified.deviceID is the server's, which cannot know FlatSync's IDs.
            #expect(field("fsLastModifiedBy").value as? String == "device-A")
            #expect(record.object("modified")["deviceID"] as? String == "_emulator-device")
            #expect(
                record.object("modified")["userRecordName"] as? String
                    == CloudKitWebServicesServer.Options.defaultUserRecordName)
            #expect(record.object("modified")["timestamp"] is NSNumber)

            // The exact text of the numbers on the wire.
            let text = String(decoding: page.body, as: UTF8.self)
            #expect(text.contains("9223372036854775807") && text.contains("-9223372036854775808"))
            #expect(text.contains("0.30000000000000004"))
        }
    }

    @Test func theWriterIsKeptApartFromTheFieldsOnTheServer() async throws {
        let cloud = InMemoryCloud()
        try await withEmulator(backing: cloud) { _, client in
            try await client.createZones(["Notes"])
            try await client.modify(
                "Notes",
                [
                    operation(
                        "create", "a",
                        fields: [
                            "v": ["value": 1, "type": "INT64"], "fsLastModifiedBy": ["value": "dev", "type": "STRING"],
                        ])
                ])
            let stored = try #require(await cloud.records(in: ZoneID("Notes")).first)
            #expect(stored.lastModifiedBy == "dev")
            #expect(stored.fields == ["v": .int(1)])
        }
    }

    @Test func zoneChangesReportTombstonesAndPerZoneErrorsInsideA200() async throws {
        try await withEmulator { server, client in
            try await client.createZones(["Notes", "Purged"])
            try await server.backing.deleteZoneAsUser(ZoneID("Purged"))
            let saved = try await client.modify("Notes", [operation("create", "a"), operation("create", "b")])
            let tagOfA = try #require(saved.json.objects("records").first?["recordChangeTag"] as? String)
            let first = try await client.post("changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"]]]])
            let token = try #require(first.json.objects("zones").first?["syncToken"] as? String)
            try await client.modify("Notes", [operation("delete", "a", tag: tagOfA)])
            let countersBefore = try await server.backing.counters()

            let page = try await client.post(
                "changes/zone",
                [
                    "zones": [
                        ["zoneID": ["zoneName": "Notes"], "syncToken": token],
                        ["zoneID": ["zoneName": "Missing"]],
                        ["zoneID": ["zoneName": "Notes"], "syncToken": ""],
                        ["zoneID": ["zoneName": "Purged"]],
                    ]
                ])
            #expect(page.status == 200)
            let zones = page.json.objects("zones")
            #expect(zones.count == 4)
            let tombstones = zones[0].objects("records")
            #expect(tombstones.count == 1)
            #expect(tombstones.first?["recordName"] as? String == "a")
            #expect(tombstones.first?["deleted"] as? Bool == true)
            #expect(Set(tombstones.first?.keys ?? [:].keys) == ["recordName", "deleted"])
            #expect(zones[1]["serverErrorCode"] as? String == "ZONE_NOT_FOUND")
            #expect(zones[1].object("zoneID")["zoneName"] as? String == "Missing")
            #expect(zones[1]["reason"] is String)
            #expect(
                Set(zones[1].keys) == ["zoneID", "serverErrorCode", "reason"],
                "Apple's zone fetch error dictionary has no uuid, unlike a record's")
            #expect(zones[2]["serverErrorCode"] as? String == "BAD_REQUEST", "\"\" is a token, and unusable")
            #expect(zones[3]["serverErrorCode"] as? String == "ZONE_NOT_FOUND", "the user's deletion has no code")
            let counters = try await server.backing.counters()
            #expect(counters.requests(.fetchZoneChanges) == countersBefore.requests(.fetchZoneChanges) + 1)
        }
    }

    /// `changes/database` pages by `resultsLimit` (and by the backing cloud's own limit) with `moreComing`
    /// and a token that goes on, as CloudKit documents the loop (ckws.md).
    @Test func databaseChangesPageWithMoreComing() async throws {
        let cloud = InMemoryCloud()
        try await withEmulator(backing: cloud) { _, client in
            try await client.createZones(["A", "B", "C"])
            var names: [String] = []
            var token: String?
            var pages: [Bool] = []
            repeat {
                var body: [String: Any] = ["resultsLimit": 2]
                if let token { body["syncToken"] = token }
                let page = try await client.post("changes/database", body)
                #expect(page.status == 200)
                names += page.json.objects("zones").compactMap { $0.object("zoneID")["zoneName"] as? String }
                token = page.json["syncToken"] as? String
                pages.append(page.json["moreComing"] as? Bool ?? false)
            } while pages.last == true
            #expect(names == ["A", "B", "C"])
            #expect(pages == [true, false])

            await cloud.setDatabaseChangesLimit(1)
            let capped = try await client.post("changes/database", ["resultsLimit": 200])
            #expect(capped.json.objects("zones").count == 1, "the server's own limit")
            #expect(capped.json["moreComing"] as? Bool == true)
        }
    }

    /// Clamping is emulator behaviour: whether CloudKit clamps a larger limit or refuses it is not known
    /// (ckws.md §6); Apple documents 200 as the most one page holds.
    @Test func resultsLimitIsClampedTo200AndMustBePositive() async throws {
        try await withEmulator { _, client in
            try await client.createZones(["Notes"])
            for batch in 0..<2 {
                let operations = (0..<125).map { operation("create", "r\(batch)-\($0)") }
                #expect(try await client.modify("Notes", operations).status == 200)
            }
            let page = try await client.post(
                "changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"]]], "resultsLimit": 1_000])
            let zone = try #require(page.json.objects("zones").first)
            #expect(zone.objects("records").count == 200)
            #expect(zone["moreComing"] as? Bool == true)
            let perZone = try await client.post(
                "changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"], "resultsLimit": 7]], "resultsLimit": 100])
            #expect(perZone.json.objects("zones").first?.objects("records").count == 7, "the zone's limit wins")

            let refused = try await client.post(
                "changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"]]], "resultsLimit": 0])
            #expect(refused.status == 400)
            #expect(refused.json["serverErrorCode"] as? String == "BAD_REQUEST")
        }
    }
}

import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The emulator's administration endpoints (`/_admin/…`, not CloudKit) through HTTPCloudAdministration:
// each call does to the backing store what the CloudAdministration call does, and none is counted.

@Suite("CKWS emulator: administration")
struct CloudKitEmulatorAdminTests {
    @Test func countersAndFaultPlansRoundTripAndAdministrationIsNotCounted() async throws {
        try await withEmulator { server, client in
            let admin = HTTPCloudAdministration(baseURL: server.baseURL)
            try await client.createZones(["Notes"])
            try await client.modify("Notes", [operation("create", "a")])
            let counters = try await admin.counters()
            #expect(counters == (try await server.backing.counters()))
            #expect(counters.requestsByKind == [.createZones: 1, .modifyRecords: 1])

            let plan = FaultPlan.failNext(2, .modifyRecords, with: .zoneBusy, retryAfter: .milliseconds(1_500))
                .then(.random(rate: 0.25, seed: 9, kinds: [.listZones]))
            try await admin.setFaultPlan(plan)
            #expect(try await admin.faultPlan() == plan)
            #expect(try await server.backing.faultPlan() == plan)
            let busy = try await client.modify("Notes", [operation("create", "b")])
            #expect(busy.json["serverErrorCode"] as? String == "TRY_AGAIN_LATER", "a busy zone has no code of its own")
            #expect(try await admin.faultPlan().scripted.first?.count == 1)
            try await admin.setFaultPlan(.none)

            _ = try await admin.records(in: ZoneID("Notes"))
            try await admin.expireChangeTokens(in: ZoneID("Notes"))
            #expect(try await admin.counters().requests == 3, "administration calls are not counted")
            try await admin.resetCounters()
            #expect(try await admin.counters() == CloudCounters())
        }
    }

    @Test func recordsComeBackWithTheirFieldsTagsAndWriter() async throws {
        try await withEmulator { server, client in
            let admin = HTTPCloudAdministration(baseURL: server.baseURL)
            try await client.createZones(["Notes"])
            try await client.modify(
                "Notes",
                [
                    operation(
                        "create", "a",
                        fields: [
                            "n": ["value": 5, "type": "INT64"], "t": ["value": 1_000, "type": "TIMESTAMP"],
                            "fsLastModifiedBy": ["value": "dev", "type": "STRING"],
                        ])
                ])
            let records = try await admin.records(in: ZoneID("Notes"))
            #expect(records == (try await server.backing.records(in: ZoneID("Notes"))))
            #expect(records.first?.fields == ["n": .int(5), "t": .date(Date(timeIntervalSince1970: 1))])
            #expect(records.first?.lastModifiedBy == "dev")
            #expect(records.first?.changeTag != nil)
            #expect(try await admin.records(in: ZoneID("Nowhere")).isEmpty)
        }
    }

    @Test func expiringTokensMakesFetchesFailAsExpired() async throws {
        try await withEmulator { server, client in
            let admin = HTTPCloudAdministration(baseURL: server.baseURL)
            try await client.createZones(["Notes"])
            let database = try #require(try await client.post("changes/database", [String: Any]()).json["syncToken"])
            let zonePage = try await client.post("changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"]]]])
            let zoneToken = try #require(zonePage.json.objects("zones").first?["syncToken"])

            try await admin.expireChangeTokens(in: ZoneID("Notes"))
            let zone = try await client.post(
                "changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"], "syncToken": zoneToken]]])
            #expect(zone.json.objects("zones").first?["serverErrorCode"] as? String == "BAD_REQUEST")
            #expect(try await client.post("changes/database", ["syncToken": database]).status == 200)

            try await admin.expireAllChangeTokens()
            let all = try await client.post("changes/database", ["syncToken": database])
            #expect(all.json["serverErrorCode"] as? String == "BAD_REQUEST", "CloudKit documents no code for it")
        }
    }

    @Test func theHistoryLimitExpiresOlderTokens() async throws {
        try await withEmulator { server, client in
            let admin = HTTPCloudAdministration(baseURL: server.baseURL)
            try await client.createZones(["Notes"])
            let page = try await client.post("changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"]]]])
            let token = try #require(page.json.objects("zones").first?["syncToken"])
            try await admin.setChangeHistoryLimit(1)
            try await client.modify("Notes", [operation("create", "a"), operation("create", "b")])
            let expired = try await client.post(
                "changes/zone", ["zones": [["zoneID": ["zoneName": "Notes"], "syncToken": token]]])
            #expect(expired.json.objects("zones").first?["serverErrorCode"] as? String == "BAD_REQUEST")
            try await admin.setChangeHistoryLimit(nil)
            #expect(try await server.backing.counters().requests(.fetchZoneChanges) == 2)

            let negative = try await client.send(
                "POST", path: "/_admin/history-limit", body: Data(#"{"limit":-1}"#.utf8))
            #expect(negative.status == 400)
            #expect(negative.json["serverErrorCode"] as? String == "BAD_REQUEST")
        }
    }

    @Test func deletingAZoneAsTheUserShowsOnTheWire() async throws {
        try await withEmulator { server, client in
            let admin = HTTPCloudAdministration(baseURL: server.baseURL)
            try await client.createZones(["Notes"])
            try await admin.deleteZoneAsUser(ZoneID("Notes"))
            let refused = try await client.modify("Notes", [operation("create", "a")])
            #expect(refused.json.objects("records").first?["serverErrorCode"] as? String == "ZONE_NOT_FOUND")

            await #expect {
                try await admin.deleteZoneAsUser(ZoneID("Notes"))
            } throws: { error in
                (error as? CloudError)?.code == .zoneNotFound
                    && (error as? CloudError)?.serverErrorCode == "ZONE_NOT_FOUND"
            }
        }
    }

    @Test func malformedAdministrationRequestsAreRefused() async throws {
        try await withEmulator { _, client in
            let badPlan = try await client.send("POST", path: "/_admin/faults", body: Data(#"{"scripted":7}"#.utf8))
            #expect(badPlan.status == 400)
            #expect(try await client.send("GET", path: "/_admin/records").status == 400, "no zone")
            #expect(try await client.send("GET", path: "/_admin/reset-counters").status == 405)
            #expect(try await client.send("GET", path: "/_admin/nothing").status == 404)
            #expect(try await client.send("GET", path: "/_admin/counters").webAuthToken == nil, "not a CKWS path")
        }
    }

    @Test func anUnreachableServerIsNetworkUnavailable() async throws {
        let server = try CloudKitWebServicesServer()
        let admin = HTTPCloudAdministration(baseURL: server.baseURL)
        let reached: Result<CloudCounters, any Error>
        do {
            reached = .success(try await admin.counters())
        } catch {
            reached = .failure(error)
        }
        await server.stop()
        #expect(try reached.get() == CloudCounters())
        await #expect {
            _ = try await admin.counters()
        } throws: { error in
            (error as? CloudError)?.code == .networkUnavailable
        }
    }
}

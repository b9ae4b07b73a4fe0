import FlatSync
import FlatSyncTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

// The fault plan on the wire: each CloudError code as the status and serverErrorCode of the wire
// contract (the codes CloudKit does not document are emulator behaviour, and strict wire replaces them),
// and the network faults as connections dropped midway through a response.

@Suite("CKWS emulator: faults")
struct CloudKitEmulatorFaultTests {
    /// The wire contract's table, written out independently of the emulator's: code → (status, code Apple
    /// documents, status with the guessed codes, guessed code).
    static let table: [(CloudError.Code, Int, String, Int, String)] = [
        (.requestRateLimited, 429, "THROTTLED", 429, "THROTTLED"),
        (.serviceUnavailable, 503, "TRY_AGAIN_LATER", 503, "TRY_AGAIN_LATER"),
        (.zoneBusy, 503, "TRY_AGAIN_LATER", 503, "ZONE_BUSY"),
        (.limitExceeded, 400, "BAD_REQUEST", 400, "LIMIT_EXCEEDED"),
        (.serverRecordChanged, 409, "CONFLICT", 409, "CONFLICT"),
        (.zoneNotFound, 404, "ZONE_NOT_FOUND", 404, "ZONE_NOT_FOUND"),
        (.userDeletedZone, 404, "ZONE_NOT_FOUND", 404, "USER_DELETED_ZONE"),
        (.changeTokenExpired, 400, "BAD_REQUEST", 400, "CHANGE_TOKEN_EXPIRED"),
        (.unknownItem, 404, "NOT_FOUND", 404, "NOT_FOUND"),
        (.batchRequestFailed, 400, "ATOMIC_ERROR", 400, "ATOMIC_ERROR"),
        (.quotaExceeded, 413, "QUOTA_EXCEEDED", 413, "QUOTA_EXCEEDED"),
        (.notAuthenticated, 421, "AUTHENTICATION_REQUIRED", 421, "AUTHENTICATION_REQUIRED"),
        (.invalidArguments, 400, "BAD_REQUEST", 400, "BAD_REQUEST"),
        (.internalError, 500, "INTERNAL_ERROR", 500, "INTERNAL_ERROR"),
        (.partialFailure, 500, "INTERNAL_ERROR", 500, "INTERNAL_ERROR"),
    ]

    @Test func theTableCoversEveryCodeButTheNetworkOnes() {
        let covered = Set(Self.table.map(\.0.name))
        let rest = Set(CloudError.Code.allCases.map(\.name)).subtracting(covered)
        #expect(rest.isSubset(of: ["networkUnavailable", "networkFailure", "unexpectedServerResponse"]), "\(rest)")
    }

    @Test(arguments: [false, true])
    func everyFaultCodeGoesOutWithItsStatusCodeAndRetryAfter(guessedCodes: Bool) async throws {
        try await withEmulator(options: .init(guessedErrorCodes: guessedCodes)) { server, client in
            for (code, status, serverErrorCode, guessedStatus, guessedCode) in Self.table {
                for retryAfter: Duration? in [nil, .milliseconds(1_500)] {
                    try await server.backing.setFaultPlan(.failNext(1, .listZones, with: code, retryAfter: retryAfter))
                    let response = try await client.get("zones/list")
                    let what = "\(code) retryAfter \(String(describing: retryAfter))"
                    #expect(response.status == (guessedCodes ? guessedStatus : status), "\(what)")
                    #expect(
                        response.json["serverErrorCode"] as? String == (guessedCodes ? guessedCode : serverErrorCode))
                    #expect(response.json["reason"] is String)
                    #expect((response.json["uuid"] as? String)?.isEmpty == false)
                    #expect(response.webAuthToken != nil, "a rotated token on an error too: \(what)")
                    var keys: Set<String> = ["uuid", "serverErrorCode", "reason"]
                    if retryAfter != nil {
                        keys.insert("retryAfter")
                        #expect((response.json["retryAfter"] as? NSNumber)?.doubleValue == 1.5, "\(what)")
                        #expect(response.header("Retry-After") == "2", "whole seconds, rounded up: \(what)")
                    } else {
                        #expect(response.header("Retry-After") == nil)
                    }
                    if code == .notAuthenticated {
                        keys.insert("redirectURL")
                        #expect(
                            (response.json["redirectURL"] as? String)?.hasPrefix(server.baseURL.absoluteString) == true)
                    }
                    #expect(Set(response.json.keys) == keys, "\(what)")
                }
            }
            #expect(try await client.get("zones/list").status == 200, "the plan is used up")
            let counters = try await server.backing.counters()
            #expect(counters.totalFaultsInjected == Self.table.count * 2)
        }
    }

    @Test(arguments: [CloudError.Code.networkUnavailable, .networkFailure])
    func networkFaultsDropTheConnectionMidResponseAndApplyNothing(_ code: CloudError.Code) async throws {
        try await withEmulator { server, client in
            try await client.createZones(["Notes"])
            try await server.backing.setFaultPlan(.failNext(2, .modifyRecords, with: code))
            // On the wire: a whole header block, part of the body, then the end of the connection.
            let body = try JSONSerialization.data(
                withJSONObject: ["operations": [operation("create", "a")], "zoneID": ["zoneName": "Notes"]])
            let port = server.port
            let path = client.url("records/modify").absoluteString.replacingOccurrences(
                of: server.baseURL.absoluteString, with: "")
            let received = try await offPool { () -> String in
                let connection = try RawHTTPConnection(port: port)
                connection.send("POST \(path) HTTP/1.1\r\nContent-Length: \(body.count)\r\n\r\n")
                connection.send(body)
                return String(decoding: connection.readUntilClosed(), as: UTF8.self)
            }
            #expect(received.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(received.contains("Content-Length: 1024\r\n\r\n"))
            #expect(received.utf8.count < 1024, "cut off before the announced body ended")
            // Through URLSession: a URLError, never a response.
            await #expect(throws: URLError.self) {
                _ = try await client.modify("Notes", [operation("create", "a")])
            }
            #expect(try await server.backing.records(in: ZoneID("Notes")).isEmpty, "nothing applied")
            #expect(try await server.backing.counters().faultsInjected == [code.name: 2])
        }
    }

    @Test func aLostResponseCommitsTheChangeThenDropsTheConnection() async throws {
        try await withEmulator { server, client in
            try await client.createZones(["Notes"])
            try await client.subscribe("Notes")
            let courier = try await client.registeredCourier()
            try await server.backing.setFaultPlan(.loseResponses(1, .modifyRecords))
            await #expect(throws: URLError.self) {
                _ = try await client.modify("Notes", [operation("create", "a")])
            }
            #expect(try await server.backing.records(in: ZoneID("Notes")).map(\.id.name) == ["a"], "committed")
            #expect(try await server.backing.counters().faultsInjected == [CloudCounters.responseLostKey: 1])
            // The committed change is announced like any other.
            let poll = try await client.poll(courier)
            #expect(poll.status == 200)
            #expect(poll.json.object("ck").object("fet")["zid"] as? String == "Notes")
            // Resending the create now meets the committed record.
            let resent = try await client.modify("Notes", [operation("create", "a")])
            #expect(resent.json.objects("records").first?["serverErrorCode"] as? String == "CONFLICT")
        }
    }
}

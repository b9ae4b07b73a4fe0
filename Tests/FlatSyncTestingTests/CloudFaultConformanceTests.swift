import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The transport conformance suite, part 3: counters and fault plans (scripted, response lost, random).

@Suite("Cloud conformance: counters and faults")
struct CloudFaultConformanceTests {
    // MARK: - Counters

    @Test(arguments: CloudUnderTest.allCases)
    func countersCountRequestsAndRecordsButNotAdministration(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            #expect(try await cloud.counters() == CloudCounters())
            try await cloud.createZones([.notes])
            _ = try await cloud.listZones()
            _ = try await cloud.listZones()
            try await cloud.save([makeRecord("a"), makeRecord("b"), makeRecord("c")])
            try await cloud.forceDelete(["a", "missing"])
            _ = try await cloud.lookupRecords([recordID("b"), recordID("missing")])
            _ = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 100)
            _ = try await cloud.fetchDatabaseChanges(since: nil)

            // Administration is neither counted nor faulted.
            _ = try await cloud.records(in: .notes)
            _ = try await cloud.faultPlan()
            try await cloud.expireChangeTokens(in: .notes)
            _ = try await cloud.counters()

            let counters = try await cloud.counters()
            #expect(
                counters.requestsByKind == [
                    .createZones: 1, .listZones: 2, .modifyRecords: 2, .lookupRecords: 1,
                    .fetchZoneChanges: 1, .fetchDatabaseChanges: 1,
                ])
            #expect(counters.requests == 8)
            #expect(counters.modifyRequests == 2)
            #expect(counters.requests(.deleteZones) == 0)
            #expect(counters.recordsSaved == 3)
            #expect(counters.recordsDeleted == 1, "deleting a missing record removes nothing")
            #expect(counters.recordsReturned == 1 + 2, "one looked up, two fetched")
            #expect(counters.faultsInjected.isEmpty)

            try await cloud.resetCounters()
            #expect(try await cloud.counters() == CloudCounters())
            #expect(try await cloud.records(in: .notes).count == 2, "resetting counters keeps the data")
        }
    }

    // MARK: - Scripted faults

    @Test(arguments: CloudUnderTest.allCases)
    func scriptedFaultsFailTheNextRequestsOfAKindThenStop(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.setFaultPlan(.failNext(2, .modifyRecords, with: .zoneBusy, retryAfter: .seconds(2)))
            #expect(try await cloud.faultPlan().scripted.first?.count == 2)

            _ = try await cloud.listZones()  // another kind: unaffected
            for attempt in 1...2 {
                let error = await expectCloudError(kind.seen(.zoneBusy)) { try await cloud.save([makeRecord("a")]) }
                #expect(error?.retryAfter == .seconds(2), "attempt \(attempt)")
                #expect(error?.isTransient == true)
            }
            #expect(try await cloud.records(in: .notes).isEmpty, "a failed request applies nothing")
            _ = try await cloud.saveOne(makeRecord("a"))

            #expect(try await cloud.faultPlan() == .none, "the scripted faults are used up")
            let counters = try await cloud.counters()
            #expect(counters.modifyRequests == 3)
            #expect(counters.faultsInjected == ["zoneBusy": 2])
            #expect(counters.recordsSaved == 1)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func scriptedFaultsAreUsedInOrderAndCanHitAnyKind(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.setFaultPlan(
                .failNext(1, with: .serviceUnavailable)
                    .then(.failNext(1, .fetchDatabaseChanges, with: .notAuthenticated))
                    .then(.failNext(1, with: .requestRateLimited, retryAfter: .milliseconds(1_500)))
            )
            await expectCloudError(.serviceUnavailable) { try await cloud.createZones([.notes]) }
            let limited = await expectCloudError(.requestRateLimited) { _ = try await cloud.listZones() }
            #expect(limited?.retryAfter == .milliseconds(1_500))
            await expectCloudError(.notAuthenticated) { _ = try await cloud.fetchDatabaseChanges(since: nil) }
            #expect(try await cloud.listZones() == [], "the first request was never applied")
            #expect(try await cloud.faultPlan().isEmpty)
            #expect(try await cloud.counters().totalFaultsInjected == 3)
        }
    }

    // MARK: - Lost responses

    @Test(arguments: CloudUnderTest.allCases)
    func aLostResponseCommitsTheSaveAndTheResendFindsIt(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.setFaultPlan(.loseResponses(1, .modifyRecords))
            let created = makeRecord("a", ["v": .int(1)])
            await expectCloudError(.networkFailure) { try await cloud.save([created]) }
            let stored = try #require(try await cloud.records(in: .notes).first, "the save was committed")
            #expect(stored.hasSameContent(as: created))

            // Resending the create: the server has it, and says so with its record, which the sender
            // recognises as its own write.
            let resent = try await cloud.save([created])
            let conflict = try #require(resent.failed[created.id])
            #expect(conflict.code == .serverRecordChanged)
            #expect(conflict.serverRecord == stored)
            #expect(conflict.serverRecord?.hasSameContent(as: created) == true)

            // The same for an update sent with the tag it started from.
            var update = stored
            update["v"] = .int(2)
            try await cloud.setFaultPlan(.loseResponses(1, .modifyRecords))
            await expectCloudError(.networkFailure) { try await cloud.save([update]) }
            let again = try await cloud.save([update])
            #expect(again.failed[update.id]?.code == .serverRecordChanged)
            #expect(again.failed[update.id]?.serverRecord?.fields == ["v": .int(2)])

            let counters = try await cloud.counters()
            #expect(counters.faultsInjected == [CloudCounters.responseLostKey: 2])
            #expect(counters.recordsSaved == 2)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aLostResponseCommitsTheDeleteAndTheResendSucceeds(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let saved = try await cloud.saveOne(makeRecord("a"))
            try await cloud.setFaultPlan(.loseResponses(1, .modifyRecords))
            let deletion = RecordDeletion(saved.id, changeTag: saved.changeTag)
            await expectCloudError(.networkFailure) { try await cloud.delete([deletion]) }
            #expect(try await cloud.records(in: .notes).isEmpty, "the delete was committed")

            let resent = try await cloud.delete([deletion])
            #expect(resent.deleted == [saved.id])
            #expect(resent.failed.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aLostResponseOfARefusedRequestStillReportsNetworkFailure(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.setFaultPlan(.loseResponses(1, .modifyRecords))
            // A request every client sends and every server refuses: a record over 1 MB.
            let large = makeRecord("large", ["blob": .string(String(repeating: "x", count: 1_048_577))])
            await expectCloudError(.networkFailure) { try await cloud.save([large]) }
            #expect(try await cloud.records(in: .notes).isEmpty)
        }
    }

    // MARK: - Faults for a named record

    @Test(arguments: CloudUnderTest.allCases)
    func aFaultForANamedRecordRefusesItAndSavesTheRestOfItsRequest(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            try await cloud.setFaultPlan(.failRecord(named: "b", in: .notes, with: .invalidArguments))
            // Requests without the record pass untouched and leave the count alone: a modify without it, one
            // with a "b" in another zone, and a lookup of it.
            #expect(try await cloud.save([makeRecord("a"), makeRecord("c")]).failed.isEmpty)
            _ = try await cloud.saveOne(makeRecord("b", in: .photos))
            _ = try await cloud.lookupRecords([recordID("b")])
            #expect(try await cloud.faultPlan().scripted.map(\.count) == [1])

            // Not first in its request: the fault picks it by name.
            let result = try await cloud.save([makeRecord("a2"), makeRecord("b"), makeRecord("d")])
            #expect(result.failed.keys.map(\.name) == ["b"])
            #expect(result.failed[recordID("b")]?.code == kind.seen(.invalidArguments))
            #expect(Set(result.saved.keys) == [recordID("a2"), recordID("d")])
            #expect(try await cloud.records(in: .notes).map(\.id.name) == ["a", "a2", "c", "d"])
            #expect(try await cloud.faultPlan() == .none, "used up")
            #expect(try await cloud.counters().faultsInjected == ["invalidArguments (one record or zone)": 1])
            _ = try await cloud.saveOne(makeRecord("b"))
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aFaultForANamedRecordRefusesItsDeleteAndFailsAnAtomicRequest(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.save([makeRecord("a"), makeRecord("b")])
            try await cloud.setFaultPlan(.failRecord(named: "b", with: .internalError, times: 2))
            let deleted = try await cloud.forceDelete(["a", "b"])
            #expect(deleted.deleted == [recordID("a")])
            #expect(deleted.failed[recordID("b")]?.code == kind.seen(.internalError))

            let atomic = try await cloud.save(
                [makeRecord("x"), makeRecord("b", ["value": .string("new")])], atomically: true)
            #expect(atomic.failed[recordID("b")]?.code == kind.seen(.internalError))
            #expect(atomic.failed[recordID("x")]?.code == .batchRequestFailed)
            #expect(try await cloud.records(in: .notes).map(\.id.name) == ["b"])
            #expect(try await cloud.faultPlan().isEmpty)
        }
    }

    /// A targeted fault that a request passes by does not hide the faults after it, and a targeted fault
    /// of any effect fails only the request that holds its record.
    @Test(arguments: CloudUnderTest.allCases)
    func aTargetedFaultStandsAsideForRequestsWithoutItsRecord(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let wholeRequest = ScriptedFault(
                kind: nil, count: 1, effect: .error(.serviceUnavailable), target: FaultTarget(recordName: "x"))
            try await cloud.setFaultPlan(
                .failRecord(named: "b", with: .invalidArguments)
                    .then(FaultPlan(scripted: [wholeRequest]))
                    .then(.failNext(1, .modifyRecords, with: .quotaExceeded)))
            await expectCloudError(.quotaExceeded) { try await cloud.save([makeRecord("a")]) }
            _ = try await cloud.listZones()
            await expectCloudError(.serviceUnavailable) { try await cloud.save([makeRecord("a"), makeRecord("x")]) }
            #expect(try await cloud.records(in: .notes).isEmpty, "the whole request failed")
            #expect(try await cloud.faultPlan().scripted.map(\.target?.recordName) == ["b"])
        }
    }

    // MARK: - Random faults

    /// What happens to each of a fixed series of requests under a seeded random plan.
    private func outcomes(_ kind: CloudUnderTest, seed: UInt64, requests: Int = 60) async throws -> [String] {
        var outcomes: [String] = []
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.setFaultPlan(.random(rate: 0.5, seed: seed))
            outcomes = try await Self.outcomes(of: requests, [cloud])
        }
        return outcomes
    }

    /// Sends `count` requests, taking the clouds in turn, and names what happened to each.
    static func outcomes(of count: Int, _ clouds: [any TestCloud]) async throws -> [String] {
        var outcomes: [String] = []
        for index in 0..<count {
            let cloud = clouds[index % clouds.count]
            do {
                if index.isMultiple(of: 2) {
                    _ = try await cloud.listZones()
                } else {
                    try await cloud.save([makeRecord("r\(index)")])
                }
                outcomes.append("ok")
            } catch let error as CloudError {
                outcomes.append(error.retryAfter.map { "\(error.code) after \($0)" } ?? error.code.name)
            }
        }
        return outcomes
    }

    @Test(arguments: CloudUnderTest.allCases)
    func randomFaultsRepeatForASeed(_ kind: CloudUnderTest) async throws {
        let first = try await outcomes(kind, seed: 7)
        let again = try await outcomes(kind, seed: 7)
        let other = try await outcomes(kind, seed: 8)
        #expect(first == again)
        #expect(first != other)
        #expect(first.contains("ok") && first.contains { $0 != "ok" }, "\(first)")
        #expect(Set(first).count > 3, "several kinds of fault: \(Set(first))")
    }

    @Test(arguments: CloudUnderTest.allCases)
    func randomFaultsHitOnlyTheChosenKindsAndCodes(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.setFaultPlan(
                .random(rate: 1, seed: 1, effects: [.error(.quotaExceeded)], kinds: [.modifyRecords]))
            for _ in 0..<5 {
                _ = try await cloud.listZones()
                await expectCloudError(.quotaExceeded) { try await cloud.save([makeRecord("a")]) }
            }
            try await cloud.setFaultPlan(.random(rate: 0, seed: 1))
            _ = try await cloud.saveOne(makeRecord("a"))
            #expect(try await cloud.counters().faultsInjected == ["quotaExceeded": 5])
        }
    }
}

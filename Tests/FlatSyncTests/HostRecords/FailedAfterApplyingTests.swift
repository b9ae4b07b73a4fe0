import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

/// Requests the server applied and then answered with an error that is not a lost answer (a gateway's 502 or
/// 504, a 500, an answer that does not read): what the engine must not take as "nothing was applied".
@Suite struct FailedAfterApplyingTests {
    private let configure: (inout SyncContext.Configuration) -> Void = { $0.recordTypes = [Tally.self] }

    /// A record of a `records/modify` answer that does not read (CKWS: a 200 whose entry for the save lacks
    /// what a record needs, or has no entry for it) is as doubtful as a whole request answered by a gateway:
    /// the server saved it. Under another device's version that holds the save, the merge must not get the
    /// version before the save as its ancestor (which counts A's +2 twice: 10); the larger count, 8, as for a
    /// lost answer.
    @Test func aSaveWhoseAnswerDoesNotReadHasNoKnownAncestor() async throws {
        try await SyncHarness.run { harness in
            let armed = Mutex(false)
            let transport = InterceptingTransport(
                harness.transport("A"),
                modifyResult: { _, result in
                    guard armed.withLock({ $0 }) else { return result }
                    armed.withLock { $0 = false }
                    var answer = result
                    for id in result.saved.keys {
                        answer.saved[id] = nil
                        answer.failed[id] = CloudError(
                            .unexpectedServerResponse, "CloudKit's answer to records/modify could not be read")
                    }
                    return answer
                })
            let a = try await harness.device("A", transport: transport, start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            try await startTally(on: a, b)
            try await a.records(Tally.self).save(Tally(id: "t", count: 7))  // +2, saved, answer unreadable
            armed.withLock { $0 = true }
            await harness.cloud.setFaultPlan(.failNext(1, .fetchDatabaseChanges, with: .networkUnavailable))
            #expect(try await !a.syncNow().isComplete)
            #expect(await harness.serverTally() == .int(7))
            try await incrementOnB(then: a, b, settleAt: 8, harness: harness)
        }
    }

    /// Deleted and saved again (the save stands for the delete, replacing the server's record, which deletes
    /// nothing there: the steps' deletes are sent as the user's own), and the server applied the replace but
    /// answered with an error. The fetch that follows brings the replace back as this device's own version;
    /// the steps must still go, as they do when the answer comes.
    @Test(arguments: [
        FaultPlan.failAfterApplying(with: .serviceUnavailable), .failAfterApplying(with: .internalError),
        .failAfterApplying(with: .unexpectedServerResponse), .loseResponses(1),
    ])
    func aRecipeSavedAgainWhoseReplaceWasAnsweredByAnErrorLeavesItsOldStepsDeleted(fault: FaultPlan) async throws {
        try await SyncHarness.run { harness in
            let (a, b) = try await twoDevicesWithARecipe(harness, start: false)
            await harness.cloud.setFaultPlan(fault)
            try await a.records(TestRecipe.self).delete("r1")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r1", title: "New soup"))
            #expect(try await !a.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            let names = await harness.cloud.records(in: TestRecipe.zone).map(\.id.name).sorted()
            #expect(names == ["r1", "r2"], "\(fault)")
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).value("r1")?.title == "New soup")
                let steps = await device.records(TestStep.self).values().map(\.id).sorted()
                #expect(steps.isEmpty, "\(fault): steps \(steps) came back")
            }
            try await a.close()
            try await b.close()
        }
    }
}

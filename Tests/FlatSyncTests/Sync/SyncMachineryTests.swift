import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync

@Suite struct AsyncSerialQueueTests {
    @Test func jobsRunOneAtATimeInOrder() async {
        let queue = AsyncSerialQueue()
        let log = Mutex<[String]>([])
        for i in 0..<50 {
            queue.enqueue {
                log.withLock { $0.append("start \(i)") }
                await Task.yield()
                await Task.yield()
                log.withLock { $0.append("end \(i)") }
            }
        }
        await queue.waitUntilEmpty()
        let expected = (0..<50).flatMap { ["start \($0)", "end \($0)"] }
        #expect(log.withLock { $0 } == expected)
        #expect(queue.isEmpty)
    }

    @Test func performReturnsEachJobsResultAfterTheJobsBeforeIt() async throws {
        let queue = AsyncSerialQueue()
        let order = Mutex<[Int]>([])
        queue.enqueue { order.withLock { $0.append(1) } }
        let value = try await queue.perform { () -> Int in
            order.withLock { $0.append(2) }
            return 42
        }
        #expect(value == 42)
        #expect(order.withLock { $0 } == [1, 2])
        await #expect(throws: CocoaError.self) {
            try await queue.perform { () -> Int in throw CocoaError(.fileNoSuchFile) }
        }
    }

    @Test func cancelAllDropsWaitingJobsAndCancelsTheRunningOne() async throws {
        let queue = AsyncSerialQueue()
        let started = Gate()
        let release = Gate()
        let sawCancellation = Mutex(false)
        queue.enqueue {
            started.open()
            await release.wait()
            sawCancellation.withLock { $0 = Task.isCancelled }
        }
        let dropped = Task { try await queue.perform { 1 } }
        await started.wait()
        #expect(queue.count == 2)
        queue.cancelAll()
        release.open()
        await #expect(throws: CancellationError.self) { try await dropped.value }
        await queue.waitUntilEmpty()
        #expect(sawCancellation.withLock { $0 })
        // The queue keeps working afterwards.
        #expect(try await queue.perform { 7 } == 7)
    }

    @Test func waitUntilEmptyReturnsAtOnceWhenIdle() async {
        await AsyncSerialQueue().waitUntilEmpty()
    }
}

@Suite struct SyncTriggerTests {
    @Test func requestsCoalesceIntoAtMostOneFollowUp() {
        var trigger = SyncTrigger()
        var answers: [Bool] = []
        answers.append(trigger.request())  // idle: queue a run
        answers.append(trigger.request())  // already queued
        trigger.started()
        for _ in 0..<50 { answers.append(trigger.request()) }  // running: remember one follow-up
        answers.append(trigger.finished())  // one follow-up for all of them
        trigger.started()
        answers.append(trigger.finished())  // nothing asked meanwhile
        #expect(answers == [true, false] + Array(repeating: false, count: 50) + [true, false])
        #expect(!trigger.isBusy)
        let queued = trigger.request()
        #expect(queued && trigger.isBusy)
        trigger.reset()
        #expect(!trigger.isBusy)
    }
}

@Suite struct RetryPolicyTests {
    @Test func backoffDoublesFromOneSecondUpToFiveMinutes() {
        let policy = RetryPolicy(jitter: 0)
        let delays = (1...12).map { policy.delay(afterFailures: $0, retryAfter: nil, random: 0.7) }
        #expect(Array(delays.prefix(9)) == [1, 2, 4, 8, 16, 32, 64, 128, 256].map { Duration.seconds($0) })
        #expect(delays.dropFirst(9).allSatisfy { $0 == .seconds(300) })
    }

    @Test func jitterShortensTheDelayByUpToItsFraction() {
        let policy = RetryPolicy.default
        #expect(policy.delay(afterFailures: 3, retryAfter: nil, random: 0) == .seconds(4))
        #expect(policy.delay(afterFailures: 3, retryAfter: nil, random: 0.5) == .seconds(3))
        #expect(policy.delay(afterFailures: 3, retryAfter: nil, random: 0.999) > .seconds(2))
    }

    @Test func retryAfterIsHonouredAsGiven() {
        #expect(RetryPolicy.default.delay(afterFailures: 9, retryAfter: .seconds(7), random: 0.3) == .seconds(7))
    }
}

@Suite struct CloudErrorPolicyTests {
    @Test func everyCodeMapsToItsRowOfTheTable() {
        typealias A = CloudErrorPolicy.Action
        let server = Record(id: RecordID(zone: .readingList, name: "rl-x"), type: "ReadingListEntry")
        let expected: [(CloudError, A)] = [
            (CloudError(.networkUnavailable), .waitForNetwork),
            (CloudError(.networkFailure), .waitForNetwork),
            (CloudError(.serviceUnavailable, retryAfter: .seconds(3)), .retryLater(after: .seconds(3))),
            (CloudError(.requestRateLimited), .retryLater(after: nil)),
            (CloudError(.zoneBusy, retryAfter: .seconds(1)), .retryLater(after: .seconds(1))),
            (CloudError(.batchRequestFailed), .retryLater(after: nil)),
            (CloudError(.unexpectedServerResponse), .retryLater(after: nil)),
            (CloudError(.limitExceeded), .split),
            (CloudError(.serverRecordChanged, serverRecord: server), .mergeWithServerRecord),
            (CloudError(.serverRecordChanged), .retryLater(after: nil)),
            (CloudError(.zoneNotFound), .createZone),
            (CloudError(.userDeletedZone), .wipeZone),
            (CloudError(.changeTokenExpired), .resetZone),
            (CloudError(.notAuthenticated), .pause(.notAuthenticated)),
            (CloudError(.quotaExceeded), .pause(.quotaExceeded)),
            (CloudError(.unknownItem), .recordMissing),
            (CloudError(.invalidArguments), .refuse),
            (CloudError(.internalError), .refuse),
            // Apple: without `retryAfter` "the operation can't be retried"; with it, the server says when.
            (CloudError(.invalidArguments, retryAfter: .seconds(2)), .retryLater(after: .seconds(2))),
            (CloudError(.internalError, retryAfter: .seconds(4)), .retryLater(after: .seconds(4))),
        ]
        for (error, action) in expected {
            #expect(CloudErrorPolicy.action(for: error) == action, "\(error.code)")
        }
        #expect(Set(expected.map(\.0.code)).count >= CloudError.Code.allCases.count - 1, "every code is covered")
        // A whole request: only one refused as malformed is halved and parked; an internal error retries.
        for (error, action) in expected {
            let whole = CloudErrorPolicy.requestAction(for: error)
            switch error.code {
            case .internalError where error.retryAfter == nil:
                #expect(whole == .retryLater(after: nil))
            default:
                #expect(whole == action, "\(error.code)")
            }
        }
        #expect(
            CloudErrorPolicy.requestAction(for: CloudError(.internalError, retryAfter: .seconds(3)))
                == .retryLater(after: .seconds(3)))
    }

    /// A failed request whose server may have applied it, as a gateway's 504 after a commit: its saves' fates
    /// are unknown. Only codes that say the server refused the request before acting say otherwise.
    @Test func onlyARefusalBeforeActingSaysTheRequestWasNotApplied() {
        let doubtful: Set<CloudError.Code> = [
            .networkFailure, .serviceUnavailable, .internalError, .unexpectedServerResponse,
        ]
        for code in CloudError.Code.allCases {
            #expect(
                CloudErrorPolicy.mayHaveBeenApplied(afterRequestFailedWith: CloudError(code))
                    == doubtful.contains(code),
                "\(code)")
        }
        #expect(CloudErrorPolicy.mayHaveBeenApplied(afterRequestFailedWith: CancellationError()))
    }

    /// The errors a push waits out only a few times before parking: those it would park (or, for a whole
    /// request, halve) but for their `retryAfter`.
    @Test func onlyARefusalWithRetryAfterWaitsOnlyForIt() {
        let later = Duration.seconds(2)
        #expect(CloudErrorPolicy.waitsOnlyForRetryAfter(CloudError(.invalidArguments, retryAfter: later)))
        #expect(CloudErrorPolicy.waitsOnlyForRetryAfter(CloudError(.internalError, retryAfter: later)))
        #expect(
            CloudErrorPolicy.waitsOnlyForRetryAfter(
                CloudError(.invalidArguments, retryAfter: later), wholeRequest: true))
        #expect(
            !CloudErrorPolicy.waitsOnlyForRetryAfter(CloudError(.internalError, retryAfter: later), wholeRequest: true),
            "a whole request's internal error is retried anyway")
        #expect(!CloudErrorPolicy.waitsOnlyForRetryAfter(CloudError(.requestRateLimited, retryAfter: later)))
        #expect(!CloudErrorPolicy.waitsOnlyForRetryAfter(CloudError(.invalidArguments)))
    }
}

@Suite struct TestClockTests {
    @Test func advancingWakesSleepersWhoseDeadlineCame() async throws {
        let clock = TestClock()
        let woke = Mutex<[Int]>([])
        let done = Gate()
        // The deadline is fixed before the task runs, so the outcome does not depend on when it starts
        // sleeping: before the clock reaches it, it waits; after, it returns at once.
        let deadline = clock.now.advanced(by: .seconds(5))
        let task = Task {
            try await clock.sleep(until: deadline)
            woke.withLock { $0.append(5) }
            done.open()
        }
        clock.advance(by: .seconds(4))
        #expect(woke.withLock { $0.isEmpty })
        clock.advance(by: .seconds(1))
        await done.wait()
        #expect(woke.withLock { $0 } == [5])
        try await task.value
        // A deadline already passed returns at once.
        try await clock.sleep(until: clock.now.advanced(by: .seconds(-1)))
    }

    @Test func cancellingASleeperThrows() async {
        let clock = TestClock()
        let task = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(60))) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }
}

/// Which saves a push round holds back for owners not yet on the server: no disk, no clock.
@Suite struct HoldBackTests {
    private let zone = ZoneID("Z")

    private func save(_ name: String) -> RecordChange {
        .save(Record(id: RecordID(zone: zone, name: name), type: "T", fields: [:]), changedKeys: [], sequence: 1)
    }

    private func id(_ name: String) -> RecordID { RecordID(zone: zone, name: name) }

    private func round(_ names: [String], waits: [String: [String]]) -> [String] {
        var changes = names.map(save)
        let waits = Dictionary(uniqueKeysWithValues: waits.map { (id($0.key), Set($0.value.map(id))) })
        SyncContext.holdBack(&changes, waitingFor: waits)
        return changes.map(\.recordID.name)
    }

    @Test func ownersGoFirstAndWhatWaitsForThemNextRound() {
        #expect(round(["album", "photo", "comment"], waits: ["photo": ["album"], "comment": ["photo"]]) == ["album"])
    }

    /// The album parked (not in the round): its photos and their comments wait, the chain is no circle.
    @Test func aChainEndingAtAParkedOwnerWaitsWhole() {
        #expect(round(["photo", "comment", "other"], waits: ["photo": ["album"], "comment": ["photo"]]) == ["other"])
        #expect(round(["photo", "comment"], waits: ["photo": ["album"], "comment": ["photo"]]).isEmpty)
    }

    /// Records that wait only for each other would never go: they go together.
    @Test func aCircleGoesTogether() {
        #expect(round(["a", "b"], waits: ["a": ["b"], "b": ["a"]]) == ["a", "b"])
        #expect(round(["a", "b", "c"], waits: ["a": ["b"], "b": ["a"], "c": ["a"]]) == ["a", "b", "c"])
        // A circle waiting on a parked record waits with it.
        #expect(round(["a", "b"], waits: ["a": ["b"], "b": ["a", "parked"]]).isEmpty)
    }
}

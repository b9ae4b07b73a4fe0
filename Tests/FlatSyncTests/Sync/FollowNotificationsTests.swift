import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

// `SyncContext.follow(_:)`: the context reads a notification source itself, so a host without APNs
// needs no task of its own, and a source that stopped (nobody signed in) is followed again on sign-in.

/// A source the test feeds by hand. Notifications sent while no stream is read wait for the next one, as a
/// courier keeps them for the next poll.
private final class ManualNotificationSource: CloudNotificationSource {
    private struct State {
        var current: AsyncThrowingStream<CloudNotification, any Error>.Continuation?
        var waiting: [CloudNotification] = []
        var failure: (any Error)?
        var streams = 0
        var terminations = 0
    }
    private let state = Mutex(State())

    func notifications() -> AsyncThrowingStream<CloudNotification, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: CloudNotification.self)
        continuation.onTermination = { _ in self.state.withLock { $0.terminations += 1 } }
        let failure: (any Error)? = state.withLock { state in
            state.streams += 1
            state.current = continuation
            for notification in state.waiting { continuation.yield(notification) }
            state.waiting = []
            defer { state.failure = nil }
            if state.failure != nil { state.current = nil }
            return state.failure
        }
        // Outside the lock: finishing calls `onTermination`, which takes it.
        if let failure { continuation.finish(throwing: failure) }
        return stream
    }

    func send(_ notification: CloudNotification) {
        state.withLock { state in
            if let current = state.current {
                current.yield(notification)
            } else {
                state.waiting.append(notification)
            }
        }
    }

    /// Ends the stream being read (or the next one) with `error`, as a source does when nobody is signed in.
    func fail(with error: any Error) {
        let current = state.withLock { state in
            defer { state.current = nil }
            if state.current == nil { state.failure = error }
            return state.current
        }
        current?.finish(throwing: error)
    }

    var streams: Int { state.withLock { $0.streams } }
    var terminations: Int { state.withLock { $0.terminations } }
}

/// A source that counts the streams asked of it and those ended; its streams yield nothing.
private final class CountingSource: CloudNotificationSource {
    let name: String
    let log: StreamLog?
    private let counts = Mutex((streams: 0, terminations: 0))
    init(_ name: String, log: StreamLog? = nil) {
        self.name = name
        self.log = log
    }
    func notifications() -> AsyncThrowingStream<CloudNotification, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: CloudNotification.self)
        continuation.onTermination = { _ in self.counts.withLock { $0.terminations += 1 } }
        counts.withLock { $0.streams += 1 }
        log?.names.withLock { $0.append(name) }
        return stream
    }
    var streams: Int { counts.withLock { $0.streams } }
    var terminations: Int { counts.withLock { $0.terminations } }
}

/// The names of the sources whose streams were asked for, in order.
private final class StreamLog: Sendable {
    let names = Mutex<[String]>([])
}

/// Waits for the first event of `events` that `matches`; nil if the stream ended first.
private func firstEvent(
    in events: AsyncStream<SyncEvent>, where matches: (SyncEvent) -> Bool
) async -> SyncEvent? {
    for await event in events where matches(event) { return event }
    return nil
}

private func isFetchOfTheReadingList(_ event: SyncEvent) -> Bool {
    if case .didFetch(zone: .readingList, _, _) = event { return true }
    return false
}

private let readingListPush = CloudNotification(fetch: .zones([.readingList]), reason: .recordZone)

@Suite("Following a notification source", .timeLimit(.minutes(1)))
struct FollowNotificationsTests {

    @Test func eachNotificationOfAFollowedSourceFetchesWhatItNames() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            let source = ManualNotificationSource()
            await b.follow(source)
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            await b.waitUntilIdle()
            #expect(await !b.readingList.contains("x"), "B learns of it by the push alone")
            let events = b.events()
            source.send(readingListPush)
            #expect(await firstEvent(in: events, where: isFetchOfTheReadingList) != nil)
            await b.waitUntilIdle()
            #expect(await b.readingList.contains("x"))
            #expect(source.streams == 1)
            try await a.close()
            try await b.close()
            #expect(source.terminations == 1, "closing stops reading the source")
        }
    }

    /// A source that stops because nobody is signed in is reported, and followed again once the host names
    /// the account: a new stream, which asks for a push token of the session signed in now.
    @Test func aSourceThatStoppedIsReportedAndFollowedAgainWhenTheAccountIsNamed() async throws {
        try await SyncHarness.run { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            let source = ManualNotificationSource()
            let events = b.events()
            await b.follow(source)
            source.fail(with: CloudError(.notAuthenticated, "nobody is signed in"))
            let stopped = await firstEvent(in: events) {
                if case .error(let problem) = $0 { return problem.kind == .serverError(.notAuthenticated) }
                return false
            }
            #expect(stopped != nil)
            #expect(source.streams == 1)

            try await b.accountDidChange(to: CloudAccount(id: "user", transport: harness.transport("B")))
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            source.send(readingListPush)
            #expect(await firstEvent(in: events, where: isFetchOfTheReadingList) != nil)
            await b.waitUntilIdle()
            #expect(await b.readingList.contains("x"))
            #expect(source.streams == 2)
            try await a.close()
            try await b.close()
        }
    }

    /// Following another source stops reading the first; signing out stops reading any.
    @Test func followingAnotherSourceOrSigningOutStopsReadingTheFirst() async throws {
        try await SyncHarness.run { harness in
            let b = try await harness.device("B")
            let first = ManualNotificationSource()
            let second = ManualNotificationSource()
            await b.follow(first)
            await b.follow(second)
            #expect(first.terminations == 1)
            try await b.accountDidChange(to: nil)
            #expect(second.terminations == 1)
            try await b.close()
            #expect(second.streams == 1, "not followed again after the sign-out")
        }
    }

    /// Over CloudKit Web Services: the context follows a `LongPollNotificationSource` of its own
    /// transport, and the other device's change arrives through it (a push, or the whole fetch the source
    /// asks for once registered: B has no other reason to fetch); closing ends the poll.
    @Test func aContextFollowsTheWebCourier() async throws {
        try await SyncHarness.run(via: .http) { harness in
            let a = try await harness.device("A")
            let b = try await harness.device("B")
            let transport = try #require(harness.transport("B") as? CloudKitWebServicesTransport)
            let events = b.events()
            await b.follow(LongPollNotificationSource(transport: transport))
            try await a.readingList.add("x")
            await a.waitUntilIdle()
            for await event in events where isFetchOfTheReadingList(event) {
                if await b.readingList.contains("x") { break }
            }
            #expect(await b.readingList.contains("x"))
            try await a.close()
            try await b.close()
        }
    }

    /// Two `follow(_:)` calls at once: the source the context reads is the one it keeps, to follow again
    /// after a sign-in. (The first call used to wait for the old stream's end while the second started its
    /// source, then keep its own without reading it.)
    @Test func twoFollowsAtOnceLeaveTheSourceReadAndTheSourceKeptInAgreement() async throws {
        try await SyncHarness.run { harness in
            let b = try await harness.device("B")
            let old = CountingSource("old")
            await b.follow(old)
            let log = StreamLog()
            let x = CountingSource("x", log: log)
            let y = CountingSource("y", log: log)
            async let first: Void = b.follow(x)
            async let second: Void = b.follow(y)
            _ = await (first, second)
            try await b.accountDidChange(to: nil)  // stops reading (the task started has subscribed by then)
            let readBefore = log.names.withLock { $0.last }
            // Signing in from signed out follows the source the context kept.
            try await b.accountDidChange(to: CloudAccount(id: "user", transport: harness.transport("B")))
            try await b.close()  // waits for the task started, which has asked for its stream by then
            let readAfter = log.names.withLock { $0.last }
            #expect(readBefore == readAfter, "the source read before the sign-out is the one followed after it")
        }
    }
}

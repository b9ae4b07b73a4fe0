import FlatSync
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

/// A source that counts the streams asked of it and those ended; its streams yield nothing.
final class CountingSource: CloudNotificationSource {
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
final class StreamLog: Sendable {
    let names = Mutex<[String]>([])
}

@Suite("Review 51: follow(_:)", .timeLimit(.minutes(1)))
struct Review51FollowTests {
    /// Two `follow(_:)` calls at once: the first suspends while the old stream's task ends; the second,
    /// finding no task, starts its own source; the first then records its source as followed but starts
    /// nothing (a task runs). The context reads one source, and after a sign-out and sign-in reads the other.
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
            print("review51: streams started", log.names.withLock { $0 })
            #expect(readBefore == readAfter, "the source read before the sign-out is the one followed after it")
        }
    }
}

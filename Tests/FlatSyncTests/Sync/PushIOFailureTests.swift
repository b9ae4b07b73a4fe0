import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// What a push does when the device's own disk fails after the server confirmed the round.
@Suite struct PushIOFailureTests {
    /// The server saved the record, then the log refused the entry that lets its command go. That used to
    /// be swallowed: the round reported success while the disk was failing, and the host learned of it only
    /// from the next local write. Now the round reports it; memory has the record acknowledged, the log is
    /// rewritten from memory at the next write, and the record is neither lost nor sent twice.
    @Test func anAcknowledgementTheLogCannotTakeIsReported() async throws {
        try await SyncHarness.run { harness in
            let faulty = FaultyFileSystem()
            let transport = InterceptingTransport(harness.cloud) { kind, number in
                // Nothing writes the log between this request and its acknowledgement (the snapshot
                // written before it goes to its own file), so the next log write is that entry.
                guard kind == .modifyRecords, number == 1 else { return }
                faulty.failNext(.write, with: .ioError, pathSuffix: "commands.log")
            }
            // Not started: a started device sends "x" at once, and that push, not syncNow's, would meet the
            // failing write.
            let a = try await harness.device("A", transport: transport, start: false) {
                $0.fileSystem = FileSystem(faulty)
            }
            try await a.readingList.add("x")
            let first = try await a.syncNow()
            #expect(first.sent == 1, "the server confirmed the save")
            #expect(!first.isComplete)
            #expect(
                first.problems.contains { $0.kind == .deviceError(.ioFailed) }, "\(first.problems)")

            let second = try await a.syncNow()
            #expect(second.isComplete, "\(second.problems)")
            #expect(second.sent == 0, "the confirmed save is not sent again")
            #expect(transport.count(.modifyRecords) == 1)
            try await a.close()

            let reopened = try await harness.device("A", transport: harness.cloud, start: false)
            #expect(await reopened.localStore.pendingRecordCount() == 0)
            #expect(await reopened.readingList.contains("x"))
            let names = await harness.cloud.records(in: .readingList).map(\.id.name)
            #expect(names == ["rl-x"], "the server holds one copy")
            try await reopened.close()
        }
    }
}

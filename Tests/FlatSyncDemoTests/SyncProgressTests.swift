import FlatSync
import Foundation
import Testing

@testable import flatsync_demo

/// The `sync` command's tally of events and its progress lines.
@Suite struct SyncProgressTests {
    @Test func theTallyAddsUpSendsFetchesResetsAndRefusals() {
        var tally = SyncTally()
        let events: [SyncEvent] = [
            .willSend(zone: .readingList, saves: 3, deletes: 1),
            .didSend(zone: .readingList, saved: 3, deleted: 1, failed: 0),
            .didSend(zone: .readingHistory, saved: 2, deleted: 0, failed: 1),
            .willFetch(zone: .readingList),
            .didFetch(zone: .readingList, changed: 5, deleted: 2),
            .zoneReset(zone: .readingList, reason: .tokenExpired),
            .zoneReset(zone: .readingHistory, reason: .deletedByUser),
            .conflictResolved(RecordID(zone: .readingList, name: "rl-x")),
            .changeRefused(refusal(of: "rl-y", reason: "first")),
            .changeRefused(refusal(of: "rl-z", reason: "other")),
            .changeRefused(refusal(of: "rl-y", reason: "again")),
            .error(SyncProblem(.deviceError(.ioFailed), message: "snapshot")),
        ]
        for event in events { tally.record(event) }
        #expect(
            tally.report
                == SyncReport(
                    sent: 6, fetched: 5, deleted: 2,
                    resets: ["ReadingList: tokenExpired", "ReadingHistory: deletedByUser"],
                    refused: [
                        RefusedRow(refusal(of: "rl-z", reason: "other")),
                        RefusedRow(refusal(of: "rl-y", reason: "again")),
                    ]))
        #expect(
            tally.refused.map(\.reason) == ["other", "again"], "a record refused twice counts once, as last refused")
        #expect(tally.description(cloud: "c").contains("refused: rl-y (save): BAD_REQUEST: again"))
    }

    private func refusal(of name: String, reason: String) -> RefusedChange {
        RefusedChange(
            recordID: RecordID(zone: .readingList, name: name), isDelete: false, code: .invalidArguments,
            serverErrorCode: "BAD_REQUEST", reason: reason, refusedAt: Date(timeIntervalSince1970: 0))
    }

    @Test func progressIsSilentForAnEverydaySync() {
        var progress = SyncProgress(pendingRecords: SyncProgress.threshold)
        #expect(progress.text(for: .didSend(zone: .readingList, saved: 100, deleted: 0, failed: 0)).isEmpty)
        #expect(progress.text(for: .didFetch(zone: .readingList, changed: 200, deleted: 0)).isEmpty)
        #expect(progress.finish().isEmpty)
    }

    @Test func progressRewritesOneStatusLineWhileSendingManyRecords() {
        var progress = SyncProgress(pendingRecords: 250)
        #expect(progress.text(for: .willSend(zone: .readingHistory, saves: 100, deletes: 0)).isEmpty)
        #expect(
            progress.text(for: .didSend(zone: .readingHistory, saved: 100, deleted: 0, failed: 0))
                == "\r\u{1B}[Ksync: sent 100 of 250 changes")
        #expect(
            progress.text(for: .didSend(zone: .readingHistory, saved: 100, deleted: 50, failed: 0))
                == "\r\u{1B}[Ksync: sent 250 of 250 changes")
        #expect(
            progress.text(for: .didFetch(zone: .readingHistory, changed: 300, deleted: 1))
                == "\nsync: fetched ReadingHistory: 300 changed, 1 deleted\n")
        #expect(progress.finish().isEmpty, "the fetch line ended the status line")
    }

    @Test func aLargeFetchIsReportedEvenWhenLittleWasSent() {
        var progress = SyncProgress(pendingRecords: 0)
        #expect(
            progress.text(for: .didFetch(zone: .readingList, changed: 201, deleted: 0))
                == "sync: fetched ReadingList: 201 changed, 0 deleted\n")
    }
}

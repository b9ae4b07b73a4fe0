import FlatSync
import Foundation

// Concurrent durable writers: how group commit lets many callers share one fsync (DESIGN §3, §10).

extension Measurements {
    /// 1, 4 and 16 tasks each adding new reading-list articles to one `.fsync` store, as fast as their
    /// adds return, for a fixed time; beside them, a bare write+fsync per mutation for as long.
    static func groupCommit(_ context: BenchContext) async throws -> Results {
        let duration: Duration = context.pick(full: .seconds(2), quick: .milliseconds(500))
        let frameBytes = context.results["log_frame_bytes"].map(Int.init) ?? 146
        var results = Results()

        progress("bare write+fsync of \(frameBytes) bytes for \(duration)")
        let bare = try Baselines.BareAppendFile(in: try context.makeDirectory("group-bare"), frameBytes: frameBytes)
        var bareCount = 0
        let bareStart = benchClock.now
        while benchClock.now - bareStart < duration {
            _ = try bare.timedAppend()
            bareCount += 1
        }
        results["group_commit_bare_fsync_per_s"] =
            Double(bareCount) / ((benchClock.now - bareStart).milliseconds / 1000)

        for writers in [1, 4, 16] {
            progress("\(writers) concurrent writers of durable adds for \(duration)")
            let directory = try context.makeDirectory("group-\(writers)")
            let store = try LocalStore(directory: directory)
            let list = store.readingList
            for index in 0..<sendRoundInterval { try await list.add("warm-up-\(index)") }
            let flushesBefore = store.logFlushCount
            let start = benchClock.now
            let deadline = start + duration
            let added = try await withThrowingTaskGroup(of: Int.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        var count = 0
                        while benchClock.now < deadline {
                            try await list.add("group-\(writer)-\(count)")
                            count += 1
                        }
                        return count
                    }
                }
                return try await group.reduce(0, +)
            }
            let seconds = (benchClock.now - start).milliseconds / 1000
            let flushes = store.logFlushCount - flushesBefore
            try await store.close()
            try? FileManager.default.removeItem(at: directory)
            results["group_commit_mutations_per_s_\(writers)"] = Double(added) / seconds
            results["group_commit_fsyncs_\(writers)"] = Double(flushes)
            results["group_commit_mutations_\(writers)"] = Double(added)
        }
        results.note(
            "group commit: N tasks on one `.fsync` store, each calling `readingList.add(newArticleID)` again as soon "
                + "as the last one returned, for \(duration); mutations/s is all their adds over the time, fsyncs "
                + "are the log's flushes in that time. Baseline: one bare write+fsync of a log frame's bytes per "
                + "mutation, back to back, for as long."
        )
        return results
    }
}

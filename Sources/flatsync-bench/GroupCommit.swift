import FlatSync
import Foundation

// Concurrent durable writers: how group commit lets many callers share one fsync (see TheDurabilityPromise.md
// and Performance.md in Sources/FlatSync/FlatSync.docc).

extension Measurements {
    /// 1, 4 and 16 tasks each adding new reading-list articles to one `.fsync` store (one store per count),
    /// as fast as their adds return, beside a bare write+fsync per mutation back to back. The four take
    /// turns in short slices, round after round in a rotating order, so that they see the same disk: this
    /// machine's fsync latency drifts by a factor of several within seconds, which made counts measured
    /// one after another incomparable.
    static func groupCommit(_ context: BenchContext) async throws -> Results {
        let rounds = context.pick(full: 10, quick: 4)
        let slice: Duration = context.pick(full: .milliseconds(200), quick: .milliseconds(125))
        let frameBytes = context.results["log_frame_bytes"].map(Int.init) ?? 146
        let writerCounts = [1, 4, 16]
        progress(
            "\(writerCounts) concurrent writers of durable adds and a bare write+fsync, "
                + "\(rounds) rounds of \(slice) each")

        let bare = try Baselines.BareAppendFile(in: try context.makeDirectory("group-bare"), frameBytes: frameBytes)
        var bareCount = 0
        var bareTime = Duration.zero
        var stores: [LocalStore] = []
        var directories: [URL] = []
        for writers in writerCounts {
            let directory = try context.makeDirectory("group-\(writers)")
            let store = try LocalStore(directory: directory)
            for index in 0..<sendRoundInterval { try await store.readingList.add("warm-up-\(index)") }
            stores.append(store)
            directories.append(directory)
        }
        var added = [Int](repeating: 0, count: writerCounts.count)
        var flushes = [Int](repeating: 0, count: writerCounts.count)
        var time = [Duration](repeating: .zero, count: writerCounts.count)

        for round in 0..<rounds {
            for turn in 0...writerCounts.count {
                let slot = (turn + round) % (writerCounts.count + 1)
                if slot == writerCounts.count {
                    let start = benchClock.now
                    while benchClock.now - start < slice {
                        _ = try bare.timedAppend()
                        bareCount += 1
                    }
                    bareTime += benchClock.now - start
                    continue
                }
                let store = stores[slot]
                let list = store.readingList
                let writers = writerCounts[slot]
                let flushesBefore = store.logFlushCount
                let start = benchClock.now
                let deadline = start + slice
                added[slot] += try await withThrowingTaskGroup(of: Int.self) { group in
                    for writer in 0..<writers {
                        group.addTask {
                            var count = 0
                            while benchClock.now < deadline {
                                try await list.add("group-\(round)-\(writer)-\(count)")
                                count += 1
                            }
                            return count
                        }
                    }
                    return try await group.reduce(0, +)
                }
                time[slot] += benchClock.now - start
                flushes[slot] += store.logFlushCount - flushesBefore
            }
        }
        for (store, directory) in zip(stores, directories) {
            try await store.close()
            try? FileManager.default.removeItem(at: directory)
        }

        var results = Results()
        results["group_commit_bare_fsync_per_s"] = Double(bareCount) / (bareTime.milliseconds / 1000)
        for (index, writers) in writerCounts.enumerated() {
            results["group_commit_mutations_per_s_\(writers)"] =
                Double(added[index]) / (time[index].milliseconds / 1000)
            results["group_commit_fsyncs_\(writers)"] = Double(flushes[index])
            results["group_commit_mutations_\(writers)"] = Double(added[index])
        }
        results.note(
            "group commit: N tasks on one `.fsync` store (one store per N), each calling `readingList.add(newArticleID)` "
                + "again as soon as the last one returned; mutations/s is all their adds over the time they ran, "
                + "fsyncs are the log's flushes in that time. The three stores and a bare write+fsync of a log "
                + "frame's bytes per mutation (the baseline) take turns in \(slice) slices, \(rounds) rounds in a "
                + "rotating order."
        )
        return results
    }
}

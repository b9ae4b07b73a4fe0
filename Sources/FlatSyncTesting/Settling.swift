import FlatSync

extension SyncContext {
    /// Syncs `devices` in turns (`SyncContext.syncNow()` on each, in order) until a whole round moves
    /// nothing: no device sent, fetched or deleted anything, and each has nothing left to send. Then every
    /// device holds what the server holds, and a test can compare them. Returns how many rounds it took,
    /// the quiet last one included.
    ///
    /// A change one device sends reaches a device before it in the list in the next round, and a merge
    /// may send again, so settling takes a few rounds. A round that moves nothing while a device still
    /// has changes to send, or has a problem to report, will not settle by syncing again: the test must
    /// act (turn the network back on, advance the clock past a wait, discard a refused change), so that
    /// round throws at once, as does reaching `maximumRounds`.
    ///
    /// ```swift
    /// try await a.readingList.add("x")
    /// try await b.readingList.remove("x")
    /// try await SyncContext.settle([a, b])
    /// #expect(await a.readingList.entries() == b.readingList.entries())
    /// ```
    ///
    /// - Throws: ``SettlingFailed`` with each device's summary of the last round, when the devices did not
    ///   settle; anything `SyncContext.syncNow()` throws (a context that is closed, say).
    @discardableResult
    public static func settle(_ devices: [SyncContext], maximumRounds: Int = 10) async throws -> Int {
        precondition(maximumRounds > 0, "at least one round")
        for round in 1...maximumRounds {
            var summaries: [SyncSummary] = []
            for device in devices { summaries.append(try await device.syncNow()) }
            let moved = summaries.contains { $0.sent > 0 || $0.fetched > 0 || $0.deleted > 0 }
            let complete = summaries.allSatisfy(\.isComplete)
            if !moved && complete { return round }
            if !moved || round == maximumRounds {
                throw SettlingFailed(rounds: round, summaries: summaries, stuck: !moved)
            }
        }
        preconditionFailure("the last round returns or throws")
    }
}

/// Devices that `SyncContext.settle(_:maximumRounds:)` could not bring to rest: a round moved nothing
/// while a device still had changes to send or a problem to report, or every round moved something.
public struct SettlingFailed: Error, Sendable, CustomStringConvertible {
    /// The rounds synced, the last included.
    public var rounds: Int
    /// Each device's summary of the last round, in the order the devices were given.
    public var summaries: [SyncSummary]
    /// True when the last round moved nothing (syncing again would not help); false when the rounds ran
    /// out while the devices were still exchanging changes.
    public var stuck: Bool

    public var description: String {
        let devices = summaries.enumerated().map { index, summary in
            "device \(index): sent \(summary.sent), fetched \(summary.fetched), deleted \(summary.deleted), "
                + "\(summary.pendingRecords) pending, problems \(summary.problems.map(\.description)), "
                + "refused \(summary.refused.map(\.recordID.name))"
        }
        let why = stuck ? "the last round moved nothing" : "the devices were still exchanging changes"
        return "Not settled after \(rounds) rounds (\(why)): " + devices.joined(separator: "; ")
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// The zeros the log keeps ahead of its frames, so that a flush overwrites blocks the file has instead of
/// growing it (see ``AppendLog/reservationSize``): reserved while open, cut on close, and after a crash
/// taken for what they are — space, not a torn entry — with appends going on after the last frame.
@Suite struct AppendLogReservedSpaceTests {
    /// Payloads of `size` bytes, numbered from `start`.
    static func payloads(_ range: Range<Int>, size: Int = 1000) -> [Data] {
        range.map { logPayload($0, size: size) }
    }

    @Test(arguments: [Durability.fsync, .buffered])
    func theFileIsReservedAheadOfItsFramesAndCutOnClose(durability: Durability) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: durability)
            // 150 frames of 1 KB cross two reservation steps.
            for payload in Self.payloads(0..<150) { try await log.waitUntilDurable(log.append([payload])) }
            let end = log.byteCount
            let open = try fileBytes(url)
            #expect(end > 2 * AppendLog.reservationSize)
            #expect(open.count > end && open.count - end <= AppendLog.reservationSize)
            #expect(open.count % AppendLog.reservationSize == 0)
            #expect(open[end...].allSatisfy { $0 == 0 }, "only zeros after the frames")
            log.close()
            let closed = try fileBytes(url)
            #expect(closed == Array(open[..<end]), "close cuts the zeros off and nothing else")
        }
    }

    /// The flush `close()` makes itself can reserve space too (entries appended, never waited on): the cut
    /// covers it.
    @Test func closeCutsWhatItsOwnFlushReserved() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let written = Self.payloads(0..<100)
            for payload in written { try log.append([payload]) }
            let end = log.byteCount
            #expect(end > AppendLog.reservationSize, "the close's flush crosses a reservation step")
            log.close()
            #expect(try fileBytes(url).count == end)
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == written)
        }
    }

    /// What a `kill -9` leaves: the file as the open log has it, zeros and all. Checked after each of many
    /// appends, across several reservation steps.
    @Test func aCrashLeavesZerosThatTheNextOpenKeepsAsSpace() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let crashed = directory.appendingPathComponent("crashed.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            defer { log.close() }
            let written = Self.payloads(0..<220)
            for (index, payload) in written.enumerated() {
                try await log.waitUntilDurable(log.append([payload]))
                guard index % 37 == 0 || index == written.count - 1 else { continue }
                let image = try fileBytes(url)
                try Data(image).write(to: crashed)

                let (reopened, recovery) = try AppendLog.open(at: crashed, durability: .fsync)
                #expect(recovery.payloads == Array(written[...index]), "after entry \(index)")
                #expect(recovery.truncatedTailBytes == 0 && recovery.damage == nil && recovery.quarantinedFile == nil)
                // The next entry goes after the last frame, into the zeros: the file does not grow.
                let next = logPayload(1000 + index, size: 100)
                try await reopened.waitUntilDurable(reopened.append([next]))
                #expect(try fileBytes(crashed).count == image.count, "after entry \(index)")
                reopened.close()
                let (again, recovered) = try AppendLog.open(at: crashed, durability: .fsync)
                again.close()
                #expect(recovered.payloads == Array(written[...index]) + [next], "after entry \(index)")
            }
        }
    }

    @Test func aTornEntryBeforeTheZerosIsCutWithThem() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let crashed = directory.appendingPathComponent("crashed.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let written = Self.payloads(0..<3, size: 40)
            for payload in written { try await log.waitUntilDurable(log.append([payload])) }
            let end = log.byteCount
            var image = try fileBytes(url)
            log.close()
            // Half of a fourth frame reached the file before the process died.
            let torn = AppendLog.encodeLog([logPayload(3, size: 40)])[AppendLog.headerSize...].prefix(30)
            image.replaceSubrange(end..<end + torn.count, with: torn)
            try Data(image).write(to: crashed)

            let (reopened, recovery) = try AppendLog.open(at: crashed, durability: .fsync)
            reopened.close()
            #expect(recovery.payloads == written)
            #expect(recovery.damage == nil && recovery.quarantinedFile == nil)
            #expect(recovery.truncatedTailBytes == image.count - end, "the torn frame and the zeros after it")
            #expect(try fileBytes(crashed) == Array(image[..<end]))
        }
    }

    /// Zeros where a header claims frames were durable are still damage, not space.
    @Test func zerosWhereTheHeaderClaimsFramesAreDamage() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let written = Self.payloads(0..<3, size: 40)
            var image = AppendLog.encodeLog(written)
            let second = frameOffsets(image)[1]
            for index in second..<image.count { image[index] = 0 }
            image += [UInt8](repeating: 0, count: 1000)
            try Data(image).write(to: url)

            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Date(timeIntervalSince1970: 0))
            log.close()
            #expect(recovery.payloads == [written[0]])
            #expect(recovery.damage?.code == .damagedFile)
            #expect(recovery.quarantinedFile != nil)
        }
    }

    /// Reserving is for speed alone: when its write fails (a full disk), the entries are durable all the
    /// same, and the next flush that needs space tries again.
    @Test func aFailedReservationFailsNothing() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let faulty = FaultyFileSystem()
            faulty.logsCalls = true
            let (log, _) = try AppendLog.open(at: url, durability: .fsync, fileSystem: FileSystem(faulty))
            defer { log.close() }
            // The first flush: call +1 writes the frame, +2 the zeros after it, +3 flushes.
            let before = faulty.callCount
            faulty.inject(.eio, atCall: before + 2)
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            #expect(faulty.injections.map(\.call) == [.write], "the reservation's write failed")
            #expect(faulty.callLog[before...].map(\.call) == [.write, .write, .sync])
            #expect(log.failure == nil)
            #expect(try fileBytes(url).count == log.byteCount, "no space was reserved")

            try await log.waitUntilDurable(log.append([logPayload(1)]))
            #expect(faulty.callLog[(before + 3)...].map(\.call) == [.write, .write, .sync], "reserved again")
            #expect(try fileBytes(url).count == AppendLog.reservationSize)
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == [logPayload(0), logPayload(1)])
        }
    }
}

import FlatSyncFuzzing
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct AppendLogRecoveryTests {
    /// 2026-11-22 04:57:34 UTC, the time in quarantined files' names.
    static let now = Date(timeIntervalSince1970: 1_795_323_454)
    static let quarantineName = "commands.log.corrupt-20261122T045734Z"

    /// Writes a log of `payloads`, then flips one byte of entry `entry` (by default its first payload
    /// byte) on disk. Returns the damaged file's bytes.
    private func writeDamagedLog(
        _ payloads: [Data], to url: URL, damagingEntry entry: Int, atByte position: Int = AppendLog.frameHeaderSize
    )
        async throws -> [UInt8]
    {
        var bytes = try await writeLog(payloads, to: url)
        bytes[frameOffsets(bytes)[entry] + position] ^= 0x5A
        try Data(bytes).write(to: url)
        return bytes
    }

    // MARK: - Torn tails

    @Test func aTornLastEntryIsDroppedSilentlyAtEveryCut() async throws {
        try await withTemporaryDirectory { directory in
            let source = directory.appendingPathComponent("source.log")
            let payloads = (0..<4).map { logPayload($0, size: 20 + $0) }
            let bytes = try await writeLog(payloads, to: source)
            let lastStart = try #require(frameOffsets(bytes).last)
            #expect(bytes.count - lastStart == AppendLog.frameHeaderSize + payloads[3].count)

            let url = directory.appendingPathComponent("commands.log")
            for cut in lastStart..<bytes.count {
                try Data(bytes[..<cut]).write(to: url)
                let (log, recovery) = try AppendLog.open(at: url, durability: .buffered, now: Self.now)
                #expect(recovery.payloads == Array(payloads.prefix(3)), "cut at \(cut)")
                #expect(recovery.truncatedTailBytes == cut - lastStart, "cut at \(cut)")
                #expect(recovery.quarantinedFile == nil, "cut at \(cut)")
                #expect(recovery.damage == nil, "cut at \(cut)")
                #expect(try fileBytes(url) == Array(bytes[..<lastStart]), "the file is cut after the last valid frame")
                #expect(log.byteCount == lastStart)

                try log.append([logPayload(99)])
                log.close()
                let (reopened, again) = try AppendLog.open(at: url, durability: .buffered, now: Self.now)
                reopened.close()
                #expect(again.payloads == payloads.prefix(3) + [logPayload(99)], "cut at \(cut)")
                #expect(again.truncatedTailBytes == 0 && again.damage == nil, "cut at \(cut)")
            }
            #expect(try fileNames(in: directory) == ["commands.log", "source.log"], "nothing was quarantined")
        }
    }

    /// Tails that hold something (zeros alone are reserved space: see ``AppendLogReservedSpaceTests``).
    static let tails: [(String, [UInt8])] = [
        ("zeros then a byte", [UInt8](repeating: 0, count: 100) + [1]),
        (
            "garbage",
            {
                var state: UInt32 = 12345
                return (0..<100).map { _ in
                    state = state &* 1_103_515_245 &+ 12345
                    return UInt8(truncatingIfNeeded: state >> 16)
                }
            }()
        ),
        ("a lone frame marker", withUnsafeBytes(of: AppendLog.frameMagic.littleEndian) { Array($0) }),
        (
            "a frame header claiming a huge payload",
            withUnsafeBytes(of: (AppendLog.frameMagic.littleEndian, UInt32(1_000_000).littleEndian, UInt32(0))) {
                Array($0)
            }
        ),
        (
            "a frame header over the size limit",
            withUnsafeBytes(of: (AppendLog.frameMagic.littleEndian, UInt32.max.littleEndian, UInt32(0))) { Array($0) }
                + [UInt8](repeating: 7, count: 40)
        ),
    ]

    @Test(arguments: tails)
    func aTailOfBytesThatAreNoFrameIsDropped(name: String, tail: [UInt8]) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<3).map { logPayload($0) }
            let bytes = try await writeLog(payloads, to: url)
            try Data(bytes + tail).write(to: url)

            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            #expect(recovery.payloads == payloads)
            #expect(recovery.truncatedTailBytes == tail.count)
            #expect(recovery.quarantinedFile == nil)
            #expect(recovery.damage == nil)
            try await log.waitUntilDurable(log.append([logPayload(3)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0..<4).map { logPayload($0) })
            #expect(try fileNames(in: directory) == ["commands.log"])
        }
    }

    // MARK: - Power loss in a group flush

    /// A power loss in the middle of one group flush can leave any of its sectors on disk and not others:
    /// a frame of the flush may be missing while a later one of the same flush landed. Nothing claims the
    /// missing bytes were durable, so this is a torn tail of unacknowledged entries, dropped quietly.
    @Test(arguments: [0, 1])
    func framesOfOneFlushLandingOutOfOrderAreATornTail(missing: Int) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let durable = (0..<3).map { logPayload($0, size: 40) }
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            for payload in durable { try await log.waitUntilDurable(log.append([payload])) }
            let group = (3..<6).map { logPayload($0, size: 600) }  // each frame spans sectors
            try await log.waitUntilDurable(log.append(group))
            log.close()
            var bytes = try fileBytes(url)
            let offsets = frameOffsets(bytes)
            // Frame 3 + `missing` never reached the disk (zeros where the size did); the frames after it did.
            let lost = offsets[3 + missing]..<offsets[4 + missing]
            for index in lost { bytes[index] = 0 }
            try Data(bytes).write(to: url)

            let (reopened, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            reopened.close()
            #expect(recovery.damage == nil && recovery.quarantinedFile == nil, "not mistaken for damage")
            #expect(recovery.payloads == durable + group.prefix(missing))
            #expect(recovery.truncatedTailBytes == bytes.count - lost.lowerBound)
            #expect(try fileNames(in: directory) == ["commands.log"])
        }
    }

    /// The same hole in a flush that a later flush proves durable is damage: it is quarantined.
    @Test func aHoleInAFlushThatALaterFlushProvesDurableIsDamage() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let group = (0..<3).map { logPayload($0, size: 600) }
            try await log.waitUntilDurable(log.append(group))
            try await log.waitUntilDurable(log.append([logPayload(3)]))
            log.close()
            var bytes = try fileBytes(url)
            let offsets = frameOffsets(bytes)
            for index in offsets[1]..<offsets[2] { bytes[index] = 0 }
            try Data(bytes).write(to: url)

            let (reopened, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            reopened.close()
            #expect(recovery.damage?.code == .damagedFile)
            #expect(recovery.payloads == [group[0]])
            #expect(recovery.quarantinedFile != nil)
        }
    }

    /// A rewritten log was flushed whole before it got its name; a later cut at a frame boundary is damage.
    @Test func aRewrittenLogShorterThanItWasWrittenIsDamage() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<3).map { logPayload($0) }
            let bytes = AppendLog.encodeLog(payloads)
            try Data(bytes[..<frameOffsets(bytes)[2]]).write(to: url)
            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            log.close()
            #expect(recovery.damage?.code == .damagedFile)
            #expect(recovery.damage?.message.contains("before the \(bytes.count) bytes it was created with") == true)
            #expect(recovery.payloads == Array(payloads.prefix(2)))
        }
    }

    /// In buffered mode nothing appended since the log was opened claims to be durable: after a power loss
    /// any damage there is a torn tail.
    @Test func bufferedFramesClaimOnlyWhatWasDurableAtOpen() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .buffered)
            for index in 0..<4 { try log.append([logPayload(index)]) }
            log.close()
            var bytes = try fileBytes(url)
            bytes[frameOffsets(bytes)[1] + AppendLog.frameHeaderSize] ^= 1
            try Data(bytes).write(to: url)
            let (reopened, recovery) = try AppendLog.open(at: url, durability: .buffered, now: Self.now)
            reopened.close()
            #expect(recovery.damage == nil)
            #expect(recovery.payloads == [logPayload(0)])
        }
    }

    // MARK: - Version 1

    /// A version 1 file (16-byte header, frames without the synced-through offset), as FlatSync wrote it
    /// before version 2: the fuzz seeds' (see `FuzzSeeds.versionOneLog(_:)`).
    static func versionOneLog(_ payloads: [Data]) -> [UInt8] {
        [UInt8](FuzzSeeds.versionOneLog(payloads))
    }

    @Test func aVersionOneLogIsReadAndRewrittenAsVersionTwo() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<4).map { logPayload($0) }
            try Data(Self.versionOneLog(payloads) + [0x9E, 0x37]).write(to: url)  // with a torn tail
            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            #expect(recovery.payloads == payloads)
            #expect(recovery.damage == nil)
            #expect(try fileBytes(url) == AppendLog.encodeLog(payloads))
            try await log.waitUntilDurable(log.append([logPayload(4)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0..<5).map { logPayload($0) })

            // Version 1's rule for damage still holds for version 1 files.
            var damaged = Self.versionOneLog(payloads)
            damaged[16 + 12 + 3] ^= 1
            try Data(damaged).write(to: url)
            let (again, second) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            again.close()
            #expect(second.damage?.code == .damagedFile)
            #expect(second.payloads.isEmpty)
        }
    }

    // MARK: - Damage in the middle

    /// Offsets inside a frame: its marker, length, synced-through offset, checksum, and first, middle and last
    /// payload bytes.
    @Test(arguments: [0, 3, 4, 7, 8, 15, 16, 19, 20, 20 + 15, 20 + 29])
    func aFlippedByteInAMiddleEntryQuarantinesTheFileAndKeepsTheEntriesBefore(position: Int) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<5).map { logPayload($0, size: 30) }
            let bytes = try await writeDamagedLog(payloads, to: url, damagingEntry: 2, atByte: position)
            let damagedFrame = frameOffsets(bytes)[2]

            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            #expect(recovery.payloads == Array(payloads.prefix(2)))
            #expect(recovery.truncatedTailBytes == 0)
            let quarantined = try #require(recovery.quarantinedFile)
            #expect(quarantined.lastPathComponent == Self.quarantineName)
            #expect(try fileBytes(quarantined) == bytes, "the damaged file is kept byte for byte")
            let damage = try #require(recovery.damage)
            #expect(damage.code == .damagedFile)
            #expect(damage.message.contains("byte offset \(damagedFrame)"), "\(damage.message)")
            #expect(damage.path == url.path)
            #expect(try fileNames(in: directory) == ["commands.log", Self.quarantineName])

            // The fresh log holds the kept entries and works like any other.
            #expect(try fileBytes(url) == AppendLog.encodeLog(Array(payloads.prefix(2))))
            #expect(permissions(of: url) == 0o600)
            try await log.waitUntilDurable(log.append([logPayload(7)]))
            log.close()
            let (reopened, again) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            reopened.close()
            #expect(again.payloads == payloads.prefix(2) + [logPayload(7)])
            #expect(again.damage == nil && again.quarantinedFile == nil && again.truncatedTailBytes == 0)
        }
    }

    /// Recovery keeps the damaged log under a second name before it replaces it; a crash between the two
    /// leaves the damaged log in place, and the next open recovers the same entries from it.
    @Test func aCrashBetweenKeepingTheCopyAndTheRepairLosesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<5).map { logPayload($0, size: 30) }
            let bytes = try await writeDamagedLog(payloads, to: url, damagingEntry: 3)
            try Quarantine.keepCopy(of: url, now: Self.now)  // the crash comes right after this step

            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            log.close()
            #expect(recovery.payloads == Array(payloads.prefix(3)))
            #expect(recovery.quarantinedFile?.lastPathComponent == Self.quarantineName + "-2")
            #expect(try fileBytes(url) == AppendLog.encodeLog(Array(payloads.prefix(3))))
            for name in [Self.quarantineName, Self.quarantineName + "-2"] {
                #expect(try fileBytes(directory.appendingPathComponent(name)) == bytes)
            }
        }
    }

    /// The log's name never goes empty during a repair: whichever call of the repair fails, the log's name
    /// holds the damaged log or its repair, and the next open recovers the same entries.
    @Test func aRepairThatFailsAtAnyCallLeavesALogToRecoverFrom() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<5).map { logPayload($0, size: 30) }
            let bytes = try await writeDamagedLog(payloads, to: url, damagingEntry: 3)
            let counting = FaultyFileSystem()
            try AppendLog.open(at: url, durability: .fsync, now: Self.now, fileSystem: FileSystem(counting)).0.close()
            let calls = counting.callCount
            try removeEverything(in: directory, except: "commands.log")

            for number in 1...calls {
                try Data(bytes).write(to: url)
                try removeEverything(in: directory, except: "commands.log")
                let faulty = FaultyFileSystem()
                faulty.inject(.eio, atCall: number)
                if let (log, _) = try? AppendLog.open(
                    at: url, durability: .fsync, now: Self.now, fileSystem: FileSystem(faulty))
                {
                    log.close()
                }
                let left = try fileBytes(url)
                #expect(
                    left == bytes || left == AppendLog.encodeLog(Array(payloads.prefix(3))),
                    "call \(number): the log's name holds the damaged log or its repair")
                let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
                log.close()
                #expect(recovery.payloads == Array(payloads.prefix(3)), "call \(number)")
            }
        }
    }

    @Test func damageInTheFirstEntryKeepsNothingButTheQuarantinedFile() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            var bytes = try await writeLog((0..<3).map { logPayload($0) }, to: url)
            bytes[AppendLog.headerSize + AppendLog.frameHeaderSize] ^= 1
            try Data(bytes).write(to: url)
            let (log, recovery) = try AppendLog.open(at: url, durability: .buffered, now: Self.now)
            log.close()
            #expect(recovery.payloads.isEmpty)
            #expect(recovery.damage?.message.contains("byte offset \(AppendLog.headerSize)") == true)
            #expect(try recovery.quarantinedFile.map(fileBytes) == bytes)
        }
    }

    // MARK: - Damaged headers and versions

    static let damagedHeaders: [(String, @Sendable ([UInt8]) -> [UInt8])] = [
        (
            "a flipped marker byte",
            {
                var b = $0
                b[0] ^= 0x20
                return b
            }
        ),
        (
            "a flipped version byte",
            {
                var b = $0
                b[9] ^= 1
                return b
            }
        ),
        (
            "a flipped checksum byte",
            {
                var b = $0
                b[13] ^= 0x80
                return b
            }
        ),
        ("a file shorter than a header", { Array($0.prefix(5)) }),
        ("a single byte", { Array($0.prefix(1)) }),
        ("another kind of file", { _ in Array("bplist00 this is not a log at all, just some bytes".utf8) }),
    ]

    @Test(arguments: damagedHeaders)
    func aDamagedHeaderQuarantinesTheFileAndStartsAnEmptyLog(
        name: String,
        damage: @Sendable ([UInt8]) -> [UInt8]
    ) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let bytes = damage(try await writeLog([logPayload(0), logPayload(1)], to: url))
            try Data(bytes).write(to: url)

            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            #expect(recovery.payloads.isEmpty)
            #expect(recovery.damage?.code == .damagedFile)
            #expect(try recovery.quarantinedFile.map(fileBytes) == bytes)
            #expect(try fileBytes(url) == AppendLog.encodedHeader())
            try await log.waitUntilDurable(log.append([logPayload(2)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == [logPayload(2)])
        }
    }

    @Test func anUnknownFormatVersionQuarantinesTheFileAndStartsAnEmptyLog() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let current = try await writeLog([logPayload(0)], to: url)
            let bytes = AppendLog.encodedHeader(version: 3) + current[AppendLog.headerSize...]
            try Data(bytes).write(to: url)

            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync, now: Self.now)
            log.close()
            #expect(recovery.payloads.isEmpty)
            #expect(recovery.damage?.code == .unsupportedFormatVersion)
            #expect(recovery.damage?.message.contains("version 3") == true)
            #expect(recovery.quarantinedFile?.lastPathComponent == Self.quarantineName)
            #expect(try recovery.quarantinedFile.map(fileBytes) == bytes)
            #expect(try fileBytes(url) == AppendLog.encodedHeader())
        }
    }

    // MARK: - Never crash

    /// Random damage (flipped bytes, cuts, garbage, zeroed ranges) never crashes the reader, and what comes
    /// back is always a prefix of what was written; the file it leaves opens cleanly.
    @Test func randomDamageAlwaysRecoversAPrefix() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let payloads = (0..<6).map { logPayload($0, size: 10 + 9 * $0) }
            let original = try await writeLog(payloads, to: url)
            var random = SeededRandomNumberGenerator(seed: 2026)
            for round in 0..<60 {
                var bytes = original
                for _ in 0..<(1 + Int(random.next() % 3)) {
                    let position = Int(random.next() % UInt64(max(bytes.count, 1)))
                    switch random.next() % 4 {
                    case 0: if !bytes.isEmpty { bytes[position] ^= UInt8(truncatingIfNeeded: random.next() | 1) }
                    case 1: bytes = Array(bytes.prefix(position))
                    case 2: bytes += (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                    default:
                        let end = min(bytes.count, position + Int(random.next() % 30))
                        for index in position..<end { bytes[index] = 0 }
                    }
                }
                try Data(bytes).write(to: url)
                let (log, recovery) = try AppendLog.open(at: url, durability: .buffered, now: Self.now)
                log.close()
                #expect(payloads.starts(with: recovery.payloads), "round \(round)")
                let (again, second) = try AppendLog.open(at: url, durability: .buffered, now: Self.now)
                again.close()
                #expect(second.payloads == recovery.payloads, "round \(round)")
                #expect(second.damage == nil && second.truncatedTailBytes == 0, "round \(round)")
            }
        }
    }
}

/// Removes every file in `directory` but `kept`.
func removeEverything(in directory: URL, except kept: String) throws {
    for name in try fileNames(in: directory) where name != kept {
        try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
    }
}

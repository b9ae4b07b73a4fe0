import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A distinct payload for entry `index`, `size` bytes long (at least its label).
func logPayload(_ index: Int, size: Int = 24) -> Data {
    var bytes = Array("entry-\(index)-".utf8)
    while bytes.count < size { bytes.append(UInt8(truncatingIfNeeded: index &* 31 &+ bytes.count &* 7)) }
    return Data(bytes)
}

/// The bytes of the file at `url`.
func fileBytes(_ url: URL) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: url))
}

/// Writes a log holding `payloads` (fsync mode), each entry in a flush of its own (so each is proven
/// durable by the next one's claim), and returns its bytes.
func writeLog(_ payloads: [Data], to url: URL) async throws -> [UInt8] {
    let (log, _) = try AppendLog.open(at: url, durability: .fsync)
    for payload in payloads { try await log.waitUntilDurable(log.append([payload])) }
    log.close()
    return try fileBytes(url)
}

/// The byte offsets at which the frames of a well-formed log start.
func frameOffsets(_ bytes: [UInt8]) -> [Int] {
    var offsets: [Int] = []
    var offset = AppendLog.headerSize
    while offset + AppendLog.frameHeaderSize <= bytes.count {
        offsets.append(offset)
        let length = bytes[offset + 4..<offset + 8].reversed().reduce(0) { $0 << 8 | Int($1) }
        offset += AppendLog.frameHeaderSize + length
    }
    return offsets
}

@Suite struct AppendLogTests {
    // MARK: - Round trips

    @Test(arguments: Durability.allCases)
    func entriesComeBackInOrderAfterCloseAndReopen(durability: Durability) async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let batches: [[Data]] = [
                [logPayload(0)], [logPayload(1), logPayload(2, size: 300)], [], [Data()],
                (3..<10).map { logPayload($0) },
            ]
            let (log, recovery) = try AppendLog.open(at: url, durability: durability)
            #expect(recovery.payloads.isEmpty)
            #expect(permissions(of: url) == 0o600)
            #expect(log.byteCount == AppendLog.headerSize)
            var previous: AppendLog.Ticket?
            for batch in batches {
                let ticket = try log.append(batch)
                if let previous { #expect(previous <= ticket) }
                previous = ticket
                try await log.waitUntilDurable(ticket)
            }
            let expected = batches.flatMap { $0 }
            #expect(log.byteCount == AppendLog.encodeLog(expected).count)
            log.close()
            #expect(try fileBytes(url).count == AppendLog.encodeLog(expected).count)

            let (reopened, again) = try AppendLog.open(at: url, durability: durability)
            defer { reopened.close() }
            #expect(again.payloads == expected)
            #expect(again.truncatedTailBytes == 0)
            #expect(again.quarantinedFile == nil)
            #expect(again.damage == nil)
            #expect(reopened.byteCount == AppendLog.encodeLog(expected).count)
            #expect(try fileNames(in: directory) == ["commands.log"])
        }
    }

    @Test func bufferedEntriesAreInTheFileWithoutClose() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .buffered)
            try log.append([logPayload(0), logPayload(1)])
            try log.append([logPayload(2)])
            #expect(log.flushCount == 0)

            // A second reader sees what a killed process would leave behind: the frames are in the file.
            let (reader, recovery) = try AppendLog.open(at: url, durability: .buffered)
            #expect(recovery.payloads == [logPayload(0), logPayload(1), logPayload(2)])
            reader.close()
            log.close()
        }
    }

    /// What a snapshot waits for before it is written: the entries on stable storage, in either mode.
    @Test(arguments: Durability.allCases)
    func waitingUntilFlushedPutsTheEntriesOnStableStorage(durability: Durability) async throws {
        let disk = SimulatedDisk()
        let url = URL(fileURLWithPath: "/commands.log")
        let (log, _) = try AppendLog.open(at: url, durability: durability, fileSystem: FileSystem(disk))
        let ticket = try log.append([logPayload(0), logPayload(1)])
        try await log.waitUntilFlushed(ticket)
        let image = SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)
        let (reopened, recovery) = try AppendLog.open(at: url, durability: durability, fileSystem: FileSystem(image))
        reopened.close()
        #expect(recovery.payloads == [logPayload(0), logPayload(1)])
        log.close()
        await #expect(throws: FlatSyncError.self) { try await log.waitUntilFlushed(log.append([])) }
    }

    @Test func closeFlushesBufferedEntriesInFsyncMode() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            let ticket = try log.append([logPayload(0), logPayload(1)])
            #expect(log.byteCount == AppendLog.encodeLog([logPayload(0), logPayload(1)]).count)
            #expect(try fileBytes(url).count == AppendLog.headerSize, "fsync mode buffers until a wait")
            log.close()
            #expect(log.flushCount == 1)
            try await log.waitUntilDurable(ticket)
            log.close()

            let error = #expect(throws: FlatSyncError.self) { try log.append([logPayload(2)]) }
            #expect(error?.code == .storeClosed)
            #expect(throws: FlatSyncError.self) { try log.rewrite([]) }

            let (reopened, recovery) = try AppendLog.open(at: url, durability: .fsync)
            reopened.close()
            #expect(recovery.payloads == [logPayload(0), logPayload(1)])
        }
    }

    @Test func anEmptyFileIsGivenAHeader() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            try Data().write(to: url)
            let (log, recovery) = try AppendLog.open(at: url, durability: .fsync)
            #expect(recovery.payloads.isEmpty)
            #expect(recovery.damage == nil)
            try await log.waitUntilDurable(log.append([logPayload(0)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == [logPayload(0)])
        }
    }

    @Test func anOversizedPayloadIsRefusedWithoutWritingAnything() throws {
        // Data(count:) of 512 MiB + 1 is a lazily zeroed allocation: no pages are touched.
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            let (log, _) = try AppendLog.open(at: url, durability: .buffered)
            defer { log.close() }
            let error = #expect(throws: FlatSyncError.self) {
                try log.append([logPayload(0), Data(count: AppendLog.maxPayloadSize + 1)])
            }
            #expect(error?.code == .invalidArgument)
            #expect(log.byteCount == AppendLog.headerSize)
            try log.append([logPayload(1)])
        }
    }

    @Test func appendsAfterReopenFollowTheOldEntries() async throws {
        try await withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            _ = try await writeLog([logPayload(0), logPayload(1)], to: url)
            let (log, _) = try AppendLog.open(at: url, durability: .fsync)
            try await log.waitUntilDurable(log.append([logPayload(2)]))
            log.close()
            #expect(try AppendLog.open(at: url, durability: .fsync).1.payloads == (0..<3).map { logPayload($0) })
        }
    }
}

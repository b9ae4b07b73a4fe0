import FlatSync
import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The baselines FlatSync is held against, measured in the same run on the same file system, so the
// ratios hold on a noisy machine.

enum Baselines {
    /// The floor of a durable enqueue: a bare `write(2)` of one log frame's bytes to a plain file, then
    /// `fsync` (`F_FULLFSYNC` on Darwin, as FlatSync's log does). The durable-enqueue measurement takes
    /// one of these samples between its enqueues, so baseline and enqueues see the same disk at the same
    /// moments and their ratio holds while the machine's fsync latency drifts.
    final class BareAppendFile {
        private let fd: Int32
        private let frame: [UInt8]

        init(in directory: URL, frameBytes: Int) throws {
            let path = directory.appendingPathComponent("append.bin").path
            fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
            frame = [UInt8](repeating: 0xA5, count: frameBytes)
        }

        deinit { close(fd) }

        /// Appends one frame's bytes and flushes them; returns the milliseconds it took.
        func timedAppend() throws -> Double {
            let start = benchClock.now
            let written = frame.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard written == frame.count, syncFile(fd) == 0 else {
                throw BenchError("write+fsync failed: \(String(cString: strerror(errno)))")
            }
            return (benchClock.now - start).milliseconds
        }
    }

    /// One frame's bytes written at the end of the frames in a file whose space is reserved ahead with zeros
    /// (as ``AppendLog`` reserves it, 64 KiB at a time), then `fdatasync` (`F_FULLFSYNC` on Darwin): the
    /// calls FlatSync's log makes per flush, with nothing else around them.
    final class BareReservedFile {
        private let fd: Int32
        private let frame: [UInt8]
        private var end = 0
        private var reserved = 0

        init(in directory: URL, frameBytes: Int) throws {
            let path = directory.appendingPathComponent("reserved.bin").path
            fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
            frame = [UInt8](repeating: 0xA5, count: frameBytes)
        }

        deinit { close(fd) }

        /// Writes one frame's bytes (and, when they pass the reserved space, 64 KiB of zeros after them) and
        /// flushes; returns the milliseconds it took.
        func timedAppend() throws -> Double {
            let start = benchClock.now
            var written = frame.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(end)) }
            end += frame.count
            if written == frame.count && end > reserved {
                let zeros = [UInt8](repeating: 0, count: AppendLog.reservedEnd(after: end) - end)
                if zeros.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, off_t(end)) }) != zeros.count {
                    written = -1
                }
                reserved = end + zeros.count
            }
            guard written == frame.count, DurableFileWriter.fullSync(fd) == 0 else {
                throw BenchError("pwrite+fdatasync failed: \(String(cString: strerror(errno)))")
            }
            return (benchClock.now - start).milliseconds
        }
    }

    /// The News-style queue: every enqueue encodes the whole queue as one binary property list with
    /// `PropertyListEncoder` and replaces the file durably (temporary file, write, fsync, rename).
    static func fullRewrite(_ context: BenchContext) async throws -> Results {
        var results = Results()
        for (count, iterations) in [
            (1_000, context.pick(full: 30, quick: 10)), (10_000, context.pick(full: 12, quick: 5)),
        ] {
            progress("full rewrite of a \(count)-record queue × \(iterations)")
            let directory = try context.makeDirectory("full-rewrite-\(count)")
            var queue = (0..<count).map {
                QueuedRecord.visit(article: "rewrite-\(count)-\($0)", sequence: UInt64($0 + 1))
            }
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            var samples: [Double] = []
            var bytes = 0
            for iteration in 0..<(iterations + 1) {
                queue.append(.visit(article: "rewrite-new-\(iteration)", sequence: UInt64(queue.count + 1)))
                let ms = try await timeMilliseconds {
                    let data = try encoder.encode(queue)
                    bytes = data.count
                    try replaceDurably(directory.appendingPathComponent("queue.plist"), with: data)
                }
                if iteration > 0 { samples.append(ms) }  // the first one warms the encoder up
            }
            results["full_rewrite_p50_ms_\(count / 1000)k"] = median(samples)
            results["full_rewrite_bytes_\(count / 1000)k"] = Double(bytes)
        }
        results.note(
            "full rewrite: per sample, one record joins the queue, then `PropertyListEncoder` (binary) encodes the "
                + "whole queue of flat history records and the file is replaced (temp file, write, fsync, rename); "
                + String(format: "%.0f bytes per record", (results["full_rewrite_bytes_10k"] ?? 0) / 10_000) + "."
        )
        return results
    }

    /// One pending record as a News-style queue keeps it: the content of a reading-history record as flat
    /// fields, and its place in the queue (about 130 bytes a record in the binary plist; the reference
    /// measurement in reference/reliability.md §6 had 118). Flat on purpose: FlatSync's nested `Record`
    /// with typed field values and changed keys would make this baseline several times slower, and
    /// FlatSync look better than it is.
    struct QueuedRecord: Codable {
        var recordName: String
        var articleID: String
        var lastVisited: Date
        var firstSeen: Date
        var maxVersionSeen: Int64
        var readCount: Int64
        var deviceID: String
        var flags: Int64
        var sequence: UInt64

        static func visit(article: String, sequence: UInt64) -> QueuedRecord {
            let now = Date()
            return QueuedRecord(
                recordName: ReadingHistoryItem.recordNamePrefix + article, articleID: article, lastVisited: now,
                firstSeen: now, maxVersionSeen: 1, readCount: 1, deviceID: "5F0C1A62-4D0B-4A8E-9C3B-2E7D9A1B6C44",
                flags: 3, sequence: sequence
            )
        }
    }

    /// Temporary file in the same directory, write, fsync, rename: what a careful full rewrite costs.
    private static func replaceDurably(_ url: URL, with data: Data) throws {
        let temporary = url.deletingLastPathComponent().appendingPathComponent(".tmp-\(url.lastPathComponent)").path
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw BenchError("open \(temporary): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let ok = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 { if errno == EINTR { continue } else { return false } }
                offset += written
            }
            return true
        }
        guard ok, syncFile(fd) == 0, rename(temporary, url.path) == 0 else {
            throw BenchError("durable rewrite failed: \(String(cString: strerror(errno)))")
        }
    }

    /// `fsync(2)` (`F_FULLFSYNC` on Darwin): the bare baseline flushes as a naive appender would, the inode
    /// and its new size too, where FlatSync's log writes into space it reserved and `fdatasync`s.
    static func syncFile(_ fd: Int32) -> Int32 {
        #if canImport(Darwin)
            DurableFileWriter.fullSync(fd)
        #else
            fsync(fd)
        #endif
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The log file's bytes (header and frames) and the system calls that write and flush them.

extension AppendLog {
    // MARK: - Encoding

    /// The file header: `version` and the length of the file being created (`durableLength`).
    package static func encodedHeader(version: UInt32 = formatVersion, durableLength: Int = headerSize) -> [UInt8] {
        var header = headerMagic
        withUnsafeBytes(of: version.littleEndian) { header.append(contentsOf: $0) }
        if version >= 2 {
            withUnsafeBytes(of: UInt64(durableLength).littleEndian) { header.append(contentsOf: $0) }
        }
        let crc = header.withUnsafeBytes { CRC32.checksum($0) }
        withUnsafeBytes(of: crc.littleEndian) { header.append(contentsOf: $0) }
        return header
    }

    /// A whole log file holding `payloads`, as ``rewrite(_:)`` and creation write it: the header claims the
    /// whole length (the file is flushed before it gets its name), the frames claim nothing.
    package static func encodeLog(_ payloads: [Data]) -> [UInt8] {
        let length = payloads.reduce(headerSize) { $0 + frameHeaderSize + $1.count }
        var bytes = encodedHeader(durableLength: length)
        bytes.reserveCapacity(length)
        for payload in payloads { appendFrame(payload, syncedThrough: 0, to: &bytes) }
        return bytes
    }

    /// Appends one frame holding `payload` to `buffer`; `syncedThrough` is an offset before which every
    /// byte of the file is on stable storage.
    @inline(__always)
    package static func appendFrame(_ payload: Data, syncedThrough: Int, to buffer: inout [UInt8]) {
        let synced = UInt64(syncedThrough)
        // Length and offset as three 32-bit words: a tuple of them has no padding, so its bytes are the
        // 12 bytes on disk.
        let fields = (
            UInt32(truncatingIfNeeded: payload.count).littleEndian,
            UInt32(truncatingIfNeeded: synced).littleEndian,
            UInt32(truncatingIfNeeded: synced >> 32).littleEndian
        )
        payload.withUnsafeBytes { (body: UnsafeRawBufferPointer) in
            let crc = withUnsafeBytes(of: fields) { CRC32.checksum(body, continuing: CRC32.checksum($0)) }
            withUnsafeBytes(of: (frameMagic.littleEndian, fields.0, fields.1, fields.2, crc.littleEndian)) {
                buffer.append(contentsOf: $0)
            }
            buffer.append(contentsOf: body)
        }
    }

    // MARK: - System calls

    /// Opens an existing log for reading and appending. Not with `O_APPEND`: frames are written at their
    /// offset, into the zeros reserved after the last one.
    static func openForAppending(_ path: String, fileSystem: FileSystem) throws(FlatSyncError) -> Int32 {
        try fileSystem.open(path, flags: O_RDWR | O_CLOEXEC)
    }

    /// Writes `bytes` at `offset`, and when they end past `allocatedSize` reserves space after them (zeros
    /// up to the next multiple of ``reservationSize``). Returns the file's new reserved size. Only writing
    /// the frames can fail: reserving is for speed alone, and if it fails (a full disk) the file is as long
    /// as the frames or somewhat longer, with zeros, and the next write tries again.
    static func writeFrames(
        _ fd: Int32, _ bytes: [UInt8], at offset: Int, allocatedSize: Int, fileSystem: FileSystem, path: String
    ) throws(FlatSyncError) -> Int {
        try fileSystem.writeAll(fd, bytes, at: offset, path: path)
        let end = offset + bytes.count
        guard end > allocatedSize else { return allocatedSize }
        let reserved = reservedEnd(after: end)
        do throws(FlatSyncError) {
            try fileSystem.writeAll(fd, [UInt8](repeating: 0, count: reserved - end), at: end, path: path)
            return reserved
        } catch {
            return end
        }
    }

    /// Writes a flush job's bytes and flushes them; returns the failure, if any, and the file's reserved size.
    /// Never retries a flush.
    static func writeAndSync(_ job: FlushJob, fileSystem: FileSystem, path: String) -> (
        failure: FlatSyncError?, allocatedSize: Int
    ) {
        var allocatedSize = job.allocatedSize
        do throws(FlatSyncError) {
            allocatedSize = try writeFrames(
                job.descriptor, job.bytes, at: job.end - job.bytes.count, allocatedSize: allocatedSize,
                fileSystem: fileSystem, path: path)
            try fileSystem.sync(job.descriptor, path: path)
            return (nil, allocatedSize)
        } catch {
            return (error, allocatedSize)
        }
    }

    static func resume(_ resumptions: [Resumption]) {
        for (resumer, wakeup) in resumptions { resumer.resume(wakeup) }
    }
}

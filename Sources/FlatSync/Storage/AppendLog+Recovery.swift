import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension AppendLog {
    /// What ``AppendLog/open(at:durability:now:)`` found in the file.
    package struct Recovery: Sendable {
        /// The payloads of every valid entry, in order.
        package var payloads: [Data]
        /// Bytes of an incomplete last entry that were dropped: it was never acknowledged (a writer died
        /// in the middle of it), so dropping it loses nothing. Zero when the tail was clean.
        package var truncatedTailBytes: Int
        /// Where the damaged file was moved when the log was damaged before its end or in its header.
        package var quarantinedFile: URL?
        /// The damage found, when the file was quarantined: ``FlatSyncError/Code-swift.struct/damagedFile``
        /// (the message names the byte offset) or ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion``.
        package var damage: FlatSyncError?

        package init(
            payloads: [Data] = [],
            truncatedTailBytes: Int = 0,
            quarantinedFile: URL? = nil,
            damage: FlatSyncError? = nil
        ) {
            self.payloads = payloads
            self.truncatedTailBytes = truncatedTailBytes
            self.quarantinedFile = quarantinedFile
            self.damage = damage
        }
    }

    /// Opens the log at `url`, creating it (mode `0600`, atomically) if it does not exist, and reads back
    /// every valid entry.
    ///
    /// Recovery never crashes and never deletes acknowledged data:
    /// - An invalid frame followed by no valid frame anywhere later is a **torn tail** (a writer died in the
    ///   middle of unacknowledged entries): the file is truncated after the last valid frame and flushed,
    ///   and ``Recovery/truncatedTailBytes`` says how much was dropped.
    /// - An invalid frame with a valid frame somewhere after it is **damage**: the file is kept as
    ///   ``Quarantine/keepCopy(of:now:)``, a fresh log holding the valid entries before the damage
    ///   atomically replaces it, and ``Recovery/quarantinedFile`` and ``Recovery/damage`` report it.
    /// - A damaged header, a non-empty file shorter than a header, or an unknown format version: the file
    ///   is quarantined and the log starts empty. An empty file is simply given a header.
    ///
    /// - Parameters:
    ///   - now: the time used in the quarantined file's name.
    ///   - writer: writes a new or repaired log (tests inject failures through it).
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be read, truncated,
    ///   kept aside or created.
    package static func open(
        at url: URL,
        durability: Durability,
        now: Date = Date(),
        writer: DurableFileWriter = DurableFileWriter()
    ) throws(FlatSyncError) -> (AppendLog, Recovery) {
        let path = url.path
        let fd: Int32
        do throws(FlatSyncError) {
            fd = try openForAppending(path)
        } catch {
            guard (error.cause as? POSIXError)?.code == .ENOENT else { throw error }
            return (try create(at: url, payloads: [], durability: durability, writer: writer), Recovery())
        }
        let bytes: [UInt8]
        do throws(FlatSyncError) {
            bytes = try readAll(fd, path: path)
        } catch {
            closeDescriptor(fd)
            throw error
        }
        if bytes.isEmpty {
            // Creation is atomic, so this is not ours, but it holds nothing to lose: give it a header.
            closeDescriptor(fd)
            return (try create(at: url, payloads: [], durability: durability, writer: writer), Recovery())
        }

        let scan = bytes.withUnsafeBytes { scanLog($0) }
        guard let damage = scan.damage else {
            let log = AppendLog(url: url, durability: durability, descriptor: fd, fileSize: scan.validEnd)
            var recovery = Recovery(payloads: scan.payloads)
            if scan.validEnd < bytes.count {
                do throws(FlatSyncError) {
                    try truncate(fd, to: scan.validEnd, path: path)
                } catch {
                    log.close()
                    throw error
                }
                recovery.truncatedTailBytes = bytes.count - scan.validEnd
            }
            return (log, recovery)
        }

        closeDescriptor(fd)
        // Keep the damaged bytes under a second name, then replace the log atomically: whenever a crash
        // comes, the log's name holds either the damaged log (recovered again on the next open) or its repair.
        let quarantined = try Quarantine.keepCopy(of: url, now: now)
        let log = try create(at: url, payloads: scan.payloads, durability: durability, writer: writer)
        let error: FlatSyncError
        switch damage {
        case .header(let reason):
            error = FlatSyncError(
                .damagedFile,
                "The log's header is damaged (\(reason)); the file was moved aside as "
                    + "\(quarantined.lastPathComponent) and an empty log was started.",
                path: path
            )
        case .version(let version):
            error = FlatSyncError(
                .unsupportedFormatVersion,
                "The log has format version \(version), which this FlatSync cannot read (it reads version "
                    + "\(formatVersion)); the file was moved aside as \(quarantined.lastPathComponent) and an "
                    + "empty log was started.",
                path: path
            )
        case .frame(let offset, let reason):
            error = FlatSyncError(
                .damagedFile,
                "The log is damaged at byte offset \(offset) (\(reason)); the \(scan.payloads.count) entries "
                    + "before it were kept and the file was moved aside as \(quarantined.lastPathComponent).",
                path: path
            )
        }
        return (log, Recovery(payloads: scan.payloads, quarantinedFile: quarantined, damage: error))
    }

    // MARK: - Scanning

    /// Damage that needs the file moved aside.
    enum Damage: Equatable {
        case header(String)
        case version(UInt32)
        case frame(offset: Int, reason: String)
    }

    /// The result of reading a whole log file.
    struct Scan {
        /// Payloads of the valid frames before the first invalid one.
        var payloads: [Data] = []
        /// The end of the last valid frame (the header's end when there is none).
        var validEnd: Int
        /// Nil for a clean file or a torn tail (then `validEnd` < the file size).
        var damage: Damage?
    }

    /// Reads the header and the frames of a whole log file. Never traps, whatever the bytes.
    static func scanLog(_ bytes: UnsafeRawBufferPointer) -> Scan {
        guard bytes.count >= headerSize else {
            return Scan(validEnd: 0, damage: .header("the file is \(bytes.count) bytes, shorter than a header"))
        }
        guard bytes.prefix(headerMagic.count).elementsEqual(headerMagic) else {
            return Scan(validEnd: 0, damage: .header("the file does not start with FSYNCLOG"))
        }
        let storedHeaderCRC = loadUInt32(bytes, at: 12)
        guard storedHeaderCRC == CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<12])) else {
            return Scan(validEnd: 0, damage: .header("the header's checksum does not match"))
        }
        let version = loadUInt32(bytes, at: 8)
        guard version == formatVersion else { return Scan(validEnd: 0, damage: .version(version)) }

        var scan = Scan(validEnd: headerSize)
        var offset = headerSize
        while offset < bytes.count {
            switch checkFrame(bytes, at: offset) {
            case .valid(let length):
                let start = offset + frameHeaderSize
                scan.payloads.append(Data(UnsafeRawBufferPointer(rebasing: bytes[start..<start + length])))
                offset = start + length
                scan.validEnd = offset
            case .invalid(let reason):
                if hasValidFrame(bytes, after: offset) {
                    scan.damage = .frame(offset: offset, reason: reason)
                }
                // Otherwise a torn tail: everything from `offset` on was never acknowledged.
                return scan
            }
        }
        return scan
    }

    enum FrameCheck: Equatable {
        case valid(length: Int)
        case invalid(String)
    }

    /// Whether a valid frame starts at `offset`, and why not.
    static func checkFrame(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> FrameCheck {
        let available = bytes.count - offset
        guard available >= frameHeaderSize else {
            return .invalid("an incomplete frame header of \(available) bytes")
        }
        guard loadUInt32(bytes, at: offset) == frameMagic else { return .invalid("no frame marker") }
        let length = Int(loadUInt32(bytes, at: offset + 4))
        guard length <= maxPayloadSize else {
            return .invalid("a frame length of \(length) bytes, over the limit")
        }
        guard length <= available - frameHeaderSize else {
            return .invalid("a frame length of \(length) bytes, past the end of the file")
        }
        guard loadUInt32(bytes, at: offset + 8) == frameChecksum(bytes, at: offset, length: length) else {
            return .invalid("a checksum mismatch")
        }
        return .valid(length: length)
    }

    /// True when a valid frame starts at any byte offset after `offset`.
    static func hasValidFrame(_ bytes: UnsafeRawBufferPointer, after offset: Int) -> Bool {
        var candidate = offset + 1
        let magic = frameMagic.littleEndian
        while bytes.count - candidate >= frameHeaderSize {
            // The marker test rejects almost every offset before the checksum is computed.
            if bytes.loadUnaligned(fromByteOffset: candidate, as: UInt32.self) == magic,
                case .valid = checkFrame(bytes, at: candidate)
            {
                return true
            }
            candidate += 1
        }
        return false
    }

    /// The CRC-32 of a frame's length field and payload.
    private static func frameChecksum(_ bytes: UnsafeRawBufferPointer, at offset: Int, length: Int) -> UInt32 {
        let lengthField = UnsafeRawBufferPointer(rebasing: bytes[offset + 4..<offset + 8])
        let payload = UnsafeRawBufferPointer(
            rebasing: bytes[offset + frameHeaderSize..<offset + frameHeaderSize + length]
        )
        return CRC32.checksum(payload, continuing: CRC32.checksum(lengthField))
    }

    private static func loadUInt32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    // MARK: - File operations

    /// Durably creates (or replaces) the log at `url` holding `payloads`, and opens it.
    private static func create(
        at url: URL,
        payloads: [Data],
        durability: Durability,
        writer: DurableFileWriter
    ) throws(FlatSyncError) -> AppendLog {
        let contents = encodeLog(payloads)
        try writer.write(Data(contents), to: url, permissions: 0o600)
        let fd = try openForAppending(url.path)
        return AppendLog(url: url, durability: durability, descriptor: fd, fileSize: contents.count)
    }

    /// Reads the whole file behind `fd` from its start.
    private static func readAll(_ fd: Int32, path: String) throws(FlatSyncError) -> [UInt8] {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw FlatSyncError.syscall("fstat", errno: errno, path: path) }
        let size = Int(info.st_size)
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            count = 0
            while count < size {
                let result = pread(fd, buffer.baseAddress! + count, size - count, off_t(count))
                if result < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                if result == 0 { return }  // The file shrank since fstat: read what is there.
                count += result
            }
        }
        if failure != 0 { throw FlatSyncError.syscall("read", errno: failure, path: path) }
        return bytes
    }

    /// Cuts the file to `length` bytes and flushes the change.
    private static func truncate(_ fd: Int32, to length: Int, path: String) throws(FlatSyncError) {
        var result: Int32
        repeat {
            result = ftruncate(fd, off_t(length))
        } while result != 0 && errno == EINTR
        guard result == 0 else { throw FlatSyncError.syscall("ftruncate", errno: errno, path: path) }
        guard DurableFileWriter.fullSync(fd) == 0 else {
            throw FlatSyncError.syscall("fsync", errno: errno, path: path)
        }
    }
}

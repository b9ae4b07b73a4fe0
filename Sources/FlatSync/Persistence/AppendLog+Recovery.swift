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

extension AppendLog {
    /// What ``AppendLog/open(at:durability:now:fileSystem:)`` found in the file.
    package struct Recovery: Sendable {
        /// The payloads of every valid entry, in order.
        package var payloads: [Data]
        /// Bytes of an incomplete last entry that were dropped: it was never acknowledged (a writer died
        /// in the middle of it), so dropping it loses nothing. Zero when the tail was clean, or only zeros
        /// (space the log reserves ahead of its end, see ``AppendLog/reservationSize``).
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
    /// - An invalid frame at an offset that no valid frame (and not the header) claims was on stable
    ///   storage is a **torn tail**: the unflushed end of the log when the process died or the power
    ///   went, with any of its sectors missing, even ones before others that landed. It was never
    ///   acknowledged: the file is truncated after the last valid frame before it and flushed, and
    ///   ``Recovery/truncatedTailBytes`` says how much was dropped. A tail of zeros alone is the space the
    ///   log reserves ahead of its end: it is kept for the frames to come.
    /// - An invalid frame in bytes that were claimed durable is **damage**: the file is kept as
    ///   ``Quarantine/keepCopy(of:now:fileSystem:)``, a fresh log holding the valid entries before the
    ///   damage atomically replaces it, and ``Recovery/quarantinedFile`` and ``Recovery/damage`` report it.
    /// - A damaged header, a non-empty file shorter than a header, or an unknown format version: the file
    ///   is quarantined and the log starts empty. An empty file is simply given a header.
    /// - A version 1 log is read with version 1's rule (damage when any valid frame follows an invalid one)
    ///   and rewritten as version 2.
    ///
    /// - Parameters:
    ///   - now: the time used in the quarantined file's name.
    ///   - fileSystem: where the file-system calls go.
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be read, flushed,
    ///   truncated, kept aside or created.
    package static func open(
        at url: URL,
        durability: Durability,
        now: Date = Date(),
        fileSystem: FileSystem = .posix
    ) throws(FlatSyncError) -> (AppendLog, Recovery) {
        let path = url.path
        let fd: Int32
        do throws(FlatSyncError) {
            fd = try openForAppending(path, fileSystem: fileSystem)
        } catch {
            guard (error.cause as? POSIXError)?.code == .ENOENT else { throw error }
            return (try create(at: url, payloads: [], durability: durability, fileSystem: fileSystem), Recovery())
        }
        let bytes: [UInt8]
        do throws(FlatSyncError) {
            bytes = try fileSystem.readAll(fd, path: path)
        } catch {
            fileSystem.close(fd)
            throw error
        }
        if bytes.isEmpty {
            // Creation is atomic, so this is not ours, but it holds nothing to lose: give it a header.
            fileSystem.close(fd)
            return (try create(at: url, payloads: [], durability: durability, fileSystem: fileSystem), Recovery())
        }

        let scan = bytes.withUnsafeBytes { scanLog($0) }
        guard let damage = scan.damage else {
            var recovery = Recovery(
                payloads: scan.payloads, truncatedTailBytes: scan.tailIsZeros ? 0 : bytes.count - scan.validEnd)
            if scan.version != formatVersion {
                fileSystem.close(fd)
                let log = try create(at: url, payloads: scan.payloads, durability: durability, fileSystem: fileSystem)
                recovery.truncatedTailBytes = 0
                return (log, recovery)
            }
            var syncedThrough = scan.provenDurable
            if !scan.tailIsZeros && scan.validEnd < bytes.count {
                do throws(FlatSyncError) {
                    try fileSystem.truncate(fd, to: scan.validEnd, path: path)
                    try fileSystem.sync(fd, path: path)
                } catch {
                    fileSystem.close(fd)
                    throw error
                }
                syncedThrough = scan.validEnd
            }
            // Without that flush the end of the file may be only in the page cache (a process killed before
            // its flush), so new frames claim no more than the file proves; the first flush proves the rest.
            let log = AppendLog(
                url: url, durability: durability, descriptor: fd, fileSize: scan.validEnd,
                allocatedSize: scan.tailIsZeros ? bytes.count : scan.validEnd, syncedThrough: syncedThrough,
                fileSystem: fileSystem)
            return (log, recovery)
        }

        fileSystem.close(fd)
        // Keep the damaged bytes under a second name, then replace the log atomically: whenever a crash
        // comes, the log's name holds either the damaged log (recovered again on the next open) or its repair.
        let quarantined = try Quarantine.keepCopy(of: url, now: now, fileSystem: fileSystem)
        let log = try create(at: url, payloads: scan.payloads, durability: durability, fileSystem: fileSystem)
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
                "The log has format version \(version), which this FlatSync cannot read (it reads versions 1 "
                    + "and \(formatVersion)); the file was moved aside as \(quarantined.lastPathComponent) and an "
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
    package enum Damage: Equatable, Sendable {
        case header(String)
        case version(UInt32)
        case frame(offset: Int, reason: String)
    }

    /// The result of reading a whole log file.
    package struct Scan: Sendable {
        /// The file's format version (0 when the header is damaged).
        package var version: UInt32 = 0
        /// Payloads of the valid frames before the first invalid one.
        package var payloads: [Data] = []
        /// The end of the last valid frame (the header's end when there is none).
        package var validEnd: Int
        /// The highest offset the header or a valid frame claims was durable: every byte before it is.
        package var provenDurable = 0
        /// Nil for a clean file or a torn tail (then `validEnd` < the file size).
        package var damage: Damage?
        /// Every byte after `validEnd` is zero (and there is at least one): reserved space, not a torn tail.
        package var tailIsZeros = false
    }

    /// The layout of one format version.
    struct Layout {
        var version: UInt32
        var headerSize: Int
        var frameHeaderSize: Int

        static let version1 = Layout(version: 1, headerSize: 16, frameHeaderSize: 12)
        static let version2 = Layout(
            version: 2, headerSize: AppendLog.headerSize, frameHeaderSize: AppendLog.frameHeaderSize)
    }

    /// Reads the header and the frames of a whole log file. Never traps, whatever the bytes.
    package static func scanLog(_ bytes: UnsafeRawBufferPointer) -> Scan {
        guard bytes.count >= Layout.version1.headerSize else {
            return Scan(validEnd: 0, damage: .header("the file is \(bytes.count) bytes, shorter than a header"))
        }
        guard bytes.prefix(headerMagic.count).elementsEqual(headerMagic) else {
            return Scan(validEnd: 0, damage: .header("the file does not start with FSYNCLOG"))
        }
        let version = loadUInt32(bytes, at: 8)
        let layout: Layout
        switch version {
        case 1: layout = .version1
        case 2: layout = .version2
        default:
            // An unknown version may lay its header out otherwise: it is a version we cannot read if its
            // checksum matches where either known layout keeps it, and a damaged header if not.
            let checksumMatches = [Layout.version1, .version2].contains { known in
                bytes.count >= known.headerSize
                    && loadUInt32(bytes, at: known.headerSize - 4)
                        == CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<known.headerSize - 4]))
            }
            guard checksumMatches else {
                return Scan(validEnd: 0, damage: .header("the header's checksum does not match"))
            }
            return Scan(validEnd: 0, damage: .version(version))
        }
        guard bytes.count >= layout.headerSize else {
            return Scan(validEnd: 0, damage: .header("the file is \(bytes.count) bytes, shorter than a header"))
        }
        let checksummed = layout.headerSize - 4
        guard
            loadUInt32(bytes, at: checksummed)
                == CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<checksummed]))
        else {
            return Scan(validEnd: 0, damage: .header("the header's checksum does not match"))
        }
        // Everything before this offset was on stable storage before the file got its name.
        let createdLength = layout.version >= 2 ? Int(clamping: loadUInt64(bytes, at: 12)) : 0

        var scan = Scan(version: version, validEnd: layout.headerSize, provenDurable: createdLength)
        var offset = layout.headerSize
        while offset < bytes.count {
            switch checkFrame(bytes, at: offset, layout: layout) {
            case .valid(let length, let claim):
                scan.provenDurable = max(scan.provenDurable, min(claim, offset))
                let start = offset + layout.frameHeaderSize
                scan.payloads.append(Data(UnsafeRawBufferPointer(rebasing: bytes[start..<start + length])))
                offset = start + length
                scan.validEnd = offset
            case .invalid(let reason):
                // Zeros hold no frame: no need to search them byte by byte (a reserved tail is 64 KiB).
                scan.tailIsZeros = isZeroFilled(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
                let later =
                    scan.tailIsZeros ? (count: 0, highestClaim: 0) : validFrames(bytes, after: offset, layout: layout)
                let isDamage: Bool
                if layout.version == 1 {
                    isDamage = later.count > 0
                } else {
                    // Damage only if something claims these bytes were durable; otherwise they were the
                    // unflushed tail, whatever landed after them.
                    isDamage = offset < max(createdLength, later.highestClaim)
                }
                if isDamage { scan.damage = .frame(offset: offset, reason: reason) }
                return scan
            }
        }
        if scan.validEnd < createdLength {
            scan.damage = .frame(
                offset: scan.validEnd,
                reason: "the file ends at byte \(scan.validEnd), before the \(createdLength) bytes it was created with")
        }
        return scan
    }

    enum FrameCheck: Equatable {
        /// A frame with a payload of `length` bytes, which claims the file was durable before `syncedThrough`.
        case valid(length: Int, syncedThrough: Int)
        case invalid(String)
    }

    /// Whether a valid frame starts at `offset`, and why not.
    static func checkFrame(_ bytes: UnsafeRawBufferPointer, at offset: Int, layout: Layout = .version2) -> FrameCheck {
        let available = bytes.count - offset
        guard available >= layout.frameHeaderSize else {
            return .invalid("an incomplete frame header of \(available) bytes")
        }
        guard loadUInt32(bytes, at: offset) == frameMagic else { return .invalid("no frame marker") }
        let length = Int(loadUInt32(bytes, at: offset + 4))
        guard length <= maxPayloadSize else {
            return .invalid("a frame length of \(length) bytes, over the limit")
        }
        guard length <= available - layout.frameHeaderSize else {
            return .invalid("a frame length of \(length) bytes, past the end of the file")
        }
        let checksumOffset = offset + layout.frameHeaderSize - 4
        let fields = UnsafeRawBufferPointer(rebasing: bytes[offset + 4..<checksumOffset])
        let payload = UnsafeRawBufferPointer(
            rebasing: bytes[offset + layout.frameHeaderSize..<offset + layout.frameHeaderSize + length])
        guard loadUInt32(bytes, at: checksumOffset) == CRC32.checksum(payload, continuing: CRC32.checksum(fields))
        else {
            return .invalid("a checksum mismatch")
        }
        let syncedThrough = layout.version >= 2 ? Int(clamping: loadUInt64(bytes, at: offset + 8)) : 0
        return .valid(length: length, syncedThrough: syncedThrough)
    }

    /// The valid frames found at any byte offset after `offset`: how many, and the highest offset they claim
    /// was durable.
    static func validFrames(_ bytes: UnsafeRawBufferPointer, after offset: Int, layout: Layout = .version2)
        -> (count: Int, highestClaim: Int)
    {
        var found = (count: 0, highestClaim: 0)
        var candidate = offset + 1
        let magic = frameMagic.littleEndian
        while bytes.count - candidate >= layout.frameHeaderSize {
            // The marker test rejects almost every offset before the checksum is computed.
            if bytes.loadUnaligned(fromByteOffset: candidate, as: UInt32.self) == magic,
                case .valid(let length, let claim) = checkFrame(bytes, at: candidate, layout: layout)
            {
                found.count += 1
                // A frame can only know about bytes before itself.
                found.highestClaim = max(found.highestClaim, min(claim, candidate))
                candidate += layout.frameHeaderSize + length
            } else {
                candidate += 1
            }
        }
        return found
    }

    /// True when every byte is zero.
    static func isZeroFilled(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while bytes.count - offset >= 8 {
            if bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self) != 0 { return false }
            offset += 8
        }
        return bytes[offset...].allSatisfy { $0 == 0 }
    }

    private static func loadUInt32(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt32 {
        UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    private static func loadUInt64(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    // MARK: - File operations

    /// Durably creates (or replaces) the log at `url` holding `payloads`, and opens it.
    private static func create(
        at url: URL,
        payloads: [Data],
        durability: Durability,
        fileSystem: FileSystem
    ) throws(FlatSyncError) -> AppendLog {
        let contents = encodeLog(payloads)
        try DurableFileWriter(fileSystem: fileSystem).write(Data(contents), to: url, permissions: 0o600)
        let fd = try openForAppending(url.path, fileSystem: fileSystem)
        return AppendLog(
            url: url, durability: durability, descriptor: fd, fileSize: contents.count, fileSystem: fileSystem)
    }
}

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

/// Moves damaged files out of the way without ever deleting them.
///
/// A damaged file is renamed to `<name>.corrupt-<UTC timestamp>` (for example
/// `commands.log.corrupt-20261122T045734Z`) in the same directory, so a person or a support tool can
/// still look at it, and the store can start again under the original name. Call it only while holding
/// the directory's lock.
package enum Quarantine {
    /// The marker between a file's name and the timestamp of its quarantine.
    package static let marker = ".corrupt-"

    /// Renames the file at `url` to `<name>.corrupt-<timestamp>` (with `-2`, `-3`… appended if that name
    /// is taken), then flushes the directory so the rename is durable.
    ///
    /// - Returns: the file's new location.
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the rename or the directory flush fails, or
    ///   when whether a name is taken cannot be told.
    @discardableResult
    package static func moveAside(_ url: URL, now: Date = Date(), fileSystem: FileSystem = .posix)
        throws(FlatSyncError) -> URL
    {
        let destination = try freeName(for: url, now: now, fileSystem: fileSystem)
        try fileSystem.rename(url.path, to: destination.path)
        try fileSystem.syncDirectory(url.deletingLastPathComponent().path)
        return destination
    }

    /// Gives the file at `url` a second, durable name `<name>.corrupt-<timestamp>` and leaves it where it is.
    ///
    /// Use this instead of ``moveAside(_:now:fileSystem:)`` when a repaired file is about to replace the damaged one
    /// atomically: the original name then always holds a file, the damaged one or its repair, so a crash
    /// in between never opens an empty store. The copy is a hard link (the same bytes, no copying); where
    /// the file system has no hard links it is a durable copy.
    ///
    /// - Returns: the copy's location.
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when neither a link nor a copy can be made, or
    ///   when whether a name is taken cannot be told.
    @discardableResult
    package static func keepCopy(of url: URL, now: Date = Date(), fileSystem: FileSystem = .posix)
        throws(FlatSyncError) -> URL
    {
        let destination = try freeName(for: url, now: now, fileSystem: fileSystem)
        do {
            try fileSystem.link(url.path, to: destination.path)
        } catch {
            // No hard links here (or the link failed): fall back to a durable copy.
            if !fileSystem.exists(url.path) { throw error }
            guard let data = try fileSystem.readFile(url.path) else {
                throw FlatSyncError(.ioFailed, "The damaged file vanished before a copy could be kept.", path: url.path)
            }
            try DurableFileWriter(fileSystem: fileSystem).write(data, to: destination)
            return destination
        }
        try fileSystem.syncDirectory(url.deletingLastPathComponent().path)
        return destination
    }

    /// `<name>.corrupt-<timestamp>` next to `url`, with `-2`, `-3`… appended while that name is taken.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when whether a name is taken cannot be told:
    ///   taken for free, it could be an earlier damaged file's, which the rename or copy would replace.
    private static func freeName(for url: URL, now: Date, fileSystem: FileSystem) throws(FlatSyncError) -> URL {
        let directory = url.deletingLastPathComponent()
        let base = url.lastPathComponent + marker + timestamp(now)
        var destination = directory.appendingPathComponent(base)
        var suffix = 1
        while try fileSystem.itemKind(destination.path) != nil {
            suffix += 1
            destination = directory.appendingPathComponent("\(base)-\(suffix)")
        }
        return destination
    }

    /// True when `name` is the name of a quarantined file: `<name>.corrupt-YYYYMMDDTHHMMSSZ`, optionally
    /// followed by `-<number>`.
    package static func isQuarantined(_ name: String) -> Bool {
        // The last occurrence of the marker, which must not start the name.
        let bytes = Array(name.utf8)
        let mark = Array(marker.utf8)
        var start = bytes.count - mark.count
        while start > 0 && !bytes[start..<start + mark.count].elementsEqual(mark) { start -= 1 }
        guard start > 0 else { return false }
        let rest = Array(bytes[(start + mark.count)...])
        // YYYYMMDD T HHMMSS Z
        guard rest.count >= 16 else { return false }
        func digits(_ slice: ArraySlice<UInt8>) -> Bool {
            slice.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        }
        guard digits(rest[0..<8]), rest[8] == UInt8(ascii: "T"), digits(rest[9..<15]), rest[15] == UInt8(ascii: "Z")
        else { return false }
        if rest.count == 16 { return true }
        return rest[16] == UInt8(ascii: "-") && rest.count > 17 && digits(rest[17...])
    }

    /// `date` in UTC as `YYYYMMDDTHHMMSSZ`.
    package static func timestamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1, 2) + pad(parts.tm_mday, 2) + "T"
            + pad(parts.tm_hour, 2) + pad(parts.tm_min, 2) + pad(parts.tm_sec, 2) + "Z"
    }
}

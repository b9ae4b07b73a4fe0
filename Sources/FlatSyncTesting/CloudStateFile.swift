import FlatSync
import Foundation

/// The file in which a ``DirectoryCloud`` keeps its `CloudDatabase`.
///
/// Layout: a 24-byte header of fixed-width fields (written with FlatSync's `BinaryWriter`), then the
/// database as a binary property list, in which each zone's records are one blob packed with the same
/// codec (see `ZoneState.packSlots`).
///
/// | bytes | content |
/// |---|---|
/// | 0..<8 | the signature `FSCLOUD` and a zero byte |
/// | 8..<12 | the format version, little-endian |
/// | 12..<16 | the CRC-32 of the property list, little-endian |
/// | 16..<24 | the length of the property list, little-endian |
///
/// Format versions: 2 — records keep the device that last modified them; 3 — the record blobs use
/// FlatSync's codec (varints, zig-zag integers, optional strings) instead of fixed-width integers.
///
/// The length and checksum catch a truncated, extended or altered file with certainty, so damage is
/// reported instead of being decoded into a wrong server.
package enum CloudStateFile {
    static let signature: [UInt8] = Array("FSCLOUD".utf8) + [0]
    static let formatVersion: UInt32 = 3
    package static let headerSize = 24

    /// The database in `url`, or `nil` when there is no file yet.
    ///
    /// - Throws: `CloudError.Code.internalError` naming the file when it cannot be read,
    ///   is damaged, or was written by a newer format.
    package static func read(_ url: URL, fileSystem: FileSystem = .posix) throws(CloudError) -> CloudDatabase? {
        let data: Data
        do {
            guard let contents = try fileSystem.readFile(url.path) else { return nil }
            data = contents
        } catch {
            throw CloudError(
                .internalError, "Could not read the DirectoryCloud state file \(url.path): \(error.message)")
        }
        return try decode(data, from: url)
    }

    package static func decode(_ data: Data, from url: URL) throws(CloudError) -> CloudDatabase {
        guard data.count >= headerSize else {
            throw damaged(url, "it is \(data.count) bytes long, shorter than its \(headerSize)-byte header")
        }
        let header: (signature: [UInt8], version: UInt32, crc: UInt32, length: UInt64)
        do throws(FlatSyncError) {
            header = try data.withBinaryReader { (reader) throws(FlatSyncError) in
                let found = try reader.readRaw(count: signature.count)
                return (found, try reader.readFixed32(), try reader.readFixed32(), try reader.readFixed64())
            }
        } catch {
            // Not expected: the file is at least as long as the header.
            throw damaged(url, "its header does not read (\(error.message))")
        }
        guard header.signature == signature else {
            throw damaged(url, "it does not start with the DirectoryCloud signature")
        }
        let (version, crc, length) = (header.version, header.crc, header.length)
        guard version == formatVersion else {
            if version > formatVersion {
                throw CloudError(
                    .internalError,
                    "The DirectoryCloud state file \(url.path) has format version \(version), written by a newer "
                        + "FlatSync; this one reads version \(formatVersion). Use the newer FlatSync, or move the "
                        + "file aside to start over with an empty cloud."
                )
            }
            throw damaged(url, "its format version is \(version)")
        }
        let payload = data.dropFirst(headerSize)
        guard length == UInt64(payload.count) else {
            throw damaged(
                url, "its header promises \(length) bytes of state but \(payload.count) follow (cut short or extended)")
        }
        guard crc == payload.withUnsafeBytes({ CRC32.checksum($0) }) else {
            throw damaged(url, "its checksum does not match its contents")
        }
        do {
            let payload = Data(payload)
            try BinaryPropertyList.validate(payload)
            return try PropertyListDecoder().decode(CloudDatabase.self, from: payload)
        } catch {
            throw damaged(url, "its contents do not decode (\(error))")
        }
    }

    package static func encode(_ database: CloudDatabase) throws(CloudError) -> Data {
        let payload: Data
        do {
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .binary
            payload = try encoder.encode(database)
        } catch {
            throw CloudError(.internalError, "Could not encode the DirectoryCloud state: \(error)")
        }
        var header = BinaryWriter(capacity: headerSize)
        header.write(raw: signature)
        header.write(fixed32: formatVersion)
        header.write(fixed32: CRC32.checksum(payload))
        header.write(fixed64: UInt64(payload.count))
        return header.data + payload
    }

    /// Replaces the file durably: afterwards it holds the new state, or (after a crash) the old one.
    package static func write(_ database: CloudDatabase, to url: URL, fileSystem: FileSystem = .posix)
        throws(CloudError)
    {
        let data = try encode(database)
        do {
            try DurableFileWriter(fileSystem: fileSystem).write(data, to: url)
        } catch {
            throw CloudError(
                .internalError,
                "Could not save the DirectoryCloud state file \(url.path): \(error.message). "
                    + "The request may not have been applied."
            )
        }
    }

    private static func damaged(_ url: URL, _ reason: String) -> CloudError {
        CloudError(
            .internalError,
            "The DirectoryCloud state file \(url.path) is damaged: \(reason). It was left untouched. To start "
                + "over with an empty cloud, move the file aside (or delete the cloud directory); devices will "
                + "then upload their data again."
        )
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `refused-changes.plist`: which pending changes the server refused, and why (see ``RefusedChange``).
///
/// The changes themselves stay in the command log; this file only remembers that they are parked, so a
/// restart neither sends them again on its own nor forgets to report them. It is a binary property list of
/// a format version, the refusals (a property list of their own) and the CRC-32 of those bytes. Losing it
/// loses nothing: a parked change it no longer names is sent once more and, if refused again, parked again.
package struct RefusedChangesFile: Codable, Sendable {
    package static let currentFormatVersion = 1
    package static let fileName = "refused-changes.plist"

    package var formatVersion = RefusedChangesFile.currentFormatVersion
    /// The refusals as a binary property list.
    package var refusals: Data
    /// The CRC-32 of ``refusals``.
    package var checksum: UInt32

    /// The file's bytes for `refusals`.
    package static func encoded(_ refusals: [RefusedChange]) throws(FlatSyncError) -> Data {
        let payload = try BinaryPropertyList.encode(refusals, what: fileName)
        let file = RefusedChangesFile(refusals: payload, checksum: CRC32.checksum(payload))
        return try BinaryPropertyList.encode(file, what: fileName)
    }

    /// Decodes and checks the file, failing with ``FlatSyncError/Code-swift.struct/damagedFile`` or
    /// ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion``.
    package static func decode(_ data: Data, path: String) throws(FlatSyncError) -> [RefusedChange] {
        let file = try BinaryPropertyList.decode(
            RefusedChangesFile.self, from: data, damage: "\(fileName) is not readable.", path: path)
        guard file.formatVersion == currentFormatVersion else {
            throw FlatSyncError(
                .unsupportedFormatVersion,
                "\(fileName) has format version \(file.formatVersion); this FlatSync reads version "
                    + "\(currentFormatVersion).",
                path: path)
        }
        guard CRC32.checksum(file.refusals) == file.checksum else {
            throw FlatSyncError(.damagedFile, "\(fileName)'s checksum does not match its contents.", path: path)
        }
        return try BinaryPropertyList.decode(
            [RefusedChange].self, from: file.refusals, damage: "\(fileName)'s refusals are not readable.", path: path)
    }
}

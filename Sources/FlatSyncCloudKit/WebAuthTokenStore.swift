import FlatSync
import Foundation
import Synchronization

/// Where ``CloudKitWebServicesTransport`` keeps the user's CloudKit web auth token between requests
/// and across restarts.
///
/// CloudKit Web Services hands out a new token with every response; the transport saves each new one
/// here before it sends its next request, so a restart carries on with the newest token. A token is a
/// credential: implementations must not log it.
public protocol WebAuthTokenStore: Sendable {
    /// The saved token, or `nil` when the user has not signed in (or signed out).
    func loadToken() async throws -> String?
    /// Saves `token` durably, replacing the previous one; `nil` forgets it.
    func saveToken(_ token: String?) async throws
}

/// Keeps the web auth token in memory only: for tests, and for hosts that keep credentials elsewhere
/// (a keychain) and hand the token in at launch.
public final class InMemoryWebAuthTokenStore: WebAuthTokenStore {
    private let token: Mutex<String?>

    /// A store holding `token`.
    public init(token: String? = nil) {
        self.token = Mutex(token)
    }

    /// The token held, if any.
    public func loadToken() -> String? { token.withLock { $0 } }

    /// Holds `newToken`, or forgets the token (nil).
    public func saveToken(_ newToken: String?) {
        token.withLock { $0 = newToken }
    }
}

/// Keeps the web auth token in a file in the device directory, `cloudkit-web-auth-token`, written
/// durably (temporary file, `fsync`, rename, directory `fsync`) with mode `0600`, through FlatSync's
/// file-system seam like every other file of the directory.
///
/// The file is self-checking (a magic number, a format version and a CRC-32). A damaged file is moved
/// aside as `<name>.corrupt-<timestamp>` and reads as "no token": the user signs in again, and nothing
/// else is lost.
public final class DirectoryWebAuthTokenStore: WebAuthTokenStore {
    /// The file's name in the device directory.
    public static let fileName = "cloudkit-web-auth-token"

    /// The file holding the token.
    public let file: URL
    private let fileSystem: FileSystem

    private static let magic: [UInt8] = Array("FSWA".utf8)
    private static let formatVersion: UInt8 = 1

    /// A store in `directory` (the device directory). A directory that does not exist yet is created,
    /// durably, when the first token is saved.
    public convenience init(directory: URL) {
        self.init(directory: directory, fileSystem: .posix)
    }

    package init(directory: URL, fileSystem: FileSystem) {
        file = directory.appendingPathComponent(Self.fileName)
        self.fileSystem = fileSystem
    }

    /// The token in the file, or nil when there is none; a damaged file is moved aside and reads as none.
    public func loadToken() throws -> String? {
        guard let data = try fileSystem.readFile(file.path) else { return nil }
        if let token = Self.decode(data) { return token }
        // Never lose the bytes silently: keep them under the quarantine name for a person to look at.
        try Quarantine.moveAside(file, fileSystem: fileSystem)
        return nil
    }

    /// Writes `token` durably, or removes the file (nil).
    public func saveToken(_ token: String?) throws {
        let directory = file.deletingLastPathComponent().path
        guard let token else {
            guard fileSystem.exists(file.path) else { return }
            try fileSystem.unlink(file.path)
            try fileSystem.syncDirectory(directory)
            return
        }
        // A device directory that does not exist yet (a sign-in before the store's first open) is created
        // with each new level's parent flushed; an existing one costs one check.
        try fileSystem.createDirectory(directory)
        try DurableFileWriter(fileSystem: fileSystem).write(Self.encode(token), to: file, permissions: 0o600)
    }

    static func encode(_ token: String) -> Data {
        var writer = BinaryWriter()
        writer.write(raw: magic)
        writer.write(formatVersion)
        writer.write(token)
        writer.write(fixed32: writer.bytes.withUnsafeBytes { CRC32.checksum($0) })
        return writer.data
    }

    /// The token in `data`, or `nil` when the bytes are not a whole, intact token file.
    static func decode(_ data: Data) -> String? {
        guard data.count > magic.count + 1 + 4 else { return nil }
        let body = data.dropLast(4)
        let stored = try? data.suffix(4).withBinaryReader { (reader) throws(FlatSyncError) in try reader.readFixed32() }
        guard stored == body.withUnsafeBytes({ CRC32.checksum($0) }) else { return nil }
        return try? Data(body).withBinaryReader { (reader) throws(FlatSyncError) -> String? in
            guard try reader.readRaw(count: magic.count) == magic, try reader.readByte() == formatVersion else {
                return nil
            }
            let token = try reader.readString()
            return reader.isAtEnd ? token : nil
        }
    }
}

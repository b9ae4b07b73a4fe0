import FlatSync
import Foundation

// Change tokens are opaque to clients. Inside: a magic number, a format version, what the token is for
// (a zone or the database), the server's ID and epoch, the position (varints, in FlatSync's binary
// codec), and a CRC-32 of all of it in the last four bytes, so garbage bytes are refused with certainty
// instead of being misread as a position.
//
// A zone token holds a fetch window rather than a single position:
//   base    the oldest position the client's knowledge rests on (the token it started paging from,
//           or, paging from nil, the zone's position when the first page was served);
//   cursor  every change up to here has been delivered; the next page starts after it;
//   mint    the zone's position when the token was minted.
// A deleted record is reported when it existed anywhere in base...mint, which is exactly "existed at
// the token" for a complete token (base == cursor == mint) and never misses a record delivered on an
// earlier page. See `fetchZoneChanges`.

extension CloudDatabase {
    private static let tokenMagic: [UInt8] = Array("FSCT".utf8)
    /// 2: varints instead of fixed-width integers.
    private static let tokenVersion: UInt8 = 2

    private enum TokenKind: UInt8 {
        case zone = 1, database = 2
    }

    /// What a zone token says.
    struct ZoneTokenWindow: Equatable {
        var base: UInt64
        var cursor: UInt64
        var mint: UInt64
    }

    func makeZoneToken(_ zone: ZoneState, _ window: ZoneTokenWindow) -> ChangeToken {
        var writer = tokenWriter(.zone, epoch: zone.epoch)
        writer.write(varint: zone.generation)
        writer.write(varint: window.base)
        writer.write(varint: window.cursor)
        writer.write(varint: window.mint)
        writer.write(zone.id.name)
        return sealed(writer)
    }

    /// Where a database token says a fetch of the database's changes stands.
    struct DatabasePosition {
        /// Changes after this position are reported (0: from the start).
        var since: UInt64
        /// While paging: the database's position when the first page was served, and the last zone
        /// name served so far (the next page starts after it, in name order).
        var paging: (startedAt: UInt64, after: String)?
    }

    /// A token for the database's position now, or, while paging, for a page ending at a zone.
    func makeDatabaseToken(_ position: DatabasePosition? = nil) -> ChangeToken {
        var writer = tokenWriter(.database, epoch: databaseEpoch)
        writer.write(varint: position?.since ?? databaseSequence)
        if let paging = position?.paging {
            writer.write(varint: paging.startedAt)
            writer.write(paging.after)
        }
        return sealed(writer)
    }

    /// The window of a token minted by this server for `zone`, or changeTokenExpired explaining why
    /// the token cannot be used.
    func readZoneToken(_ token: ChangeToken, for zone: ZoneState) throws(CloudError) -> ZoneTokenWindow {
        let parsed = try openToken(token, expecting: .zone) {
            (reader) throws(FlatSyncError) -> (epoch: UInt64, generation: UInt64, window: ZoneTokenWindow, name: String)
            in
            let epoch = try reader.readVarint()
            let generation = try reader.readVarint()
            let base = try reader.readVarint()
            let window = ZoneTokenWindow(base: base, cursor: try reader.readVarint(), mint: try reader.readVarint())
            return (epoch, generation, window, try reader.readString())
        }
        let name = zone.id
        guard parsed.name == name.name else {
            throw Self.expired("The change token belongs to the zone \(parsed.name), not \(name).")
        }
        guard parsed.generation == zone.generation else {
            throw Self.expired("The zone \(name) was deleted after the change token was minted.")
        }
        guard parsed.epoch == zone.epoch else {
            throw Self.expired("The server expired the change tokens of the zone \(name).")
        }
        let window = parsed.window
        guard window.cursor <= window.mint, window.base <= window.mint, window.mint <= zone.sequence else {
            throw Self.expired("The change token names a position the zone \(name) never reached.")
        }
        guard window.base >= zone.horizon else {
            throw Self.expired(
                "The change token is older than the history the zone \(name) keeps "
                    + "(its last \(changeHistoryLimit.map(String.init) ?? "?") changes)."
            )
        }
        return window
    }

    /// The position of a database token minted by this server, or changeTokenExpired.
    func readDatabaseToken(_ token: ChangeToken) throws(CloudError) -> DatabasePosition {
        let (epoch, position) = try openToken(token, expecting: .database) {
            (reader) throws(FlatSyncError) -> (UInt64, DatabasePosition) in
            let epoch = try reader.readVarint()
            var position = DatabasePosition(since: try reader.readVarint())
            if !reader.isAtEnd { position.paging = (try reader.readVarint(), try reader.readString()) }
            return (epoch, position)
        }
        guard epoch == databaseEpoch else {
            throw Self.expired("The server expired the database's change tokens.")
        }
        guard position.since <= databaseSequence, (position.paging?.startedAt ?? 0) <= databaseSequence else {
            throw Self.expired("The change token names a position the database never reached.")
        }
        return position
    }

    // MARK: - Framing

    private func tokenWriter(_ kind: TokenKind, epoch: UInt64) -> BinaryWriter {
        var writer = BinaryWriter()
        writer.write(raw: Self.tokenMagic)
        writer.write(Self.tokenVersion)
        writer.write(kind.rawValue)
        writer.write(varint: serverID)
        writer.write(varint: epoch)
        return writer
    }

    private func sealed(_ writer: BinaryWriter) -> ChangeToken {
        var writer = writer
        writer.write(fixed32: writer.bytes.withUnsafeBytes { CRC32.checksum($0) })
        return ChangeToken(data: writer.data)
    }

    /// Checks the frame (checksum, magic, version, server, kind), then reads the fields after the epoch
    /// with `readFields`, which must consume them all.
    ///
    /// - Throws: changeTokenExpired saying why the token cannot be used.
    private func openToken<Fields>(
        _ token: ChangeToken,
        expecting kind: TokenKind,
        _ readFields: (inout BinaryReader) throws(FlatSyncError) -> Fields
    ) throws(CloudError) -> Fields {
        let crcSize = 4
        guard token.data.count >= crcSize else { throw Self.unreadableToken() }
        let body = token.data.dropLast(crcSize)
        let crc = try? token.data.suffix(crcSize).withBinaryReader { (reader) throws(FlatSyncError) in
            try reader.readFixed32()
        }
        guard crc == body.withUnsafeBytes({ CRC32.checksum($0) }) else { throw Self.unreadableToken() }
        // Frame problems come back as a failure, damage inside the frame as a thrown FlatSyncError.
        let opened: Result<Fields, CloudError>
        do throws(FlatSyncError) {
            opened = try body.withBinaryReader { (reader) throws(FlatSyncError) -> Result<Fields, CloudError> in
                guard try reader.readRaw(count: Self.tokenMagic.count) == Self.tokenMagic,
                    try reader.readByte() == Self.tokenVersion
                else {
                    return .failure(Self.unreadableToken())
                }
                let foundKind = try reader.readByte()
                guard try reader.readVarint() == serverID else {
                    return .failure(Self.expired("The change token was minted by another server."))
                }
                guard foundKind == kind.rawValue else {
                    return .failure(
                        Self.expired(
                            kind == .zone
                                ? "The change token is a database token, not a zone token."
                                : "The change token is a zone token, not a database token."
                        )
                    )
                }
                let fields = try readFields(&reader)
                return reader.isAtEnd ? .success(fields) : .failure(Self.unreadableToken())
            }
        } catch {
            throw Self.unreadableToken()
        }
        return try opened.get()
    }

    private static func unreadableToken() -> CloudError {
        expired("The change token is not one this server minted (damaged bytes, or not a token at all).")
    }

    private static func expired(_ reason: String) -> CloudError {
        CloudError(.changeTokenExpired, reason + " Fetch again from a nil token.")
    }
}

import FlatSync
import Foundation

// Change tokens are opaque to clients. Inside: a magic number, a format version, what the token is for
// (a zone or the database), the server's ID and epoch, the position, and a CRC-32 of all of it, so
// garbage bytes are refused with certainty instead of being misread as a position.
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
    private static let tokenVersion: UInt8 = 1

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
        writer.append(zone.generation)
        writer.append(window.base)
        writer.append(window.cursor)
        writer.append(window.mint)
        writer.append(zone.id.name)
        return sealed(writer)
    }

    func makeDatabaseToken() -> ChangeToken {
        var writer = tokenWriter(.database, epoch: databaseEpoch)
        writer.append(databaseSequence)
        return sealed(writer)
    }

    /// The window of a token minted by this server for `zone`, or changeTokenExpired explaining why
    /// the token cannot be used.
    func readZoneToken(_ token: ChangeToken, for zone: ZoneState) throws(CloudError) -> ZoneTokenWindow {
        var reader = try openToken(token, expecting: .zone)
        let parsed: (epoch: UInt64, generation: UInt64, window: ZoneTokenWindow, name: String)
        do throws(BinaryReader.Malformed) {
            let epoch = try reader.uint64()
            let generation = try reader.uint64()
            let window = ZoneTokenWindow(base: try reader.uint64(), cursor: try reader.uint64(), mint: try reader.uint64())
            parsed = (epoch, generation, window, try reader.string())
        } catch {
            throw Self.unreadableToken()
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
    func readDatabaseToken(_ token: ChangeToken) throws(CloudError) -> UInt64 {
        var reader = try openToken(token, expecting: .database)
        let epoch: UInt64
        let sequence: UInt64
        do throws(BinaryReader.Malformed) {
            epoch = try reader.uint64()
            sequence = try reader.uint64()
        } catch {
            throw Self.unreadableToken()
        }
        guard epoch == databaseEpoch else {
            throw Self.expired("The server expired the database's change tokens.")
        }
        guard sequence <= databaseSequence else {
            throw Self.expired("The change token names a position the database never reached.")
        }
        return sequence
    }

    // MARK: - Framing

    private func tokenWriter(_ kind: TokenKind, epoch: UInt64) -> BinaryWriter {
        var writer = BinaryWriter()
        writer.append(Self.tokenMagic)
        writer.append(Self.tokenVersion)
        writer.append(kind.rawValue)
        writer.append(serverID)
        writer.append(epoch)
        return writer
    }

    private func sealed(_ writer: BinaryWriter) -> ChangeToken {
        var writer = writer
        let crc = writer.bytes.withUnsafeBytes { CRC32.checksum($0) }
        writer.append(crc)
        return ChangeToken(data: Data(writer.bytes))
    }

    /// Checks the frame (checksum, magic, version, server, kind) and returns a reader at the epoch.
    private func openToken(_ token: ChangeToken, expecting kind: TokenKind) throws(CloudError) -> BinaryReader {
        let bytes = Array(token.data)
        let header = Self.tokenMagic.count + 2 + 8
        guard bytes.count >= header + 4 else { throw Self.unreadableToken() }
        let body = bytes[..<(bytes.count - 4)]
        var crcReader = BinaryReader(Array(bytes[(bytes.count - 4)...]))
        guard let crc = try? crcReader.uint32(), crc == body.withUnsafeBytes({ CRC32.checksum($0) }) else {
            throw Self.unreadableToken()
        }
        let magic = Self.tokenMagic.count
        guard body.starts(with: Self.tokenMagic), body[magic] == Self.tokenVersion else {
            throw Self.unreadableToken()
        }
        let foundKind = body[magic + 1]
        var reader = BinaryReader(Array(body.dropFirst(magic + 2)))
        guard (try? reader.uint64()) == serverID else {
            throw Self.expired("The change token was minted by another server.")
        }
        guard foundKind == kind.rawValue else {
            throw Self.expired(
                kind == .zone ? "The change token is a database token, not a zone token."
                    : "The change token is a zone token, not a database token."
            )
        }
        return reader
    }

    private static func unreadableToken() -> CloudError {
        expired("The change token is not one this server minted (damaged bytes, or not a token at all).")
    }

    private static func expired(_ reason: String) -> CloudError {
        CloudError(.changeTokenExpired, reason + " Fetch again from a nil token.")
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `device.plist`: the device's identity and the sync engine's bookkeeping for the directory.
///
/// A binary property list holding a format version and a CRC-32 of every other field, so that damage is
/// noticed (and the file quarantined) instead of being read as a garbled device ID or change token.
/// Version 1 files, written before the checksum, are still read.
///
/// The device ID also lives in ``DeviceIdentityFile`` (`device-id.plist`), written once when the ID is
/// made: a damaged `device.plist` then never changes the device's identity.
package struct DeviceFile: Codable, Sendable, Equatable {
    package static let currentFormatVersion = 2
    package static let fileName = "device.plist"

    package var formatVersion = DeviceFile.currentFormatVersion
    /// Identifies this device in history items (`deviceID`).
    package var deviceID: String
    /// The account whose data the directory holds; `nil` before the first sync.
    package var account: String?
    /// Where the last database-changes fetch ended.
    package var databaseChangeToken: Data?
    /// The zones this device has made sure exist on the server.
    package var preparedZones: [String] = []
    /// Zones whose local data must be uploaded to a zone created fresh on the server.
    package var zonesToSeed: [String] = []
    /// The zones this device has made sure the server notifies of changes (a zone subscription exists).
    /// Optional because files written before it have no such key, and they must still decode.
    package var subscribedZones: [String]?
    /// How many pushes in a row waited on the `retryAfter` of a record's refusal, by zone and record name
    /// (see ``SyncContext/refusalWaits``), so that a restart does not give a record its waits again.
    /// Absent while empty, as in files written before it.
    package var refusalWaits: [String: [String: Int]]?
    /// The same for requests refused as a whole, by zone (``SyncContext/requestRefusalWaits``).
    package var requestRefusalWaits: [String: Int]?
    /// Zones wiped, for a deletion by the user, since ``databaseChangeToken`` was saved. A fetch that wiped
    /// a zone and then stopped did not save its token, so the next fetch from the same token lists the
    /// deletion again: this says it was dealt with, and changes made since the wipe are not wiped too. A
    /// fetch that saves a token clears the zones noted before it listed the database's changes (the new
    /// token is past their deletions). Absent while empty, as in files written before it.
    package var zonesWipedSinceToken: [String]?
    /// The mutation sequence number of each wipe in ``zonesWipedSinceToken``, noted with it before the
    /// wipe: a note whose wipe neither the log nor the zone's snapshot holds (the process ended between
    /// the two) is wiped when the store opens (see `LocalStore.Recovery`). Absent while empty, as in files
    /// written before it; a note without a sequence is not redone.
    package var zoneWipeSequences: [String: UInt64]?
    /// Zones a listing of the database's changes named while this version of the app did not register
    /// them (a host type it dropped), by name: `deleted` for a deletion listed from a token, or a zone this
    /// device prepared that a listing from nil (which names every zone there is) did not name; `changed`
    /// otherwise. The database token moves past such a listing, so a later version that registers the type
    /// again would miss it: a `SyncContext` that opens with the type registered wipes a zone listed deleted
    /// (as a deletion listed from its own token) before anything is sent to it, and its first full fetch
    /// fetches one listed changed. Absent while empty, as in files written before it.
    package var zonesListedWhileNotOpen: [String: ZoneListing]?
    /// Zones the user deleted that this device wiped and has not created again: one is created only for a
    /// change to send in it, so that another device's change made before the deletion meets it missing and
    /// is wiped, as the user asked, rather than sent into a zone this device created empty. A zone found
    /// existing again (another device created it for a later change) leaves the list. Absent while empty,
    /// as in files written before it.
    package var zonesLeftDeleted: [String]?
    /// The CRC-32 of the fields above; absent in version 1.
    package var checksum: UInt32?

    package init(deviceID: String) {
        self.deviceID = deviceID
    }

    /// The CRC-32 of every field but the checksum.
    private func computedChecksum() -> UInt32 {
        var writer = BinaryWriter()
        writer.write(varint: UInt64(formatVersion))
        writer.write(deviceID)
        writer.write(account as String?)
        writer.write(UInt8(databaseChangeToken == nil ? 0 : 1))
        if let databaseChangeToken { writer.write(databaseChangeToken) }
        writer.write(varint: UInt64(preparedZones.count))
        for zone in preparedZones { writer.write(zone) }
        writer.write(varint: UInt64(zonesToSeed.count))
        for zone in zonesToSeed { writer.write(zone) }
        // Added after version 2 files were written: covered only when there is something to cover, so a
        // version 2 file that predates it still verifies.
        if let subscribedZones, !subscribedZones.isEmpty {
            writer.write(varint: UInt64(subscribedZones.count))
            for zone in subscribedZones { writer.write(zone) }
        }
        // Added later still, on the same terms; in key order, so that the sum does not depend on a
        // dictionary's order.
        if let refusalWaits, !refusalWaits.isEmpty {
            writer.write(varint: UInt64(refusalWaits.count))
            for (zone, records) in refusalWaits.sorted(by: { $0.key < $1.key }) {
                writer.write(zone)
                writer.write(varint: UInt64(records.count))
                for (name, count) in records.sorted(by: { $0.key < $1.key }) {
                    writer.write(name)
                    writer.write(varint: UInt64(max(0, count)))
                }
            }
        }
        if let requestRefusalWaits, !requestRefusalWaits.isEmpty {
            writer.write(varint: UInt64(requestRefusalWaits.count))
            for (zone, count) in requestRefusalWaits.sorted(by: { $0.key < $1.key }) {
                writer.write(zone)
                writer.write(varint: UInt64(max(0, count)))
            }
        }
        if let zonesWipedSinceToken, !zonesWipedSinceToken.isEmpty {
            writer.write(varint: UInt64(zonesWipedSinceToken.count))
            for zone in zonesWipedSinceToken { writer.write(zone) }
        }
        if let zoneWipeSequences, !zoneWipeSequences.isEmpty {
            writer.write(varint: UInt64(zoneWipeSequences.count))
            for (zone, sequence) in zoneWipeSequences.sorted(by: { $0.key < $1.key }) {
                writer.write(zone)
                writer.write(varint: sequence)
            }
        }
        if let zonesListedWhileNotOpen, !zonesListedWhileNotOpen.isEmpty {
            writer.write(varint: UInt64(zonesListedWhileNotOpen.count))
            for (zone, listing) in zonesListedWhileNotOpen.sorted(by: { $0.key < $1.key }) {
                writer.write(zone)
                writer.write(listing.rawValue)
            }
        }
        if let zonesLeftDeleted, !zonesLeftDeleted.isEmpty {
            writer.write(varint: UInt64(zonesLeftDeleted.count))
            for zone in zonesLeftDeleted { writer.write(zone) }
        }
        return CRC32.checksum(writer.data)
    }

    /// How a listing of the database's changes named a zone (``zonesListedWhileNotOpen``).
    package enum ZoneListing: String, Codable, Sendable, Equatable {
        case changed
        case deleted
    }

    /// Notes a listing of `zone`, which this version does not register: a deletion stands until the zone
    /// is wiped, whatever is listed after it (a zone created again is fetched from the start once wiped).
    package mutating func noteListingWhileNotOpen(_ zone: ZoneID, _ listing: ZoneListing) {
        var listings = zonesListedWhileNotOpen ?? [:]
        if listings[zone.name] != .deleted { listings[zone.name] = listing }
        zonesListedWhileNotOpen = listings
    }

    /// Forgets the listings of `zones` (the first full fetch that registers them dealt with them).
    package mutating func forgetListingsWhileNotOpen(of zones: [ZoneID]) {
        guard var listings = zonesListedWhileNotOpen else { return }
        for zone in zones { listings[zone.name] = nil }
        zonesListedWhileNotOpen = listings.isEmpty ? nil : listings
    }

    /// Decodes and checks a device file, failing with ``FlatSyncError/Code-swift.struct/damagedFile`` or
    /// ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion``.
    package static func decode(_ data: Data, path: String) throws(FlatSyncError) -> DeviceFile {
        func unsupported(_ version: Int) -> FlatSyncError {
            FlatSyncError(
                .unsupportedFormatVersion,
                "device.plist has format version \(version); this FlatSync reads versions 1 and \(currentFormatVersion).",
                path: path
            )
        }
        func isSupported(_ version: Int) -> Bool { version == 1 || version == currentFormatVersion }
        let file: DeviceFile
        do throws(FlatSyncError) {
            // Checked before Foundation's decoder sees it (``BinaryPropertyList/validate(_:)``): some damaged
            // files crash that decoder.
            file = try BinaryPropertyList.decode(
                DeviceFile.self, from: data, damage: "device.plist's structure is damaged.", path: path)
        } catch {
            // Only a file that does not read is probed for its version (every open reads this file): a later
            // version may have changed its layout, and is not damage.
            struct VersionProbe: Decodable { var formatVersion: Int }
            let version = try BinaryPropertyList.decode(
                VersionProbe.self, from: data, damage: "device.plist is not readable.", path: path
            ).formatVersion
            guard isSupported(version) else { throw unsupported(version) }
            throw error
        }
        let version = file.formatVersion
        guard isSupported(version) else { throw unsupported(version) }
        if version >= 2 {
            guard let checksum = file.checksum, checksum == file.computedChecksum() else {
                throw FlatSyncError(.damagedFile, "device.plist's checksum does not match its contents.", path: path)
            }
        }
        return file
    }

    /// Notes that `zone` is about to be wiped by the mutation numbered `sequence`, for a deletion by the
    /// user (``zonesWipedSinceToken``, ``zoneWipeSequences``), and forgets what the sync engine knew of the
    /// zone on the server: not prepared (it is created again before it is used), not subscribed, no
    /// refusal waits. In the same write as the note, so that a wipe the log holds never leaves the zone
    /// counted as prepared: a later fetch finding it missing would take that for a second deletion and wipe
    /// what was changed since.
    package mutating func noteWipe(of zone: ZoneID, sequence: UInt64) {
        var wiped = zonesWipedSinceToken ?? []
        if !wiped.contains(zone.name) { wiped.append(zone.name) }
        zonesWipedSinceToken = wiped
        var sequences = zoneWipeSequences ?? [:]
        sequences[zone.name] = sequence
        zoneWipeSequences = sequences
        preparedZones.removeAll { $0 == zone.name }
        subscribedZones?.removeAll { $0 == zone.name }
        refusalWaits?[zone.name] = nil
        requestRefusalWaits?[zone.name] = nil
        forgetListingsWhileNotOpen(of: [zone])
        // In the same write as the wipe's note: a process that ends before anything else is written must
        // not find the zone neither prepared nor left deleted, and create it empty.
        var leftDeleted = zonesLeftDeleted ?? []
        if !leftDeleted.contains(zone.name) { leftDeleted.append(zone.name) }
        zonesLeftDeleted = leftDeleted
    }

    /// Forgets the wipes noted for `zones`: a saved database token is past their deletions.
    package mutating func forgetWipes(of zones: Set<String>) {
        let kept = (zonesWipedSinceToken ?? []).filter { !zones.contains($0) }
        zonesWipedSinceToken = kept.isEmpty ? nil : kept
        let sequences = (zoneWipeSequences ?? [:]).filter { !zones.contains($0.key) }
        zoneWipeSequences = sequences.isEmpty ? nil : sequences
    }

    /// The file's bytes, in the current format with its checksum.
    package func encoded() throws(FlatSyncError) -> Data {
        var file = self
        file.formatVersion = Self.currentFormatVersion
        file.checksum = file.computedChecksum()
        return try BinaryPropertyList.encode(file, what: "device.plist")
    }

    /// The same bookkeeping, compared without the format version and checksum.
    package static func == (lhs: DeviceFile, rhs: DeviceFile) -> Bool {
        lhs.deviceID == rhs.deviceID && lhs.account == rhs.account
            && lhs.databaseChangeToken == rhs.databaseChangeToken && lhs.preparedZones == rhs.preparedZones
            && lhs.zonesToSeed == rhs.zonesToSeed && (lhs.subscribedZones ?? []) == (rhs.subscribedZones ?? [])
    }
}

/// `device-id.plist`: a second, durable copy of the device ID, written when the ID is made (or changed)
/// and never otherwise, so that it survives damage to `device.plist`, which is rewritten after every sync.
///
/// A binary property list of the format version, the ID and the CRC-32 of the ID's UTF-8 bytes.
package struct DeviceIdentityFile: Codable, Sendable, Equatable {
    package static let currentFormatVersion = 1
    package static let fileName = "device-id.plist"

    package var formatVersion = DeviceIdentityFile.currentFormatVersion
    package var deviceID: String
    package var checksum: UInt32

    package init(deviceID: String) {
        self.deviceID = deviceID
        self.checksum = CRC32.checksum(Data(deviceID.utf8))
    }

    /// Decodes and checks the file, failing with ``FlatSyncError/Code-swift.struct/damagedFile`` or
    /// ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion``.
    package static func decode(_ data: Data, path: String) throws(FlatSyncError) -> DeviceIdentityFile {
        let file = try BinaryPropertyList.decode(
            DeviceIdentityFile.self, from: data, damage: "device-id.plist is not readable.", path: path)
        guard file.formatVersion == currentFormatVersion else {
            throw FlatSyncError(
                .unsupportedFormatVersion,
                "device-id.plist has format version \(file.formatVersion); this FlatSync reads version "
                    + "\(currentFormatVersion).",
                path: path
            )
        }
        guard file.checksum == CRC32.checksum(Data(file.deviceID.utf8)), !file.deviceID.isEmpty else {
            throw FlatSyncError(.damagedFile, "device-id.plist's checksum does not match its contents.", path: path)
        }
        return file
    }

    package func encoded() throws(FlatSyncError) -> Data {
        try BinaryPropertyList.encode(self, what: "device-id.plist")
    }
}

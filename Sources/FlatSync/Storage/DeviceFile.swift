import Foundation

/// `device.plist`: the device's identity and the sync engine's bookkeeping for the directory.
package struct DeviceFile: Codable, Sendable, Equatable {
    package static let currentFormatVersion = 1

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

    package init(deviceID: String) {
        self.deviceID = deviceID
    }

    package static func decode(_ data: Data, path: String) throws(FlatSyncError) -> DeviceFile {
        struct VersionProbe: Decodable { var formatVersion: Int }
        let decoder = PropertyListDecoder()
        do {
            let version = try decoder.decode(VersionProbe.self, from: data).formatVersion
            guard version == currentFormatVersion else {
                throw FlatSyncError(
                    .unsupportedFormatVersion,
                    "device.plist has format version \(version); this FlatSync reads \(currentFormatVersion).",
                    path: path
                )
            }
            return try decoder.decode(DeviceFile.self, from: data)
        } catch let error as FlatSyncError {
            throw error
        } catch {
            throw FlatSyncError(.damagedFile, "device.plist is not readable.", cause: error, path: path)
        }
    }

    package func encoded() throws(FlatSyncError) -> Data {
        try BinaryPropertyList.encode(self, what: "device.plist")
    }
}

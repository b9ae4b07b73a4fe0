import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct DeviceFileTests {
    static let deviceID = "F2451825-16A4-419A-9B5C-0F1E7227A19B"

    static func sampleFile() -> DeviceFile {
        var file = DeviceFile(deviceID: deviceID)
        file.account = "user-1"
        file.databaseChangeToken = Data("token-17".utf8)
        file.preparedZones = ["ReadingList", "ReadingHistory"]
        return file
    }

    /// The quarantine events a store reported when it opened.
    static func quarantines(_ store: LocalStore) -> [(original: String, movedTo: String, reason: String)] {
        store.eventHub.keptEvents.compactMap {
            if case .fileQuarantined(let original, let movedTo, let reason) = $0 { return (original, movedTo, reason) }
            return nil
        }
    }

    /// Opens a store without forcing a device ID, so the directory's own is used.
    static func options() -> LocalStore.Options {
        var options = testOptions()
        options.deviceID = nil
        return options
    }

    // MARK: - The file itself

    @Test func roundTripsWithAChecksum() throws {
        let file = Self.sampleFile()
        let data = try file.encoded()
        let decoded = try DeviceFile.decode(data, path: "device.plist")
        #expect(decoded == file)
        #expect(decoded.formatVersion == 2)
        #expect(decoded.checksum != nil)
    }

    /// Whatever byte is changed, the file either fails to decode or decodes to exactly what was written
    /// (a byte the plist does not use); never to something else.
    @Test func noChangedByteDecodesToADifferentFile() throws {
        let file = Self.sampleFile()
        let data = try file.encoded()
        var refused = 0
        for index in data.indices {
            for flip: UInt8 in [0x01, 0x20, 0xFF] {
                var damaged = data
                damaged[index] ^= flip
                do {
                    #expect(try DeviceFile.decode(damaged, path: "device.plist") == file, "byte \(index) ^ \(flip)")
                } catch {
                    #expect(error.code == .damagedFile || error.code == .unsupportedFormatVersion)
                    refused += 1
                }
            }
        }
        #expect(refused > data.count * 2)
    }

    @Test func aVersionTwoFileWrittenBeforeSubscribedZonesStillVerifies() throws {
        // The fields and checksum of a version 2 file as FlatSync wrote it before it kept subscribed zones.
        struct VersionTwo: Codable {
            var formatVersion: Int
            var deviceID: String
            var account: String?
            var databaseChangeToken: Data?
            var preparedZones: [String]
            var zonesToSeed: [String]
            var checksum: UInt32?
        }
        let written = try Self.sampleFile().encoded()
        let old = try PropertyListDecoder().decode(VersionTwo.self, from: written)
        let data = try BinaryPropertyList.encode(old, what: "test")
        let file = try DeviceFile.decode(data, path: "device.plist")
        #expect(file == Self.sampleFile())
        #expect(file.subscribedZones == nil)

        var subscribed = file
        subscribed.subscribedZones = ["ReadingList"]
        let decoded = try DeviceFile.decode(try subscribed.encoded(), path: "device.plist")
        #expect(decoded.subscribedZones == ["ReadingList"])
        #expect(decoded.checksum != old.checksum, "the checksum covers the subscribed zones")
        var tampered = try PropertyListDecoder().decode(DeviceFile.self, from: try subscribed.encoded())
        tampered.subscribedZones = ["ReadingHistory"]
        #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(tampered, what: "test"), path: "device.plist")
        }
    }

    /// The counts of waits on refusals round-trip, are covered by the checksum, and a file without them
    /// (every file written before they were kept) reads as having none.
    @Test func refusalWaitsRoundTripUnderTheChecksum() throws {
        var file = Self.sampleFile()
        let counts = RefusalWaitCounts(
            records: [
                RecordID(zone: .readingList, name: "rl-a"): 3, RecordID(zone: .readingList, name: "rl-b"): 1,
                RecordID(zone: ZoneID("Notes"), name: "n"): 5,
            ],
            requests: [.readingHistory: 2])
        counts.write(to: &file)
        let decoded = try DeviceFile.decode(try file.encoded(), path: "device.plist")
        #expect(RefusalWaitCounts(decoded) == counts)
        #expect(RefusalWaitCounts(Self.sampleFile()) == RefusalWaitCounts())
        #expect(try Self.sampleFile().encoded() != file.encoded())

        var tampered = try PropertyListDecoder().decode(DeviceFile.self, from: try file.encoded())
        tampered.refusalWaits?["ReadingList"]?["rl-a"] = 0
        #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(tampered, what: "test"), path: "device.plist")
        }
        var emptied = file
        RefusalWaitCounts().write(to: &emptied)
        #expect(emptied.refusalWaits == nil && emptied.requestRefusalWaits == nil)
        #expect(try DeviceFile.decode(try emptied.encoded(), path: "device.plist") == Self.sampleFile())
    }

    /// The zones wiped since the database token was saved are covered by the checksum too, and only
    /// while there are some, so files written before they were noted still verify.
    @Test func zonesWipedSinceTheTokenRoundTripUnderTheChecksum() throws {
        var file = Self.sampleFile()
        file.zonesWipedSinceToken = ["ReadingHistory", "Notes"]
        let decoded = try DeviceFile.decode(try file.encoded(), path: "device.plist")
        #expect(decoded.zonesWipedSinceToken == ["ReadingHistory", "Notes"])

        var tampered = try PropertyListDecoder().decode(DeviceFile.self, from: try file.encoded())
        tampered.zonesWipedSinceToken = ["ReadingHistory"]
        #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(tampered, what: "test"), path: "device.plist")
        }
        #expect(
            try DeviceFile.decode(try Self.sampleFile().encoded(), path: "device.plist").zonesWipedSinceToken == nil)
    }

    /// A wipe's note carries the wipe's sequence number, under the checksum; forgetting the notes a token
    /// covers drops both, and a note written before sequences were kept (none) still reads.
    @Test func aWipesSequenceIsNotedWithItAndForgottenWithIt() throws {
        var file = Self.sampleFile()
        file.zonesWipedSinceToken = ["Notes"]  // noted by a FlatSync that kept no sequence
        file.noteWipe(of: .readingHistory, sequence: 41)
        file.noteWipe(of: .readingHistory, sequence: 57)
        #expect(file.zonesWipedSinceToken == ["Notes", "ReadingHistory"])
        #expect(file.zoneWipeSequences == ["ReadingHistory": 57], "the latest wipe of a zone")
        let decoded = try DeviceFile.decode(try file.encoded(), path: "device.plist")
        #expect(decoded.zoneWipeSequences == ["ReadingHistory": 57])

        var tampered = try PropertyListDecoder().decode(DeviceFile.self, from: try file.encoded())
        tampered.zoneWipeSequences = ["ReadingHistory": 58]
        #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(tampered, what: "test"), path: "device.plist")
        }

        var forgotten = decoded
        forgotten.forgetWipes(of: ["ReadingHistory"])
        #expect(forgotten.zonesWipedSinceToken == ["Notes"])
        #expect(forgotten.zoneWipeSequences == nil, "absent while empty")
        forgotten.forgetWipes(of: ["Notes"])
        #expect(forgotten.zonesWipedSinceToken == nil)
    }

    /// Listings of zones the app did not register: a deletion stands over a later change, the checksum
    /// covers them, a wipe of the zone forgets its listing, and a file without them has no key.
    @Test func listingsOfZonesNotOpenAreKeptUnderTheChecksum() throws {
        var file = Self.sampleFile()
        let recipes = ZoneID("Recipes")
        file.noteListingWhileNotOpen(recipes, .deleted)
        file.noteListingWhileNotOpen(recipes, .changed)
        file.noteListingWhileNotOpen(ZoneID("Tags"), .changed)
        #expect(file.zonesListedWhileNotOpen == ["Recipes": .deleted, "Tags": .changed])
        let decoded = try DeviceFile.decode(try file.encoded(), path: "device.plist")
        #expect(decoded.zonesListedWhileNotOpen == file.zonesListedWhileNotOpen)

        var tampered = try PropertyListDecoder().decode(DeviceFile.self, from: try file.encoded())
        tampered.zonesListedWhileNotOpen = ["Recipes": .changed, "Tags": .changed]
        #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(tampered, what: "test"), path: "device.plist")
        }

        var wiped = decoded
        wiped.noteWipe(of: recipes, sequence: 9)
        #expect(wiped.zonesListedWhileNotOpen == ["Tags": .changed])
        wiped.forgetListingsWhileNotOpen(of: [ZoneID("Tags")])
        #expect(wiped.zonesListedWhileNotOpen == nil, "absent while empty")
        let plain = try Self.sampleFile().encoded()
        #expect(String(decoding: plain, as: UTF8.self).contains("zonesListedWhileNotOpen") == false)
    }

    /// Zones left deleted: kept, covered by the checksum, and no key while there are none.
    @Test func zonesLeftDeletedAreKeptUnderTheChecksum() throws {
        var file = Self.sampleFile()
        file.zonesLeftDeleted = ["Recipes", "ReadingList"]
        let decoded = try DeviceFile.decode(try file.encoded(), path: "device.plist")
        #expect(decoded.zonesLeftDeleted == ["Recipes", "ReadingList"])
        var tampered = try PropertyListDecoder().decode(DeviceFile.self, from: try file.encoded())
        tampered.zonesLeftDeleted = ["Recipes"]
        #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(tampered, what: "test"), path: "device.plist")
        }
        let plain = try Self.sampleFile().encoded()
        #expect(String(decoding: plain, as: UTF8.self).contains("zonesLeftDeleted") == false)
        // A wipe's note says so in the same write (a review found it in a second one, which a process that
        // ended between the two never made: the zone was then created empty).
        var wiped = Self.sampleFile()
        wiped.noteWipe(of: ZoneID("Recipes"), sequence: 4)
        #expect(wiped.zonesLeftDeleted == ["Recipes"])
    }

    @Test func aVersionOneFileWithoutChecksumIsStillRead() throws {
        struct VersionOne: Encodable {
            var formatVersion = 1
            var deviceID: String
            var account: String?
            var preparedZones: [String] = []
            var zonesToSeed: [String] = []
        }
        let data = try BinaryPropertyList.encode(VersionOne(deviceID: "legacy", account: "u"), what: "test")
        let file = try DeviceFile.decode(data, path: "device.plist")
        #expect(file.deviceID == "legacy" && file.account == "u" && file.formatVersion == 1)
    }

    /// A later version is not damage, whether its layout still reads as this version's or not.
    @Test func aLaterVersionIsUnsupportedNotDamaged() throws {
        var sameLayout = Self.sampleFile()
        sameLayout.formatVersion = 3
        struct NewLayout: Encodable {
            var formatVersion = 3
            var identity = "moved"
        }
        let files = [
            ("same layout", try BinaryPropertyList.encode(sameLayout, what: "test")),
            ("new layout", try BinaryPropertyList.encode(NewLayout(), what: "test")),
        ]
        for (what, data) in files {
            let error = #expect(throws: FlatSyncError.self, "\(what)") {
                try DeviceFile.decode(data, path: "device.plist")
            }
            #expect(error?.code == .unsupportedFormatVersion, "\(what)")
        }
        // A file of a known version that does not read is damage.
        struct Broken: Encodable { var formatVersion = 2 }
        let error = #expect(throws: FlatSyncError.self) {
            try DeviceFile.decode(try BinaryPropertyList.encode(Broken(), what: "test"), path: "device.plist")
        }
        #expect(error?.code == .damagedFile)
    }

    // MARK: - In a store

    /// Callers on other actors (fetches save the database token, pushes the prepared zones) change the file
    /// through one step each, so none writes over another's change, and a write that fails changes nothing.
    @Test func updatesOfTheDeviceFileNeverWriteOverEachOther() async throws {
        try await withTemporaryDirectory { directory in
            let faulty = FaultyFileSystem()
            var options = Self.options()
            options.fileSystem = FileSystem(faulty)
            let store = try LocalStore(directory: directory, options: options)
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    group.addTask { try? await store.updateDeviceFile { $0.preparedZones.append("zone-\(index)") } }
                }
            }
            #expect(await Set(store.deviceFile.preparedZones) == Set((0..<20).map { "zone-\($0)" }))

            let before = await store.deviceFile
            faulty.failNext(.rename, with: .ioError)
            await #expect(throws: FlatSyncError.self) {
                try await store.updateDeviceFile { $0.account = "someone-else" }
            }
            #expect(await store.deviceFile == before)
            try await store.close()

            let reopened = try LocalStore(directory: directory, options: Self.options())
            #expect(await reopened.deviceFile == before)
            try await reopened.close()
        }
    }

    /// The problem the checksum solves: a few bytes flipped in the middle of the device ID used to open
    /// without a word as a garbled ID. Now the file is quarantined with an event, and the device keeps its
    /// identity from `device-id.plist`.
    @Test func aDamagedDeviceFileIsQuarantinedAndTheDeviceKeepsItsID() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: Self.options())
            let deviceID = store.deviceID
            let sample = Self.sampleFile().with(deviceID: deviceID)
            try await store.updateDeviceFile { $0 = sample }
            try await store.readingList.add("kept")
            try await store.close()

            let url = directory.appendingPathComponent("device.plist")
            var bytes = try Data(contentsOf: url)
            let idRange = try #require(bytes.range(of: Data(deviceID.utf8)))
            for offset in [22, 23, 24, 25, 26] { bytes[idRange.lowerBound + offset] ^= 0x20 }
            try bytes.write(to: url)

            let reopened = try LocalStore(directory: directory, options: Self.options())
            #expect(reopened.deviceID == deviceID, "the identity survives the damage")
            #expect(await reopened.readingList.contains("kept"))
            let events = Self.quarantines(reopened)
            try #require(events.count == 1)
            #expect(events[0].original == url.path)
            #expect(events[0].reason.contains("checksum does not match"))
            #expect(events[0].reason.contains("the device ID \(deviceID) was kept from device-id.plist"))
            #expect(try Data(contentsOf: URL(fileURLWithPath: events[0].movedTo)) == bytes, "kept byte for byte")
            // The bookkeeping that was lost starts over; the device file is whole again.
            let file = await reopened.deviceFile
            #expect(file.account == nil && file.databaseChangeToken == nil && file.preparedZones.isEmpty)
            try await reopened.close()
            #expect(try DeviceFile.decode(Data(contentsOf: url), path: url.path).deviceID == deviceID)

            let again = try LocalStore(directory: directory, options: Self.options())
            #expect(again.deviceID == deviceID)
            #expect(Self.quarantines(again).isEmpty)
            try await again.close()
        }
    }

    @Test func whenBothCopiesAreDamagedANewIDIsMadeAndTheEventSaysSo() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: Self.options())
            let oldID = store.deviceID
            try await store.close()
            for name in ["device.plist", "device-id.plist"] {
                try Data("garbage".utf8).write(to: directory.appendingPathComponent(name))
            }
            let reopened = try LocalStore(directory: directory, options: Self.options())
            #expect(reopened.deviceID != oldID)
            let reasons = Self.quarantines(reopened).map(\.reason)
            #expect(reasons.count == 2)
            #expect(reasons.contains { $0.contains("device-id.plist is not readable") })
            #expect(reasons.contains { $0.contains("a new one was made (\(reopened.deviceID))") })
            try await reopened.close()
        }
    }

    @Test func aDamagedIdentityFileIsQuarantinedAndWrittenAgain() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: Self.options())
            let deviceID = store.deviceID
            try await store.close()
            let url = directory.appendingPathComponent("device-id.plist")
            var bytes = try Data(contentsOf: url)
            let idRange = try #require(bytes.range(of: Data(deviceID.utf8)))
            bytes[idRange.lowerBound + 3] ^= 0x01
            try bytes.write(to: url)

            let reopened = try LocalStore(directory: directory, options: Self.options())
            #expect(reopened.deviceID == deviceID)
            let events = Self.quarantines(reopened)
            #expect(events.count == 1)
            #expect(events.first?.reason.contains("written again from device.plist") == true)
            try await reopened.close()
            #expect(try DeviceIdentityFile.decode(Data(contentsOf: url), path: url.path).deviceID == deviceID)
        }
    }

    @Test func aDirectoryFromBeforeTheIdentityFileGetsOneAndItsDeviceFileAChecksum() async throws {
        try await withTemporaryDirectory { directory in
            struct VersionOne: Encodable {
                var formatVersion = 1
                var deviceID = "legacy-device"
                var preparedZones: [String] = []
                var zonesToSeed: [String] = []
            }
            let url = directory.appendingPathComponent("device.plist")
            try BinaryPropertyList.encode(VersionOne(), what: "test").write(to: url)
            let store = try LocalStore(directory: directory, options: Self.options())
            #expect(store.deviceID == "legacy-device")
            #expect(Self.quarantines(store).isEmpty)
            try await store.close()
            let file = try DeviceFile.decode(Data(contentsOf: url), path: url.path)
            #expect(file.formatVersion == 2 && file.checksum != nil)
            let identity = directory.appendingPathComponent("device-id.plist")
            #expect(
                try DeviceIdentityFile.decode(Data(contentsOf: identity), path: identity.path).deviceID
                    == "legacy-device")
        }
    }
}

extension DeviceFile {
    func with(deviceID: String) -> DeviceFile {
        var file = self
        file.deviceID = deviceID
        return file
    }
}

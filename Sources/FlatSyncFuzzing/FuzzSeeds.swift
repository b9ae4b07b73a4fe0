import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Synchronization

/// The seed corpus: real files, made by FlatSync itself in a scratch directory — a device that saves,
/// visits, likes, removes, syncs with a `DirectoryCloud`, snapshots and compacts — and picked up at
/// several moments, so that the fuzzer starts from inputs that reach deep into each decoder.
package enum FuzzSeeds {
    /// The files collected, by kind.
    package struct Files: Sendable {
        package var logs: [Data] = []
        package var logEntries: [Data] = []
        package var snapshots: [Data] = []
        package var deviceFiles: [Data] = []
        package var cloudStates: [Data] = []
        /// The bodies the CKWS emulator answered a device's sync with, and error bodies.
        package var ckwsResponses: [Data] = []

        /// Every property list among them (the cloud state's after its header).
        package var plists: [Data] {
            snapshots + deviceFiles + cloudStates.map { Data($0.dropFirst(CloudStateFile.headerSize)) }
        }
    }

    /// Builds a device and a cloud in a scratch directory and returns copies of their files.
    package static func make() async throws -> Files {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "flatsync-fuzz-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let device = scratch.appendingPathComponent("device")
        let cloud = try DirectoryCloud(directory: scratch.appendingPathComponent("cloud"))
        var files = Files()
        func collect() throws {
            for name in ["commands.log"] {
                if let data = try? Data(contentsOf: device.appendingPathComponent(name)) { files.logs.append(data) }
            }
            for name in ["reading-list.plist", "reading-history.plist", LocalStore.snapshotFileName(TestRecipe.zone)] {
                if let data = try? Data(contentsOf: device.appendingPathComponent(name)) {
                    files.snapshots.append(data)
                }
            }
            for name in ["device.plist", "device-id.plist", RefusedChangesFile.fileName] {
                if let data = try? Data(contentsOf: device.appendingPathComponent(name)) {
                    files.deviceFiles.append(data)
                }
            }
            if let data = try? Data(contentsOf: cloud.stateFile) { files.cloudStates.append(data) }
        }

        var configuration = SyncContext.Configuration(clock: TestClock())
        configuration.deviceID = "fuzz-seed-device"
        configuration.randomSeed = 1
        // Host records too: notes in the reading list's zone (owned by an entry), recipes and steps in a
        // zone of their own; their snapshot sections and log entries become seeds.
        configuration.recordTypes = testRecordTypes
        let context = try await SyncContext.open(
            directory: device, account: CloudAccount(id: "fuzz", transport: cloud), configuration: configuration)
        try await context.readingList.add("first-article", title: "A title")
        try await context.records(TestNote.self).save(
            TestNote(id: "note-1", articleID: "first-article", text: "A note", tags: ["a", "b"], pinned: true))
        try await context.records(TestRecipe.self).save(TestRecipe(id: "recipe-1", title: "Soup", servings: 4))
        try await context.records(TestStep.self).save(TestStep(id: "step-1", recipeID: "recipe-1", text: "Chop"))
        try await context.readingList.add("second-article")
        try await context.history.visit("first-article", version: 3)
        try await context.history.setLiking("first-article", .liked)
        try await context.history.markRead("second-article")
        try collect()
        _ = try await context.syncNow()
        try await context.readingList.remove("second-article")
        try await context.history.setLiking("third-article", .disliked)
        // A production schema without likes: the dislike is refused and parked (refused-changes.plist), and
        // another client's fields (a snapshot's unknown fields) come back on the first article.
        try await cloud.setProductionSchema(
            CloudSchema(
                recordTypes: CloudSchema.flatSync.recordTypes.mapValues { $0.filter { $0.key != "likingChangedAt" } }))
        _ = try await context.syncNow()
        try await cloud.setProductionSchema(nil)
        let first = ReadingHistoryItem.recordID(for: "first-article")
        if var record = try await cloud.lookupRecords([first])[first] {
            record["placeOfReading"] = .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":1}"#))
            record["source"] = .reference(RecordReference(recordName: "rl-first-article", action: .deleteSelf))
            _ = try await cloud.modifyRecords(
                saving: [RecordSave(record, policy: .allKeys)], deleting: [], atomically: true)
        }
        _ = try await context.syncNow()
        for zone in context.localStore.zoneIDs { try await context.localStore.persistSnapshot(of: zone) }
        try collect()
        try await context.localStore.compact()
        try await context.history.visit("fourth-article")
        _ = try await context.syncNow()
        // An edit of a synced host record, left pending: a save with its keys' earlier values (operation 7).
        try await context.records(TestRecipe.self).save(TestRecipe(id: "recipe-1", title: "Soup", servings: 6))
        try await context.close()
        try collect()

        for log in files.logs {
            files.logEntries += log.withUnsafeBytes { AppendLog.scanLog($0).payloads }
        }
        files.ckwsResponses = try await ckwsResponses(in: scratch.appendingPathComponent("ckws"))
        // A version 1 log too, as FlatSync wrote them before version 2.
        files.logs.append(versionOneLog(Array(files.logEntries.prefix(4))))
        return files
    }

    /// Syncs a device through the CKWS emulator and keeps every response body it got, plus error bodies.
    private static func ckwsResponses(in directory: URL) async throws -> [Data] {
        let server = try CloudKitWebServicesServer()
        let recorder = RecordingExchange()
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: "iCloud.dev.flatsync.fuzz", environment: .development, apiToken: "fuzz",
                tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL, http: recorder))
        do {
            let context = try await SyncContext.open(
                directory: directory, account: CloudAccount(id: "fuzz", transport: transport),
                configuration: SyncContext.Configuration(clock: TestClock()))
            try await context.readingList.add("first-article", title: "A \"quoted\" title é")
            try await context.history.visit("first-article", version: 3)
            try await context.history.setLiking("first-article", .liked)
            _ = try await context.syncNow()
            try await context.readingList.remove("first-article")
            _ = try await context.syncNow()
            try await context.close()
            _ = try await transport.currentUser()
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
        let errors = [
            #"{"uuid":"u","serverErrorCode":"THROTTLED","reason":"slow down","retryAfter":1.5}"#,
            #"{"records":[{"recordName":"a","serverErrorCode":"CONFLICT"},{"recordName":"b","deleted":true}]}"#,
            #"{"zones":[{"zoneID":{"zoneName":"Z"},"serverErrorCode":"ZONE_NOT_FOUND","reason":"gone"}]}"#,
            // Web courier notifications: a live capture (MistKit #379) and a zone subscription's.
            #"{"aps":{"alert":"x"},"ck":{"ce":2,"ckuserid":"_a","aux":{},"nid":"n","qry":{"zid":"_defaultZone","dbs":1,"fo":1,"zoid":"_a","rid":"R","sid":"S"},"cid":"iCloud.x"}}"#,
            #"{"aps":{"content-available":1},"ck":{"ce":2,"cid":"iCloud.x","nid":"n","ckuserid":"_a","fet":{"zid":"ReadingList","zoid":"_a","dbs":2,"sid":"flatsync-ReadingList"}}}"#,
            #"{"subscriptions":[{"subscriptionID":"s","reason":"could not find subscription we just created","serverErrorCode":"INTERNAL_ERROR"}]}"#,
        ]
        return recorder.bodies + errors.map { Data($0.utf8) }
    }

    /// Writes every target's seeds to `directory/<target>/seed-<n>`.
    package static func write(to directory: URL) async throws {
        let files = try await make()
        for target in FuzzTargets.all {
            let folder = directory.appendingPathComponent(target.name)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for (index, seed) in target.seeds(files).enumerated() {
                try seed.write(to: folder.appendingPathComponent("seed-\(index)"))
            }
        }
    }

    /// A version 1 log file holding `payloads` (16-byte header, frames without the synced-through offset),
    /// as FlatSync wrote it before version 2.
    package static func versionOneLog(_ payloads: [Data]) -> Data {
        var bytes = Array("FSYNCLOG".utf8) + [1, 0, 0, 0]
        withUnsafeBytes(of: CRC32.checksum(Data(bytes)).littleEndian) { bytes.append(contentsOf: $0) }
        for payload in payloads {
            let length = UInt32(payload.count).littleEndian
            let crc = withUnsafeBytes(of: length) { CRC32.checksum(payload, continuing: CRC32.checksum(Data($0))) }
            withUnsafeBytes(of: (AppendLog.frameMagic.littleEndian, length, crc.littleEndian)) {
                bytes.append(contentsOf: $0)
            }
            bytes.append(contentsOf: payload)
        }
        return Data(bytes)
    }
}

/// Sends through `URLSessionExchange` and keeps every response body.
private final class RecordingExchange: HTTPExchange {
    private let recorded = Mutex<[Data]>([])

    var bodies: [Data] { recorded.withLock { $0 } }

    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        let response = try await URLSessionExchange.shared.send(request)
        recorded.withLock { $0.append(response.body) }
        return response
    }
}

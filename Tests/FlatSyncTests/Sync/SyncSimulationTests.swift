import FlatSyncTesting
import Foundation
import Synchronization
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// The seeded simulation: three devices, random mutations and syncs, random faults on at least a fifth of
/// the requests (including responses lost after the server committed, busy zones, throttling), token
/// expiries and restarts (a clean close, or an abandon that keeps only the log, as a kill would), spells
/// during which the server is a production container whose schema lacks a field likes need (so it refuses
/// them, and the devices park them), and edits by another client that writes fields FlatSync does not use;
/// then faults stop, the schema is fixed, every device syncs until nothing moves, and the run checks that
///
/// 1. every device's stores equal each other and the server, with nothing left pending (a refused change
///    counts as kept only if it is still on its device and sent once the schema is fixed),
/// 2. every acknowledged mutation's effect is there, unless a later mutation superseded it by the merge
///    rules (or a concurrent one its device had not seen: a delete loses to an edit it did not see), and
/// 3. every field the other client wrote is still on the server, unless a device deleted the item after,
/// 4. every device reads the same bytes for each photo's asset (host records with an `ASSET` field, made
///    on a device or uploaded by the other client) as the server holds, and those are the bytes of a save
///    no later save made knowing it superseded.
///
/// `FLATSYNC_SIM_SEEDS` sets how many seeds run (default 12, for CI) and `FLATSYNC_SIM_STEPS` the steps per
/// seed (default 400); run with hundreds of seeds by hand.
@Suite(.serialized) struct SyncSimulationTests {
    /// Small pages, taken in parts of a few records: every fetch of more than a handful of changes takes
    /// its first pages before it has the last, as a large zone's first fetch does, faults and all.
    static func fetchInParts(_ configuration: inout SyncContext.Configuration) {
        configuration.fetchResultsLimit = 4
        configuration.fetchPartRecords = 6
    }

    static let seeds = Int(ProcessInfo.processInfo.environment["FLATSYNC_SIM_SEEDS"] ?? "") ?? 12
    static let steps = Int(ProcessInfo.processInfo.environment["FLATSYNC_SIM_STEPS"] ?? "") ?? 400
    /// Few enough articles that devices often touch the same ones, enough that most effects stay checkable.
    static let articles = 40
    /// How many tallies (``SimulatedTally``) the devices increment.
    static let tallies = 3
    /// How many photos (`TestPhoto`, an asset each) the devices and the other client write.
    static let photos = 4
    /// The host record types every device registers.
    static let recordTypes: [any SyncableRecord.Type] = [TestNote.self, SimulatedTally.self, TestPhoto.self]

    /// Debugging: `FLATSYNC_SIM_ONLY=8` runs one seed; `FLATSYNC_SIM_TRACE=a8` prints what happens to one article,
    /// `FLATSYNC_SIM_TRACE_TALLY=t1` to one tally.
    static let only = ProcessInfo.processInfo.environment["FLATSYNC_SIM_ONLY"].flatMap(UInt64.init)
    static let trace = ProcessInfo.processInfo.environment["FLATSYNC_SIM_TRACE"]
    static let traceTally = ProcessInfo.processInfo.environment["FLATSYNC_SIM_TRACE_TALLY"]
    static let tracePhoto = ProcessInfo.processInfo.environment["FLATSYNC_SIM_TRACE_PHOTO"]

    /// Seeds run through CloudKit Web Services (`FLATSYNC_SIM_HTTP_SEEDS`, default 3 for CI).
    static let httpSeeds = Int(ProcessInfo.processInfo.environment["FLATSYNC_SIM_HTTP_SEEDS"] ?? "") ?? 3

    /// The same simulation with every device syncing through `CloudKitWebServicesTransport`, HTTP on
    /// 127.0.0.1 and the emulator: faults arrive as HTTP statuses, CKWS error codes and dropped connections.
    @Test func devicesConvergeThroughCloudKitWebServices() async throws {
        var totals = SimulationTotals()
        for seed in 0..<UInt64(Self.httpSeeds) {
            totals.add(try await Self.run(seed: 1_000 + seed, steps: Self.steps, via: .http))
        }
        print("through CKWS: " + totals.report(seeds: Self.httpSeeds))
        #expect(totals.refused > 0 && totals.foreignWrites > 0, "the run must meet refusals and another client")
        #expect(totals.lost == 0)
        #expect(totals.diverged == 0)
        #expect(totals.orphans == 0)
        #expect(totals.notes > 0, "the run must end with notes to compare")
        #expect(totals.photos > 0 && totals.foreignPhotos > 0, "the run must end with photos, some of another client")
        #expect(totals.faultRate >= 0.2, "the simulation must fault at least a fifth of the requests")
    }

    @Test func devicesConvergeAndNoAcknowledgedMutationIsLost() async throws {
        var totals = SimulationTotals()
        for seed in Self.only.map({ [$0] }) ?? Array(0..<UInt64(Self.seeds)) {
            let result = try await Self.run(seed: seed, steps: Self.steps)
            totals.add(result)
        }
        print(totals.report(seeds: Self.only == nil ? Self.seeds : 1))
        #expect(totals.refused > 0 && totals.foreignWrites > 0, "the run must meet refusals and another client")
        #expect(totals.lost == 0)
        #expect(totals.diverged == 0)
        #expect(totals.orphans == 0)
        #expect(totals.notes > 0, "the run must end with notes to compare")
        #expect(totals.photos > 0 && totals.foreignPhotos > 0, "the run must end with photos, some of another client")
        #expect(totals.faultRate >= 0.2, "the simulation must fault at least a fifth of the requests")
    }

    struct Result {
        var mutations = 0
        var checked = 0
        var lost = 0
        var diverged = false
        var requests = 0
        var faults: [String: Int] = [:]
        var expiries = 0
        var restarts = 0
        var kills = 0
        var refused = 0
        var foreignWrites = 0
        /// The most notes (host records) a device held at the end, and notes left without their article.
        var notes = 0
        var orphans = 0
        /// The photos the server held at the end, and the photo writes (of an asset) by the other client.
        var photos = 0
        var foreignPhotos = 0
        /// The tallies' acknowledged increments, and how many of them the server's counts hold.
        var increments: Int64 = 0
        var incrementsCounted: Int64 = 0
    }

    /// The production schema of the refusing spells that refuse saved articles: FlatSync's own, less the
    /// field every reading-list entry writes. The notes saved on an article refused so wait for it.
    static let schemaWithoutOrigin: CloudSchema = {
        var schema = CloudSchema.flatSync(adding: testRecordTypes)
        schema.recordTypes[ReadingListEntry.recordType]!["origin"] = nil
        return schema
    }()

    /// The production schema of the other refusing spells: FlatSync's own, less the field a like writes.
    static let schemaWithoutLiking: CloudSchema = {
        var schema = CloudSchema.flatSync
        schema.recordTypes[ReadingHistoryItem.recordType]!["likingChangedAt"] = nil
        return schema
    }()

    static func run(seed: UInt64, steps: Int, via route: SyncHarness.Route = .direct) async throws -> Result {
        try await SyncHarness.run(cloud: InMemoryCloud(changeHistoryLimit: 60), via: route) { harness in
            // A zone a page: every full fetch pages the database's changes too, faults between pages and all.
            await harness.cloud.setDatabaseChangesLimit(1)
            // Half the seeds are told of deletions when they fetch from no token, as CloudKit's native API
            // does; which CKWS does is not known.
            await harness.cloud.setReportsDeletionsFromNoToken(seed % 2 == 1)
            var random = SeededRandomNumberGenerator(seed: seed &* 0x9E37_79B9 &+ 1)
            var result = Result()
            // Each device has its own clock and its own view of the cloud (which can hold a request), and
            // every step waits for its device to finish, so a seed replays exactly.
            var devices: [SyncContext] = []
            var clocks: [TestClock] = []
            var holds: [RequestHold] = []
            var transports: [InterceptingTransport] = []
            let names = ["A", "B", "C"]
            for name in names {
                let clock = TestClock()
                let hold = RequestHold()
                let transport = InterceptingTransport(harness.transport(name)) { kind, _ in await hold.pass(kind) }
                devices.append(
                    try await harness.device(name, transport: transport) {
                        $0.clock = clock
                        $0.recordTypes = Self.recordTypes
                        Self.fetchInParts(&$0)
                    })
                clocks.append(clock)
                holds.append(hold)
                transports.append(transport)
            }
            // Three tallies every device holds before the faults begin: increments merge three ways over them.
            for k in 0..<Self.tallies {
                _ = try await devices[0].records(SimulatedTally.self).save(SimulatedTally(id: "t\(k)", count: 0))
            }
            for device in devices { #expect(try await device.syncNow().isComplete, "seed \(seed): the setup syncs") }
            var ledger = Ledger()
            // Besides whole requests failing, a record's own error inside a success: throttled, or an error
            // that would park it but for the server's retryAfter; and a server that applies a request, then
            // fails (a 500).
            let effects: [FaultEffect] =
                FaultEffect.transient + [.responseLost, .error(.zoneBusy), .error(.batchRequestFailed)] + [
                    .recordError(.requestRateLimited, retryAfter: .seconds(2)),
                    .recordError(.internalError, retryAfter: .seconds(1)),
                    .failedAfterApplying(.internalError),
                ]
            await harness.cloud.setFaultPlan(.random(rate: 0.3, seed: seed, effects: effects))
            var refusing = false

            for step in 0..<steps {
                let index = Int.random(in: 0..<devices.count, using: &random)
                let device = devices[index]
                if Int.random(in: 0..<100, using: &random) < 3 {
                    refusing.toggle()
                    let schema = Bool.random(using: &random) ? Self.schemaWithoutLiking : Self.schemaWithoutOrigin
                    await harness.cloud.setProductionSchema(refusing ? schema : nil)
                }
                if Int.random(in: 0..<100, using: &random) < 8 {
                    let article = "a\(Int.random(in: 0..<Self.articles, using: &random))"
                    if try await Self.writeAsAnotherClient(article, step: step, to: harness.cloud) {
                        ledger.append(Ledger.Entry(device: Ledger.anotherClient, kind: .foreignEdit, article: article))
                        result.foreignWrites += 1
                    }
                }
                if Int.random(in: 0..<100, using: &random) < 2 {
                    let (photo, version) = (
                        Int.random(in: 0..<Self.photos, using: &random), Int.random(in: 0..<1_000, using: &random)
                    )
                    if try await Self.writePhotoAsAnotherClient(photo, version: version, to: harness.cloud) {
                        ledger.append(
                            Ledger.Entry(device: Ledger.anotherClient, kind: .photo(version), article: "p\(photo)"))
                        result.foreignPhotos += 1
                    }
                }
                switch Int.random(in: 0..<100, using: &random) {
                case 0..<62:
                    let operation = Operation.random(using: &random)
                    if let entry = try await operation.perform(on: device, device: index) {
                        ledger.append(entry)
                        result.mutations += 1
                    }
                case 62..<70:
                    // Mutations while a send is on the wire: hold the device's next request, change things,
                    // then let the request go.
                    holds[index].armForNextModify()
                    // The change on the wire is a saved article (sent at once), or a history change (sent
                    // when the device syncs); half of the changes made meanwhile touch the same article's
                    // history, so that a record is changed again while its earlier change is out, and the
                    // request may then fail (the fault plan) and go back to the queue.
                    let article = "a\(Int.random(in: 0..<Self.articles, using: &random))"
                    let sendsHistory = Bool.random(using: &random)
                    let trigger = sendsHistory ? Operation.historyChange(of: article, using: &random) : .add(article)
                    if let entry = try await trigger.perform(on: device, device: index) {
                        ledger.append(entry)
                        result.mutations += 1
                    }
                    // Either the send reaches the hold, or the device goes idle without sending (which
                    // disarms the hold and opens `reached`). The idle wait ends only after the release.
                    let hold = holds[index]
                    let idle = Task {
                        if sendsHistory {
                            // Not in the ledger's syncs: a device then counts as having seen less, which only
                            // leaves more effects unchecked.
                            _ = try? await device.syncNow()
                        } else {
                            await device.waitUntilIdle()
                        }
                        hold.disarm()
                    }
                    await hold.reached.wait()
                    for _ in 0..<Int.random(in: 1...4, using: &random) {
                        let operation =
                            Bool.random(using: &random)
                            ? Operation.historyChange(of: article, using: &random) : Operation.random(using: &random)
                        if let entry = try await operation.perform(on: device, device: index) {
                            ledger.append(entry)
                            result.mutations += 1
                        }
                    }
                    hold.release()
                    await idle.value
                case 70..<85:
                    let start = ledger.tick()
                    let summary = try await device.syncNow()
                    result.refused += summary.refused.count
                    ledger.syncs[index, default: []].append(
                        SyncRecord(start: start, end: ledger.tick(), clean: summary.isComplete))
                case 85..<90:
                    await device.handleRemoteNotification(zones: ZoneID.builtIn)
                case 90..<95:
                    let elapsed = Duration.milliseconds(Int64.random(in: 0..<20_000, using: &random))
                    for (clock, device) in zip(clocks, devices) {
                        clock.advance(by: elapsed)
                        await device.waitUntilIdle()
                    }
                case 95..<97:
                    await harness.cloud.expireAllChangeTokens()
                    result.expiries += 1
                case 97..<98:
                    // The app quits, or is killed (nothing but the log survives), and starts again.
                    if Bool.random(using: &random) {
                        try await device.close()
                    } else {
                        await device.abandon()
                        result.kills += 1
                    }
                    result.restarts += 1
                    let clock = clocks[index]
                    devices[index] = try await harness.device(names[index], transport: transports[index]) {
                        $0.clock = clock
                        $0.recordTypes = Self.recordTypes
                        Self.fetchInParts(&$0)
                    }
                default:
                    await device.networkDidBecomeAvailable()
                }
                await devices[index].waitUntilIdle()
                if let tally = Self.traceTally {
                    let id = SimulatedTally.recordID(tally)
                    var line = "step \(step) device \(index): "
                    if let entry = ledger.entries.last, entry.article == tally {
                        line += "[\(entry.kind) by \(entry.device) #\(entry.step)] "
                    }
                    let server = await harness.cloud.records(in: SimulatedTally.zone).first { $0.id == id }
                    line +=
                        "restarts \(result.restarts) server \(server?["count"]?.intValue ?? -1) by \(server?.lastModifiedBy ?? "-") \(server?.changeTag?.rawValue ?? "-")"
                    for (i, d) in devices.enumerated() {
                        let value = await d.records(SimulatedTally.self).value(tally)?.count ?? -1
                        let pending = await d.localStore.pendingChange(for: id)
                        let base = await d.localStore.zones.mergeBase(of: id)?["count"]?.intValue
                        let tag = await d.localStore.changeTag(for: id)?.rawValue ?? "-"
                        line +=
                            " | \(i): \(value) tag \(tag)\(pending.map { " P\($0.baseValues?["count"]?.intValue ?? -1)" } ?? "") mb \(base.map(String.init) ?? "-")"
                    }
                    print(line)
                }
                if let photo = Self.tracePhoto {
                    let id = TestPhoto.recordID(photo)
                    var line = "step \(step) device \(index): "
                    if let entry = ledger.entries.last, entry.article == photo {
                        line += "[\(entry.kind) by \(entry.device) #\(entry.step)] "
                    }
                    // Versions by size (2,000 + the version): reading bytes here would draw on the fault plan.
                    func version(_ asset: CloudAsset?) -> String {
                        asset.map { "\($0.size - 2_000)\($0.localFile != nil ? "L" : "")" } ?? "none"
                    }
                    let server = await harness.cloud.records(in: TestPhoto.zone).first { $0.id == id }
                    line +=
                        "server \(server.map { "\($0["caption"]?.stringValue ?? "")/\(version($0["image"]?.assetValue))" } ?? "-") \(server?.changeTag?.rawValue ?? "-")"
                    for (i, d) in devices.enumerated() {
                        let value = await d.records(TestPhoto.self).value(photo)
                        let pending = await d.localStore.pendingChange(for: id)
                        line +=
                            " | \(i): \(value.map { "\($0.caption)/\(version($0.image))" } ?? "-") tag \(await d.localStore.changeTag(for: id)?.rawValue ?? "-")\(pending.map { $0.isDelete ? " P-del" : " P-save \($0.changedKeys)" } ?? "")"
                    }
                    print(line)
                }
                if let article = Self.trace {
                    var line = "step \(step) device \(index): "
                    if let entry = ledger.entries.last {
                        line += "last entry #\(entry.step) \(entry.kind) \(entry.article) "
                    }
                    let server = await harness.cloud.records(in: .readingHistory).first {
                        $0.id.name == "rh-\(article)"
                    }
                    line +=
                        "| server \(server.map { "\($0.fields["maxVersionSeen"]!) \($0.fields["lastVisited"] != nil) \($0.changeTag!)" } ?? "-")"
                    for (i, d) in devices.enumerated() {
                        let item = await d.history.item(article)
                        let tag = await d.localStore.changeTag(for: ReadingHistoryItem.recordID(for: article))
                        let pending = await d.localStore.pendingChange(for: ReadingHistoryItem.recordID(for: article))
                        line +=
                            " | \(i): \(item.map { "\($0.maxVersionSeen) \($0.lastVisited != nil)" } ?? "-") tag \(tag?.rawValue ?? "nil") \(pending.map { $0.isDelete ? "P-del" : "P-save" } ?? "")"
                    }
                    print(line)
                }
            }

            // Faults stop and the schema is fixed; everyone syncs until a whole round moves nothing (a sync
            // sends the parked changes again).
            await harness.cloud.setFaultPlan(.none)
            await harness.cloud.setProductionSchema(nil)
            let counters = await harness.cloud.counters()
            result.requests = counters.requests
            result.faults = counters.faultsInjected
            for _ in 0..<10 {
                var moved = false
                for device in devices {
                    if let article = Self.trace {
                        let id = ReadingHistoryItem.recordID(for: article)
                        print(
                            "final: before \(device.localStore.deviceID): \(String(describing: await device.history.item(article))) pending \(String(describing: await device.localStore.pendingChange(for: id).map { ($0.isDelete, $0.replacesRecord, $0.changedKeys) })) refused \(await device.localStore.refusedChanges().map(\.recordID.name))"
                        )
                    }
                    let summary = try await device.syncNow()
                    if let article = Self.trace {
                        print(
                            "final: \(device.localStore.deviceID) summary sent \(summary.sent) refused \(summary.refused.count) problems \(summary.problems) item \(String(describing: await device.history.item(article)))"
                        )
                        print(
                            "final: server \(String(describing: await harness.cloud.records(in: .readingHistory).first { $0.id.name == "rh-\(article)" }))"
                        )
                    }
                    if summary.sent > 0 || summary.fetched > 0 || summary.deleted > 0 || !summary.isComplete {
                        moved = true
                    }
                }
                if !moved { break }
            }
            var views: [DeviceView] = []
            for device in devices {
                views.append(await DeviceView(device))
                result.notes = max(result.notes, await device.records(TestNote.self).count())
                #expect(await device.localStore.pendingRecordCount() == 0, "seed \(seed): work left pending")
            }
            let server = try await DeviceView(server: harness.cloud)
            for (index, view) in (views + [server]).enumerated() {
                let orphans = view.notes.values.filter { view.readingList[$0.articleID] == nil }.map(\.id).sorted()
                if !orphans.isEmpty {
                    result.orphans += orphans.count
                    let place = index == views.count ? "the server" : "device \(index)"
                    Issue.record("seed \(seed): \(place) keeps notes whose article is gone: \(orphans)")
                }
            }
            if views.contains(where: { $0 != server }) {
                result.diverged = true
                let differences = views.enumerated().map { index, view in
                    "device \(index):\n  " + view.differences(from: server).joined(separator: "\n  ")
                }
                Issue.record("seed \(seed): devices diverged from the server\n\(differences.joined(separator: "\n"))")
            }
            var (checked, lost) = ledger.check(against: server, seed: seed)
            // Photos: every device reads the server's bytes, and those are the bytes a save left standing.
            let serverPhotos = try await Self.photoStates(on: harness.cloud)
            result.photos = serverPhotos.count
            for (index, device) in devices.enumerated() {
                let photos = await Self.photoStates(on: device)
                if photos != serverPhotos {
                    result.diverged = true
                    let message =
                        "seed \(seed): device \(index)'s photos \(photos.sorted { $0.key < $1.key }) differ from the "
                        + "server's \(serverPhotos.sorted { $0.key < $1.key })"
                    Issue.record(Comment(rawValue: message))
                }
            }
            let photoCheck = ledger.checkPhotos(against: serverPhotos, seed: seed)
            checked += photoCheck.checked
            lost += photoCheck.lost
            // No increment is counted twice: a tally holds at most the sum of the acknowledged increments (a
            // merge without an ancestor keeps the larger count, which may leave some out), and every device
            // holds the server's count.
            let serverTallies = await harness.cloud.records(in: SimulatedTally.zone)
            for k in 0..<Self.tallies {
                let name = "t\(k)"
                let sum = ledger.increments[name, default: 0]
                guard let count = serverTallies.first(where: { $0.id.name == name })?["count"]?.intValue else {
                    Issue.record("seed \(seed): tally \(name) is missing on the server")
                    lost += 1
                    continue
                }
                checked += 1
                result.increments += sum
                result.incrementsCounted += min(count, sum)
                if count > sum {
                    lost += 1
                    Issue.record("seed \(seed): tally \(name) counts \(count), more than its increments, \(sum)")
                }
                for (index, device) in devices.enumerated() {
                    let local = await device.records(SimulatedTally.self).value(name)?.count
                    if local != count {
                        result.diverged = true
                        Issue.record(
                            "seed \(seed): device \(index) counts \(String(describing: local)) on \(name), the server \(count)"
                        )
                    }
                }
            }
            // Fields another client wrote stay, unless a device deleted the item after (a device whose delete
            // did not see them loses it to them, as to any edit).
            let serverRecords = await harness.cloud.records(in: .readingHistory)
            for write in ledger.entries where write.device == Ledger.anotherClient {
                guard case .foreignEdit = write.kind else { continue }
                let deletedAfter = ledger.entries.contains {
                    $0.isHistoryDelete && $0.touchesHistory(write.article) && $0.step > write.step
                }
                if deletedAfter { continue }
                checked += 1
                let record = serverRecords.first { $0.id == ReadingHistoryItem.recordID(for: write.article) }
                if record?["summary"] == nil || record?["place"] == nil {
                    lost += 1
                    let message =
                        "seed \(seed): step \(write.step): the fields another client wrote on \(write.article) are "
                        + "gone: \(String(describing: record))"
                    Issue.record(Comment(rawValue: message))
                }
            }
            result.checked = checked
            result.lost = lost
            for device in devices { try await device.close() }
            return result
        }
    }

    /// What a simulation checks of a photo: its caption, and the version its asset's bytes are of
    /// (`TestPhoto.bytes(version:)`; nil without an asset, -1 for bytes of no version or that cannot be read).
    struct PhotoState: Equatable, CustomStringConvertible {
        var caption: String
        var version: Int?

        init(caption: String, bytes: Data?) {
            self.caption = caption
            version = bytes.map { bytes in
                let version = bytes.count - 2_000
                return version >= 0 && bytes == TestPhoto.bytes(version: version) ? version : -1
            }
        }

        var description: String { "\(caption)/\(version.map(String.init) ?? "no asset")" }
    }

    /// A device's photos, their bytes read as a host reads them (from its directory, or downloaded).
    static func photoStates(on context: SyncContext) async -> [String: PhotoState] {
        var states: [String: PhotoState] = [:]
        for photo in await context.records(TestPhoto.self).values() {
            var bytes: Data?
            if let image = photo.image { bytes = (try? await context.data(of: image, in: photo)) ?? Data() }
            states[photo.id] = PhotoState(caption: photo.caption, bytes: bytes)
        }
        return states
    }

    /// The server's photos, their bytes downloaded.
    static func photoStates(on cloud: InMemoryCloud) async throws -> [String: PhotoState] {
        var states: [String: PhotoState] = [:]
        for record in await cloud.records(in: TestPhoto.zone) where record.type == TestPhoto.recordType {
            let photo = try TestPhoto(
                id: record.id.name, fields: RecordFields(record.fields, recordName: record.id.name))
            var bytes: Data?
            if let image = photo.image { bytes = (try? await cloud.downloadAsset(image)) ?? Data() }
            states[photo.id] = PhotoState(caption: photo.caption, bytes: bytes)
        }
        return states
    }

    /// Another client uploads new bytes for photo `k` and writes them to its asset field alone, if the server
    /// has the photo, as a native app does (`changedKeys`: the caption stays). Returns whether the server
    /// holds the upload afterwards (a lost response counts, as in ``writeAsAnotherClient(_:step:to:)``).
    static func writePhotoAsAnotherClient(_ k: Int, version: Int, to cloud: InMemoryCloud) async throws -> Bool {
        let id = TestPhoto.recordID("p\(k)")
        guard let current = await cloud.records(in: TestPhoto.zone).first(where: { $0.id == id }) else { return false }
        let uploaded = await cloud.uploadAsset(TestPhoto.bytes(version: version))
        let foreign = Record(id: id, type: current.type, fields: ["image": uploaded], lastModifiedBy: "another-app")
        do {
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(foreign, policy: .changedKeys)], deleting: [], atomically: true)
            return result.saved[id] != nil
        } catch is CloudError {
            let after = await cloud.records(in: TestPhoto.zone).first { $0.id == id }
            return after?["image"]?.assetValue != nil && after?["image"]?.assetValue == uploaded.assetValue
        }
    }

    /// Another client (a native app on the same container) writes fields FlatSync does not use to the
    /// history item of `article`, if the server has one. Returns whether the server took the write (a
    /// lost response counts as taken: the server applied it). Through the cloud's own API, without a tag
    /// check (`changedKeys`: only the fields sent change), subject to its faults.
    static func writeAsAnotherClient(_ article: String, step: Int, to cloud: InMemoryCloud) async throws -> Bool {
        let id = ReadingHistoryItem.recordID(for: article)
        guard let current = await cloud.records(in: .readingHistory).first(where: { $0.id == id }) else {
            return false
        }
        let foreign = Record(
            id: id, type: current.type,
            fields: [
                "summary": .string("written by another app at step \(step)"),
                "place": .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":\#(step),"longitude":2}"#)),
            ], lastModifiedBy: "another-app")
        do {
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(foreign, policy: .changedKeys)], deleting: [], atomically: true)
            return result.saved[id] != nil
        } catch is CloudError {
            // Refused, lost on the way, or applied and then answered with an error: the server's records say which.
            let after = await cloud.records(in: .readingHistory).first { $0.id == id }
            return after?["summary"] == foreign["summary"]
        }
    }

    // MARK: - Operations

    enum Operation {
        case add(String)
        case remove(String)
        case visit(String, Int64)
        case liking(String, ReadingHistoryItem.Liking)
        case markRead(String)
        case offensive(String)
        case forget(String)
        case clear
        /// Saves note `k` (of three) on the article with text version `v` (a host record, deleteSelf to the
        /// article's entry), if the device has the article saved.
        case note(String, Int, Int)
        case deleteNote(String, Int)
        /// Adds `delta` to tally `k`, as the device counts it now.
        case increment(Int, Int64)
        /// Saves photo `k` with a new asset of the bytes of version `v` (and caption `c<v>`).
        case photo(Int, Int)
        /// Changes the caption of photo `k`, if the device has it, to `r<v>`, keeping its asset.
        case recaption(Int, Int)
        case deletePhoto(Int)

        /// A change of one article's history item: a visit, a liking, a read mark or an offensive mark.
        static func historyChange(of article: String, using random: inout SeededRandomNumberGenerator) -> Operation {
            switch Int.random(in: 0..<4, using: &random) {
            case 0: return .visit(article, Int64.random(in: 0..<6, using: &random))
            case 1: return .liking(article, ReadingHistoryItem.Liking.allCases.randomElement(using: &random)!)
            case 2: return .markRead(article)
            default: return .offensive(article)
            }
        }

        static func random(using random: inout SeededRandomNumberGenerator) -> Operation {
            func article() -> String { "a\(Int.random(in: 0..<SyncSimulationTests.articles, using: &random))" }
            if Int.random(in: 0..<100, using: &random) < 8 {
                return .increment(
                    Int.random(in: 0..<SyncSimulationTests.tallies, using: &random),
                    Int64.random(in: 1...3, using: &random))
            }
            if Int.random(in: 0..<100, using: &random) < 8 {
                let k = Int.random(in: 0..<SyncSimulationTests.photos, using: &random)
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<5: return .photo(k, Int.random(in: 0..<1_000, using: &random))
                case 5..<8: return .recaption(k, Int.random(in: 0..<1_000, using: &random))
                default: return .deletePhoto(k)
                }
            }
            if Int.random(in: 0..<100, using: &random) < 15 {
                let (article, k) = (article(), Int.random(in: 0..<3, using: &random))
                return Int.random(in: 0..<4, using: &random) == 0
                    ? .deleteNote(article, k) : .note(article, k, Int.random(in: 0..<1_000, using: &random))
            }
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<25: return .add(article())
            case 25..<40: return .remove(article())
            case 40..<60: return .visit(article(), Int64.random(in: 0..<6, using: &random))
            case 60..<75: return .liking(article(), ReadingHistoryItem.Liking.allCases.randomElement(using: &random)!)
            case 75..<82: return .markRead(article())
            case 82..<86: return .offensive(article())
            case 86..<97: return .forget(article())
            default: return .clear
            }
        }

        /// Performs the operation; returns what the ledger needs if it changed something.
        func perform(on context: SyncContext, device: Int) async throws -> Ledger.Entry? {
            func entry(_ kind: Ledger.Kind, _ article: String) async -> Ledger.Entry {
                Ledger.Entry(device: device, kind: kind, article: article, after: await context.history.item(article))
            }
            switch self {
            case .add(let id):
                return try await context.readingList.add(id) ? await entry(.add, id) : nil
            case .remove(let id):
                return try await context.readingList.remove(id) ? await entry(.remove, id) : nil
            case .visit(let id, let version):
                try await context.history.visit(id, version: version)
                return await entry(.visit(version), id)
            case .liking(let id, let liking):
                guard (await context.history.item(id)?.liking ?? .none) != liking else { return nil }
                try await context.history.setLiking(id, liking)
                return await entry(.liking(liking), id)
            case .markRead(let id):
                guard await context.history.item(id)?.isRead != true else { return nil }
                try await context.history.markRead(id)
                return await entry(.flag(.read), id)
            case .offensive(let id):
                guard await context.history.item(id)?.flags.contains(.offensive) != true else { return nil }
                try await context.history.markOffensive(id)
                return await entry(.flag(.offensive), id)
            case .forget(let id):
                guard await context.history.item(id) != nil else { return nil }
                try await context.history.remove(id)
                return await entry(.forget, id)
            case .note(let id, let k, let version):
                guard await context.readingList.contains(id) else { return nil }
                let note = TestNote(id: "n-\(id)-\(k)", articleID: id, text: "v\(version)")
                guard try await context.records(TestNote.self).save(note) else { return nil }
                return Ledger.Entry(device: device, kind: .note(k), article: id)
            case .deleteNote(let id, let k):
                guard try await context.records(TestNote.self).delete("n-\(id)-\(k)") else { return nil }
                return Ledger.Entry(device: device, kind: .deleteNote(k), article: id)
            case .increment(let k, let delta):
                let tallies = context.records(SimulatedTally.self)
                guard let current = await tallies.value("t\(k)") else { return nil }
                guard try await tallies.save(SimulatedTally(id: "t\(k)", count: current.count + delta)) else {
                    return nil
                }
                return Ledger.Entry(device: device, kind: .increment(delta), article: "t\(k)")
            case .photo(let k, let version):
                let image = try await context.makeAsset(TestPhoto.bytes(version: version))
                let photo = TestPhoto(id: "p\(k)", caption: "c\(version)", image: image)
                guard try await context.records(TestPhoto.self).save(photo) else { return nil }
                return Ledger.Entry(device: device, kind: .photo(version), article: "p\(k)")
            case .recaption(let k, let version):
                let photos = context.records(TestPhoto.self)
                guard var photo = await photos.value("p\(k)") else { return nil }
                photo.caption = "r\(version)"
                guard try await photos.save(photo) else { return nil }
                return Ledger.Entry(device: device, kind: .recaption, article: "p\(k)")
            case .deletePhoto(let k):
                guard try await context.records(TestPhoto.self).delete("p\(k)") else { return nil }
                return Ledger.Entry(device: device, kind: .deletePhoto, article: "p\(k)")
            case .clear:
                let ids = await context.history.items().map(\.articleID)
                guard !ids.isEmpty else { return nil }
                try await context.history.clear()
                return Ledger.Entry(device: device, kind: .clear(ids), article: "", after: nil)
            }
        }
    }
}

/// Holds a device's next modify request until released, so a test can change things while it is on the wire.
final class RequestHold: Sendable {
    private let state = Mutex<(armed: Bool, waiting: Bool, release: Gate?)>((false, false, nil))
    private let reachedGate = Mutex(Gate())

    /// Opens when the held request has arrived.
    var reached: Gate { reachedGate.withLock { $0 } }

    /// Stops waiting for a request: no request will be held, and waiters on ``reached`` go on.
    func disarm() {
        state.withLock { $0.armed = false }
        reached.open()
    }

    func armForNextModify() {
        reachedGate.withLock { $0 = Gate() }
        state.withLock { $0 = (true, false, Gate()) }
    }

    func release() {
        let gate = state.withLock { state -> Gate? in
            state.armed = false
            return state.release
        }
        gate?.open()
    }

    func pass(_ kind: RequestKind) async {
        guard kind == .modifyRecords else { return }
        let gate = state.withLock { state -> Gate? in
            guard state.armed else { return nil }
            state.armed = false
            state.waiting = true
            return state.release
        }
        guard let gate else { return }
        reached.open()
        await gate.wait()
        state.withLock { $0.waiting = false }
    }
}

// MARK: - The ledger of acknowledged mutations and syncs

struct SyncRecord {
    var start: Int
    var end: Int
    var clean: Bool
}

/// Every acknowledged mutation and every sync, with the global step each happened at, and the checker
/// that decides which effects must be visible at the end.
struct Ledger {
    enum Kind {
        case add, remove, visit(Int64), liking(ReadingHistoryItem.Liking), flag(ReadingHistoryItem.Flags), forget
        case clear([String])
        /// Another client wrote fields of the history item that FlatSync does not use.
        case foreignEdit
        /// Note `k` of the article was saved, or deleted.
        case note(Int), deleteNote(Int)
        /// The tally named by the entry's article went up by this much.
        case increment(Int64)
        /// The photo named by the entry's article was saved with a new asset of version `v`'s bytes, its
        /// caption changed (its asset kept), or deleted.
        case photo(Int), recaption, deletePhoto
    }

    /// The ``Entry/device`` of another client's writes: it writes to the server directly.
    static let anotherClient = -1

    struct Entry {
        /// When the mutation was acknowledged, on the ledger's clock.
        var step = 0
        var device: Int
        var kind: Kind
        var article: String
        /// The device's history item right after the mutation (for its timestamps).
        var after: ReadingHistoryItem? = nil

        var isReadingList: Bool {
            if case .add = kind { return true }
            if case .remove = kind { return true }
            return false
        }

        var isHistoryDelete: Bool {
            switch kind {
            case .forget, .clear: return true
            default: return false
            }
        }

        var isNote: Bool {
            switch kind {
            case .note, .deleteNote: return true
            default: return false
            }
        }

        var isPhoto: Bool {
            switch kind {
            case .photo, .recaption, .deletePhoto: return true
            default: return false
            }
        }

        func touchesHistory(_ article: String) -> Bool {
            if case .clear(let ids) = kind { return ids.contains(article) }
            return !isReadingList && !isNote && !isPhoto && self.article == article
        }
    }

    var entries: [Entry] = []
    /// Each device's syncs, with when they started and ended on the ledger's clock.
    var syncs: [Int: [SyncRecord]] = [:]
    /// The ledger's clock: every mutation and every sync's start and end get their own tick, so all of
    /// them are ordered, across devices.
    private var clock = 0

    mutating func tick() -> Int {
        clock += 1
        return clock
    }

    mutating func append(_ entry: Entry) {
        var entry = entry
        entry.step = tick()
        if case .increment(let delta) = entry.kind { increments[entry.article, default: 0] += delta }
        entries.append(entry)
    }

    /// The sum of each tally's acknowledged increments, by name.
    var increments: [String: Int64] = [:]

    /// True when the device had certainly seen `entry` by `step`: the entry's device finished a clean
    /// sync after making it, and this device then finished a clean sync before `step`.
    func saw(_ device: Int, _ entry: Entry, before step: Int) -> Bool {
        if entry.device == device { return entry.step < step }
        if entry.device == Self.anotherClient {
            // On the server at once: seen by a clean sync that started after it.
            return syncs[device]?.contains { $0.clean && $0.start > entry.step && $0.end < step } ?? false
        }
        guard let pushed = syncs[entry.device]?.first(where: { $0.clean && $0.start > entry.step }) else {
            return false
        }
        return syncs[device]?.contains { $0.clean && $0.start > pushed.end && $0.end < step } ?? false
    }

    /// Counts the effects checked and the ones lost.
    func check(against server: DeviceView, seed: UInt64) -> (checked: Int, lost: Int) {
        var checked = 0
        var lost = 0
        func fail(_ entry: Entry, _ what: String) {
            lost += 1
            Issue.record(
                "seed \(seed): step \(entry.step) device \(entry.device) \(entry.kind) \(entry.article): \(what)")
        }
        for entry in entries {
            switch entry.kind {
            case .add:
                // Superseded only by a later remove of the same article.
                if entries.contains(where: {
                    if case .remove = $0.kind { $0.article == entry.article && $0.step > entry.step } else { false }
                }) {
                    continue
                }
                checked += 1
                if server.readingList[entry.article] == nil { fail(entry, "the saved article is missing") }
            case .remove:
                // Superseded by a later add, or by an add this device had not seen.
                let superseded = entries.contains { other in
                    guard case .add = other.kind, other.article == entry.article else { return false }
                    return other.step > entry.step || !saw(entry.device, other, before: entry.step)
                }
                if superseded { continue }
                checked += 1
                if server.readingList[entry.article] != nil { fail(entry, "the removed article is back") }
            case .forget, .clear:
                let articles: [String]
                if case .clear(let ids) = entry.kind { articles = ids } else { articles = [entry.article] }
                for article in articles {
                    let superseded = entries.contains { other in
                        guard !other.isHistoryDelete, other.touchesHistory(article) else { return false }
                        return other.step > entry.step || !saw(entry.device, other, before: entry.step)
                    }
                    if superseded { continue }
                    checked += 1
                    if server.history[article] != nil {
                        lost += 1
                        Issue.record(
                            "seed \(seed): step \(entry.step) device \(entry.device) forgot \(article), but it is back")
                    }
                }
            case .foreignEdit, .increment, .photo, .recaption, .deletePhoto:
                continue  // Checked against the server's records by the run, photos by `checkPhotos`.
            case .note(let k):
                // Gone only by a later delete of the note, or by a remove of its article that is later or
                // that the noting device had not seen (the note is then an orphan, which devices delete).
                let superseded = entries.contains { other in
                    switch other.kind {
                    case .deleteNote(k) where other.article == entry.article: return other.step > entry.step
                    case .remove where other.article == entry.article:
                        return other.step > entry.step || !saw(entry.device, other, before: entry.step)
                    default: return false
                    }
                }
                if superseded { continue }
                checked += 1
                if server.notes["n-\(entry.article)-\(k)"] == nil { fail(entry, "note \(k) is missing") }
            case .deleteNote(let k):
                // A later save of the note, or one the deleting device had not seen, brings it back.
                let superseded = entries.contains { other in
                    guard case .note(k) = other.kind, other.article == entry.article else { return false }
                    return other.step > entry.step || !saw(entry.device, other, before: entry.step)
                }
                if superseded { continue }
                checked += 1
                if server.notes["n-\(entry.article)-\(k)"] != nil { fail(entry, "deleted note \(k) is back") }
            case .visit, .liking, .flag:
                // Superseded by a later delete of the item.
                if entries.contains(where: {
                    $0.isHistoryDelete && $0.touchesHistory(entry.article) && $0.step > entry.step
                }) {
                    continue
                }
                checked += 1
                guard let item = server.history[entry.article], let after = entry.after else {
                    fail(entry, "the history item is missing")
                    continue
                }
                switch entry.kind {
                case .visit(let version):
                    if item.maxVersionSeen < version || !item.isRead
                        || (item.lastVisited ?? .distantPast) < after.lastVisited!
                    {
                        fail(entry, "the visit is not reflected: \(item)")
                    }
                case .liking(let liking):
                    // A later liking change anywhere may win; otherwise this one must show.
                    let later = entries.contains { other in
                        guard case .liking = other.kind, other.article == entry.article else { return false }
                        return (other.after?.likingChangedAt ?? .distantPast) > after.likingChangedAt!
                    }
                    if !later && item.liking != liking { fail(entry, "liking is \(item.liking), not \(liking)") }
                case .flag(let flag):
                    if !item.flags.contains(flag) { fail(entry, "flag \(flag) is not set") }
                default:
                    break
                }
            }
        }
        return (checked, lost)
    }
}

extension Ledger {
    /// Counts the photo effects checked and the ones lost, against the server's photos:
    ///
    /// - a photo saved or recaptioned is there, unless a later delete may have removed it;
    /// - a photo deleted is gone, unless a later save, or one its device had not seen, brought it back;
    /// - a photo's asset holds the bytes of a save of it that no later save made knowing it superseded (the
    ///   other saves' changed fields win as they reach the server), unless a delete followed the later
    ///   save (it then may lose to an edit it did not see). A photo without an asset is never right: a
    ///   device that edited it without seeing a delete brings it back with its asset's bytes, downloaded
    ///   first (the test clouds keep them; the fault plans never refuse a download as `unknownItem`).
    func checkPhotos(against server: [String: SyncSimulationTests.PhotoState], seed: UInt64) -> (
        checked: Int, lost: Int
    ) {
        var checked = 0
        var lost = 0
        func fail(_ entry: Entry, _ what: String) {
            lost += 1
            Issue.record(
                "seed \(seed): step \(entry.step) device \(entry.device) \(entry.kind) \(entry.article): \(what)")
        }
        let photoEntries = entries.filter(\.isPhoto)
        for entry in photoEntries {
            let others = photoEntries.filter { $0.article == entry.article && $0.step != entry.step }
            switch entry.kind {
            case .photo, .recaption:
                if others.contains(where: {
                    if case .deletePhoto = $0.kind { $0.step > entry.step } else { false }
                }) {
                    continue
                }
                checked += 1
                if server[entry.article] == nil { fail(entry, "the photo is missing") }
            case .deletePhoto:
                let superseded = others.contains { other in
                    if case .deletePhoto = other.kind { return false }
                    return other.step > entry.step || !saw(entry.device, other, before: entry.step)
                }
                if superseded { continue }
                checked += 1
                if server[entry.article] != nil { fail(entry, "the deleted photo is back") }
            default:
                continue
            }
        }
        for (name, state) in server.sorted(by: { $0.key < $1.key }) {
            let saves = photoEntries.filter {
                if case .photo = $0.kind { $0.article == name } else { false }
            }
            let deletes = photoEntries.filter {
                if case .deletePhoto = $0.kind { $0.article == name } else { false }
            }
            // A save made knowing another supersedes it, unless a delete came after: a delete that loses to
            // an edit it did not see leaves the server's version, which may be older than the deleted one.
            let standing = saves.filter { save in
                !saves.contains { other in
                    other.step > save.step && saw(other.device, save, before: other.step)
                        && !deletes.contains { $0.step > other.step }
                }
            }
            let versions = standing.compactMap { if case .photo(let v) = $0.kind { v } else { nil } }
            let deleted = !deletes.isEmpty
            checked += 1
            let right = state.version.map(versions.contains) ?? false
            if !right {
                lost += 1
                let message =
                    "seed \(seed): photo \(name) is \(state) on the server; the saves standing are of versions "
                    + "\(versions.sorted())\(deleted ? ", and it was deleted once" : "")"
                Issue.record(Comment(rawValue: message))
            }
        }
        return (checked, lost)
    }
}

struct SimulationTotals {
    var mutations = 0
    var checked = 0
    var lost = 0
    var diverged = 0
    var requests = 0
    var faults: [String: Int] = [:]
    var expiries = 0
    var restarts = 0
    var kills = 0
    var refused = 0
    var foreignWrites = 0
    var notes = 0
    var orphans = 0
    var photos = 0
    var foreignPhotos = 0
    var increments: Int64 = 0
    var incrementsCounted: Int64 = 0

    mutating func add(_ result: SyncSimulationTests.Result) {
        photos += result.photos
        foreignPhotos += result.foreignPhotos
        increments += result.increments
        incrementsCounted += result.incrementsCounted
        mutations += result.mutations
        checked += result.checked
        lost += result.lost
        diverged += result.diverged ? 1 : 0
        requests += result.requests
        faults.merge(result.faults, uniquingKeysWith: +)
        expiries += result.expiries
        restarts += result.restarts
        kills += result.kills
        refused += result.refused
        foreignWrites += result.foreignWrites
        notes += result.notes
        orphans += result.orphans
    }

    var faultRate: Double { requests == 0 ? 0 : Double(faults.values.reduce(0, +)) / Double(requests) }

    func report(seeds: Int) -> String {
        let kinds = faults.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        return """
            simulation: \(seeds) seeds, \(mutations) acknowledged mutations, \(checked) effects checked, \
            \(requests) requests, \(faults.values.reduce(0, +)) faults injected (\(String(format: "%.0f", faultRate * 100)) %: \
            \(kinds)), \(expiries) token expiries by the admin call, \(restarts) restarts (\(kills) without closing), \
            \(refused) changes refused by a production schema (parked, then sent), \(foreignWrites) writes by another \
            client, \(notes) notes on a device at the end (host records), orphaned notes = \(orphans), \
            \(photos) photos on the server at the end (\(foreignPhotos) assets written by another client), \
            \(increments) tally increments acknowledged, \(incrementsCounted) counted (none twice), \
            diverged seeds = \(diverged), lost = \(lost)
            """
    }
}

/// A tally whose merge adds up both sides' increments since their common ancestor, and keeps the larger
/// count when there is none: the simulation's check that the ancestor is never wrong (an increment counted
/// twice), while one left unknown may leave some out.
struct SimulatedTally: SyncableRecord, Codable {
    static let zone = ZoneID("Tallies")
    static let recordType = "Tally"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["count": .int64]
    var id: String
    var count: Int64
    static func merge(
        _ mine: SimulatedTally, _ server: SimulatedTally, ancestor: SimulatedTally?, changedFields: Set<String>
    ) -> SimulatedTally {
        guard let ancestor else { return SimulatedTally(id: mine.id, count: max(mine.count, server.count)) }
        return SimulatedTally(id: mine.id, count: server.count + mine.count - ancestor.count)
    }
}

// A newcomer's "Workouts" app, synced through CloudKit Web Services against the package's local CKWS
// server (`CloudKitWebServicesServer`), written only from README.md, the DocC catalogs and the public
// symbols' doc comments. Every server started here is stopped; no test sleeps (waits are
// `waitUntilIdle()`, `syncNow()`, a store's `changes()` stream, and a `TestClock` for retries).

import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Testing

// MARK: - The app's records

/// A workout routine. Lives in a zone of its own so its exercises can reference it (CloudKit references
/// stay within one zone).
struct WorkoutRoutine: SyncableRecord, Codable {
    static let zone = ZoneID("Workouts")
    static let recordType = "Routine"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "name": .string,
        "createdAt": .timestamp,
        "privateNotes": .encrypted(.string),  // kept encrypted by CloudKit
        "tags": .list(.string),
        "targetMinutes": .int64,  // optional: no field while nil
    ]

    var id: String
    var name: String
    var createdAt: Date
    var privateNotes: String
    var tags: [String]
    var targetMinutes: Int?
}

/// One exercise of a routine: deleting the routine deletes it (`deleteSelf`), here and on every device.
struct WorkoutExercise: SyncableRecord, Codable {
    static let zone = ZoneID("Workouts")
    static let recordType = "Exercise"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "routine": .reference,
        "name": .string,
        "sets": .int64,
        "reps": .list(.int64),
        "weightKg": .double,
        "lastDone": .timestamp,
    ]

    var id: String
    var routine: RecordReference
    var name: String
    var sets: Int
    var reps: [Int]
    var weightKg: Double?
    var lastDone: Date?

    init(
        id: String, routineID: String, name: String, sets: Int, reps: [Int], weightKg: Double? = nil,
        lastDone: Date? = nil
    ) {
        self.id = id
        self.routine = WorkoutRoutine.reference(to: routineID, action: .deleteSelf)
        self.name = name
        self.sets = sets
        self.reps = reps
        self.weightKg = weightKg
        self.lastDone = lastDone
    }
}

// MARK: - Fixtures

private enum Workouts {
    static let containerID = "iCloud.com.example.workouts"
    static let apiToken = "workouts-api-token"
    static let recordTypes: [any SyncableRecord.Type] = [WorkoutRoutine.self, WorkoutExercise.self]
    /// What the docs say to deploy: FlatSync's own types and the app's.
    static let schema = CloudSchema.flatSync(adding: recordTypes)
    /// The schema of "version 1" of the app, deployed before `targetMinutes` existed.
    static var schemaWithoutTargetMinutes: CloudSchema {
        var schema = Self.schema
        schema.recordTypes["Routine"]?["targetMinutes"] = nil
        return schema
    }
    /// A whole second, so millisecond rounding changes nothing.
    static let monday = Date(timeIntervalSince1970: 1_780_000_000)

    static func legDay(notes: String = "left knee: go easy") -> WorkoutRoutine {
        WorkoutRoutine(
            id: "routine-legs", name: "Leg day", createdAt: monday, privateNotes: notes,
            tags: ["strength", "lower"], targetMinutes: nil)
    }

    static let squat = WorkoutExercise(
        id: "ex-squat", routineID: "routine-legs", name: "Back squat", sets: 5, reps: [5, 5, 5, 5, 5],
        weightKg: 80.5, lastDone: monday)
    static let lunge = WorkoutExercise(
        id: "ex-lunge", routineID: "routine-legs", name: "Walking lunge", sets: 3, reps: [12, 12, 10])

    static func configuration(clock: TestClock) -> SyncContext.Configuration {
        var configuration = SyncContext.Configuration(clock: clock)
        configuration.recordTypes = recordTypes
        configuration.randomSeed = 42
        return configuration
    }

    static func serverOptions(strictTokens: Bool = false) -> CloudKitWebServicesServer.Options {
        // A production-like container: an API token, a web auth token required for every private request.
        // The courier holds a poll for long, so no keepalive (and its whole-database fetch) muddles the
        // push test.
        CloudKitWebServicesServer.Options(
            apiToken: apiToken, requireWebAuthToken: true, strictTokens: strictTokens,
            courierHoldTime: .seconds(120))
    }
}

/// Records the HTTP requests a transport sends, to check what went on the wire.
private final class RecordingExchange: HTTPExchange, @unchecked Sendable {
    private let inner: any HTTPExchange = URLSessionExchange.shared
    private let lock = NSLock()
    private var sent: [HTTPExchangeRequest] = []

    var requests: [HTTPExchangeRequest] { lock.withLock { sent } }

    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        lock.withLock { sent.append(request) }
        return try await inner.send(request)
    }
}

/// One device of the app: a directory, its transport, its context.
private struct WorkoutsDevice {
    let directory: URL
    let transport: CloudKitWebServicesTransport
    let context: SyncContext
    let recorder: SyncEventRecorder
    let clock: TestClock
    let userID: String
    /// Whether opening needed the sign-in page (false: the saved web auth token was enough).
    let neededSignIn: Bool

    var routines: RecordStore<WorkoutRoutine> { context.records(WorkoutRoutine.self) }
    var exercises: RecordStore<WorkoutExercise> { context.records(WorkoutExercise.self) }
    var account: CloudAccount { CloudAccount(id: userID, transport: transport) }

    /// Opens (or reopens) the device directory as Getting Started does, signing in through the emulator's
    /// sign-in page when the server asks.
    static func open(
        _ directory: URL, server: CloudKitWebServicesServer, http: any HTTPExchange = URLSessionExchange.shared,
        start: Bool = true
    ) async throws -> WorkoutsDevice {
        let transport = CloudKitWebServicesTransport(
            configuration: .init(
                containerID: Workouts.containerID, environment: .production, apiToken: Workouts.apiToken,
                tokenStore: DirectoryWebAuthTokenStore(directory: directory), baseURL: server.baseURL, http: http))
        let (userID, neededSignIn) = try await signIn(transport)
        let clock = TestClock()
        let context = try await SyncContext.open(
            directory: directory, account: CloudAccount(id: userID, transport: transport),
            configuration: Workouts.configuration(clock: clock))
        let recorder = SyncEventRecorder(context)
        if start {
            try await context.start()
            await context.waitUntilIdle()
        }
        return WorkoutsDevice(
            directory: directory, transport: transport, context: context, recorder: recorder, clock: clock,
            userID: userID, neededSignIn: neededSignIn)
    }

    func close() async throws { try await context.close() }
}

/// `currentUser()`, and when nobody is signed in, the sign-in page of the `redirectURL` (the emulator's
/// answers with the token as text), then `signIn(withWebAuthToken:)`.
private func signIn(_ transport: CloudKitWebServicesTransport) async throws -> (userID: String, neededSignIn: Bool) {
    do {
        return (try await transport.currentUser().userRecordName, false)
    } catch let error as CloudError where error.code == .notAuthenticated {
        let page = try #require(error.redirectURL, "notAuthenticated without a sign-in page: \(error)")
        let response = try await URLSessionExchange.shared.send(
            HTTPExchangeRequest(method: "GET", url: page, timeout: .seconds(10)))
        try #require(response.status == 200, "sign-in page answered \(response.status)")
        let token = String(decoding: response.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(!token.isEmpty)
        try await transport.signIn(withWebAuthToken: token)
        return (try await transport.currentUser().userRecordName, true)
    }
}

/// Starts a production-like server with `schema` deployed, runs `body`, and stops the server whatever
/// happens.
private func withWorkoutsServer(
    schema: CloudSchema? = Workouts.schema, strictTokens: Bool = false,
    _ body: (CloudKitWebServicesServer, URL) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("workouts-newcomer-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    try await CloudKitWebServicesServer.withServer(options: Workouts.serverOptions(strictTokens: strictTokens)) {
        server in
        try await server.backing.setProductionSchema(schema)
        try await body(server, directory)
    }
}

private func serverRecord(_ server: CloudKitWebServicesServer, _ name: String) async throws -> Record? {
    try await server.backing.records(in: WorkoutRoutine.zone).first { $0.id.name == name }
}

/// The `fields` of every record a `records/modify` request sent, by record name.
private func sentFields(_ requests: [HTTPExchangeRequest]) -> [String: [String: Any]] {
    var result: [String: [String: Any]] = [:]
    for request in requests where request.url.path.hasSuffix("records/modify") {
        guard let body = request.body,
            let json = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let operations = json["operations"] as? [[String: Any]]
        else { continue }
        for operation in operations {
            guard let record = operation["record"] as? [String: Any], let name = record["recordName"] as? String,
                let fields = record["fields"] as? [String: Any]
            else { continue }
            result[name, default: [:]].merge(fields) { _, new in new }
        }
    }
    return result
}

/// Advances a device's test clock deadline by deadline until `condition` holds (at most `steps` times).
private func advanceUntil(
    _ device: WorkoutsDevice, steps: Int = 20, _ condition: () async -> Bool
) async -> Bool {
    for _ in 0..<steps {
        if await condition() { return true }
        guard device.clock.advanceToNextDeadline() else { return await condition() }
        await device.context.waitUntilIdle()
    }
    return await condition()
}

/// What a `LongPollNotificationSource` delivered, in order.
private actor NotificationLog {
    var notifications: [CloudNotification] = []
    var failure: (any Error)?
    func append(_ notification: CloudNotification) { notifications.append(notification) }
    func fail(_ error: any Error) { failure = error }
}

// MARK: - Tests

@Suite("Workouts newcomer: a host app over CloudKit Web Services", .serialized, .timeLimit(.minutes(2)))
struct WorkoutsNewcomerTests {

    // 1. The record types, their registration, and the schema to deploy.
    @Test func schemaToDeployDeclaresTheTypesTheReferenceAndTheEncryptedField() async throws {
        let configuration = Workouts.configuration(clock: TestClock())
        #expect(configuration.schema == Workouts.schema)

        let routine = try #require(Workouts.schema.recordTypes["Routine"])
        let exercise = try #require(Workouts.schema.recordTypes["Exercise"])
        #expect(routine["privateNotes"] == .encrypted(.string))
        #expect(routine["privateNotes"]?.isEncrypted == true)
        #expect(routine["tags"] == .list(.string))
        #expect(exercise["routine"] == .reference)
        #expect(exercise["reps"] == .list(.int64))
        // FlatSync's own types and its device-ID field come along.
        #expect(Workouts.schema.recordTypes["ReadingListEntry"] != nil)
        #expect(routine[CloudSchema.lastModifiedByField] != nil)

        // The text `cktool import-schema` takes.
        let text = configuration.schema.ckdbText
        #expect(text.hasPrefix("DEFINE SCHEMA"))
        #expect(text.contains("RECORD TYPE Routine"))
        #expect(text.contains("RECORD TYPE Exercise"))
        #expect(text.contains("ENCRYPTED STRING"))
        let routineBlock =
            try #require(text.components(separatedBy: "RECORD TYPE Routine").last)
            .components(separatedBy: "RECORD TYPE").first ?? ""
        #expect(routineBlock.contains("privateNotes") && routineBlock.contains("ENCRYPTED STRING"))
        #expect(routineBlock.contains("LIST<STRING>"))
        let exerciseBlock =
            try #require(text.components(separatedBy: "RECORD TYPE Exercise").last)
            .components(separatedBy: "RECORD TYPE").first ?? ""
        #expect(exerciseBlock.contains("routine") && exerciseBlock.contains("REFERENCE"))
        #expect(exerciseBlock.contains("LIST<INT64>"))

        // The JSON form reads back as the same schema.
        #expect(try CloudSchema(json: Workouts.schema.jsonData) == Workouts.schema)
    }

    @Test func aWrongAPITokenIsNotAuthenticatedWithoutASignInPage() async throws {
        try await withWorkoutsServer { server, _ in
            let transport = CloudKitWebServicesTransport(
                configuration: .init(
                    containerID: Workouts.containerID, environment: .production, apiToken: "not-the-token",
                    tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL))
            do {
                _ = try await transport.currentUser()
                Issue.record("currentUser() succeeded with a wrong API token")
            } catch let error as CloudError {
                #expect(error.code == .notAuthenticated)
                #expect(error.redirectURL == nil)  // the API token or the container is wrong
            }
        }
    }

    // 2a. Two devices, a production container: a change on one arrives on the other by polling, and the
    // context registers the app's types with the transport and sends the encrypted field marked.
    @Test func aChangeOnOneDeviceArrivesOnTheOtherByPolling() async throws {
        try await withWorkoutsServer { server, directory in
            let wire = RecordingExchange()
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server, http: wire)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            #expect(a.neededSignIn && b.neededSignIn)  // the server requires a web auth token
            #expect(a.userID == b.userID)
            // Opening added the app's types to the schema the transport writes within.
            #expect(a.transport.schema?.recordTypes["Routine"]?["privateNotes"] == .encrypted(.string))
            #expect(try await server.backing.productionSchema() == Workouts.schema)

            var batch = RecordBatch()
            try batch.save(Workouts.legDay())
            try batch.save([Workouts.squat, Workouts.lunge])
            #expect(try await a.context.apply(batch) == 3)
            await a.context.waitUntilIdle()  // started: sent at once
            // The routine goes first, its exercises in the next request once it is on the server.
            let saved = a.recorder.events.reduce(0) { total, event in
                if case .didSend(WorkoutRoutine.zone, let saved, 0, 0) = event { total + saved } else { total }
            }
            #expect(saved == 3)
            #expect(await a.context.status().pendingRecords == 0)

            let onServer = try #require(try await serverRecord(server, "routine-legs"))
            #expect(onServer.type == "Routine")
            #expect(onServer["privateNotes"] == .string("left knee: go easy"))
            #expect(onServer["targetMinutes"] == nil)  // nil: no field
            let sent = sentFields(wire.requests)
            let notes = try #require(sent["routine-legs"]?["privateNotes"] as? [String: Any])
            #expect(notes["isEncrypted"] as? Bool == true)
            #expect((sent["ex-squat"]?["routine"] as? [String: Any])?["type"] as? String == "REFERENCE")

            let summary = try await b.context.syncNow()
            #expect(summary.isComplete)
            #expect(summary.fetched == 3)
            #expect(await b.routines.value("routine-legs") == Workouts.legDay())
            #expect(await b.exercises.value("ex-squat") == Workouts.squat)
            #expect(await b.exercises.value("ex-lunge") == Workouts.lunge)

            // And back: B edits, A polls.
            var edited = Workouts.squat
            edited.weightKg = 85
            edited.reps = [5, 5, 5, 3]
            try await b.exercises.save(edited)
            await b.context.waitUntilIdle()
            #expect(try await a.context.syncNow().isComplete)
            #expect(await a.exercises.value("ex-squat") == edited)

            // Clearing an optional and emptying an array travel too.
            var cleared = edited
            cleared.weightKg = nil
            cleared.lastDone = nil
            try await a.exercises.save(cleared)
            var untagged = Workouts.legDay()
            untagged.tags = []
            try await a.routines.save(untagged)
            await a.context.waitUntilIdle()
            #expect(await a.context.status().pendingRecords == 0)
            #expect(try await serverRecord(server, "ex-squat")?["weightKg"] == nil)
            #expect(try await b.context.syncNow().isComplete)
            #expect(await b.exercises.value("ex-squat") == cleared)
            #expect(await b.routines.value("routine-legs") == untagged)

            try await a.close()
            try await b.close()
        }
    }

    // 2b. The push path: B follows a LongPollNotificationSource and hands each notification to its context.
    @Test func aChangeOnOneDeviceArrivesOnTheOtherByLongPollPush() async throws {
        try await withWorkoutsServer { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            // start() made the zone subscriptions CloudKit pushes for, the app's zone included.
            let subscriptions = try await server.backing.subscriptions()
            #expect(subscriptions.contains { $0.zone == WorkoutRoutine.zone })

            let log = NotificationLog()
            let (arrivals, arrived) = AsyncStream.makeStream(of: CloudNotification.self)
            let source = LongPollNotificationSource(transport: b.transport)
            let listener = Task {
                do {
                    for try await notification in source.notifications() {
                        await log.append(notification)
                        await b.context.handleRemoteNotification(notification)
                        arrived.yield(notification)
                    }
                } catch {
                    await log.fail(error)
                }
                arrived.finish()
            }
            defer { listener.cancel() }  // also when an expectation below throws
            var arrivalsIterator = arrivals.makeAsyncIterator()
            // The first notification comes once the push token is registered: a whole-database fetch.
            let first = await arrivalsIterator.next()
            #expect(first == .wholeDatabase(.gap))
            await b.context.waitUntilIdle()

            let bRoutines = b.routines.changes()  // subscribe before the change is made
            try await a.routines.save(Workouts.legDay())
            try await a.exercises.save(Workouts.squat)
            await a.context.waitUntilIdle()

            // No sleep, no syncNow on B: wait for B's store to take in the fetch a push caused.
            for await names in bRoutines where names.contains("routine-legs") { break }
            await b.context.waitUntilIdle()
            #expect(await b.routines.value("routine-legs") == Workouts.legDay())
            #expect(await b.exercises.value("ex-squat") == Workouts.squat)
            let received = await log.notifications
            #expect(
                received.contains { $0.fetch == .zones([WorkoutRoutine.zone]) && $0.reason == .recordZone },
                "no zone push for Workouts: \(received)")
            #expect(await log.failure == nil)

            listener.cancel()
            _ = await listener.value
            try await a.close()
            try await b.close()
        }
    }

    // 3a. The web auth token is gone (signed out elsewhere, or the server no longer knows it): the app is
    // paused with notAuthenticated, keeps its change, and sends it once it signs in again.
    @Test func aMissingWebAuthTokenPausesAndTheChangeGoesOutAfterSigningInAgain() async throws {
        try await withWorkoutsServer { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            try await a.routines.save(Workouts.legDay())
            await a.context.waitUntilIdle()
            #expect(try await serverRecord(server, "routine-legs") != nil)

            try await a.transport.signOut()  // the token is gone
            a.recorder.removeAll()
            let edited = Workouts.legDay(notes: "knee fine now, add weight")
            try await a.routines.save(edited)
            await a.context.waitUntilIdle()

            // What the app sees.
            #expect(a.recorder.events.contains(.paused(reason: .notAuthenticated)))
            var status = await a.context.status()
            #expect(status.paused == .notAuthenticated)
            #expect(status.pendingRecords == 1)
            #expect(await a.routines.value("routine-legs") == edited)  // kept on the device
            #expect(try await serverRecord(server, "routine-legs")?["privateNotes"] == .string("left knee: go easy"))
            let summary = try await a.context.syncNow()
            #expect(!summary.isComplete)
            #expect(summary.problems.contains { $0.kind == .paused(.notAuthenticated) })
            #expect(summary.pendingRecords == 1)

            // The app asks who is signed in: nobody, and here is the sign-in page.
            do {
                _ = try await a.transport.currentUser()
                Issue.record("currentUser() succeeded without a web auth token")
            } catch let error as CloudError {
                #expect(error.code == .notAuthenticated)
                #expect(error.redirectURL != nil)
            }
            // Recover: sign in, tell the context the (same) account is back.
            let (userID, neededSignIn) = try await signIn(a.transport)
            #expect(neededSignIn && userID == a.userID)
            try await a.context.accountDidChange(to: a.account)
            await a.context.waitUntilIdle()
            status = await a.context.status()
            #expect(status.paused == nil)
            #expect(status.pendingRecords == 0)
            #expect(try await serverRecord(server, "routine-legs")?["privateNotes"] == .string(edited.privateNotes))
            #expect(try await b.context.syncNow().isComplete)
            #expect(await b.routines.value("routine-legs") == edited)

            try await a.close()
            try await b.close()
        }
    }

    // 3b. The token expires under the app: strict tokens (only the newest is valid, as Apple documents),
    // and a response lost on the way spends the token. The next request gets 401.
    @Test func anExpiredWebAuthTokenPausesAndNothingIsLostAfterSigningInAgain() async throws {
        try await withWorkoutsServer(strictTokens: true) { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            try await a.routines.save(Workouts.legDay())
            await a.context.waitUntilIdle()
            #expect(await a.context.status().pendingRecords == 0)

            try await server.backing.setFaultPlan(.loseResponses(1, .modifyRecords))
            a.recorder.removeAll()
            try await a.exercises.save(Workouts.squat)  // applied by the server; its answer and token lost
            await a.context.waitUntilIdle()
            // The retry waits on A's test clock; once due, it meets a token that is no longer valid.
            let paused = await advanceUntil(a) { await a.context.status().paused == .notAuthenticated }
            #expect(paused, "events: \(a.recorder.events)")
            #expect(a.recorder.events.contains(.paused(reason: .notAuthenticated)))

            // While paused, the user keeps training.
            try await a.exercises.save(Workouts.lunge)
            await a.context.waitUntilIdle()
            #expect(await a.context.status().pendingRecords >= 1)
            #expect(try await serverRecord(server, "ex-lunge") == nil)

            let (userID, neededSignIn) = try await signIn(a.transport)
            #expect(neededSignIn && userID == a.userID)
            try await a.context.accountDidChange(to: a.account)
            await a.context.waitUntilIdle()
            let status = await a.context.status()
            #expect(status.paused == nil)
            #expect(status.pendingRecords == 0)
            #expect(try await serverRecord(server, "ex-squat") != nil)
            #expect(try await serverRecord(server, "ex-lunge") != nil)
            #expect(try await b.context.syncNow().isComplete)
            #expect(await b.exercises.value("ex-squat") == Workouts.squat)
            #expect(await b.exercises.value("ex-lunge") == Workouts.lunge)

            try await a.close()
            try await b.close()
        }
    }

    // 4a. Deleting a routine deletes its exercises on both devices (and on the server).
    @Test func deletingARoutineRemovesItsExercisesOnBothDevices() async throws {
        try await withWorkoutsServer { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            var batch = RecordBatch()
            try batch.save(Workouts.legDay())
            try batch.save([Workouts.squat, Workouts.lunge])
            try await a.context.apply(batch)
            await a.context.waitUntilIdle()
            #expect(try await b.context.syncNow().isComplete)
            #expect(await b.exercises.count() == 2)

            #expect(try await a.routines.delete("routine-legs"))
            #expect(await a.exercises.count() == 0)  // at once, here
            await a.context.waitUntilIdle()
            #expect(await a.context.status().pendingRecords == 0)
            #expect(try await server.backing.records(in: WorkoutRoutine.zone).isEmpty)

            let summary = try await b.context.syncNow()
            #expect(summary.isComplete)
            #expect(await b.routines.count() == 0)
            #expect(await b.exercises.count() == 0)
            #expect(await b.exercises.value("ex-squat") == nil)

            try await a.close()
            try await b.close()
        }
    }

    // 4b. A field the production schema lacks: the change is refused, reported, kept (across a restart
    // too), the rest of the zone's changes go through, and it goes out once the schema is deployed.
    @Test func aChangeTheProductionSchemaLacksIsReportedAndKept() async throws {
        try await withWorkoutsServer(schema: Workouts.schemaWithoutTargetMinutes) { server, directory in
            let aDirectory = directory.appendingPathComponent("A")
            var a = try await WorkoutsDevice.open(aDirectory, server: server)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            try await a.routines.save(Workouts.legDay())  // no targetMinutes field: taken
            await a.context.waitUntilIdle()
            #expect(try await serverRecord(server, "routine-legs") != nil)

            a.recorder.removeAll()
            var timed = Workouts.legDay()
            timed.targetMinutes = 45
            try await a.routines.save(timed)
            try await a.exercises.save(Workouts.squat)
            await a.context.waitUntilIdle()

            let routineID = WorkoutRoutine.recordID("routine-legs")
            let refusal = try #require(await a.context.refusedChanges().first)
            #expect(await a.context.refusedChanges().count == 1)
            #expect(refusal.recordID == routineID)
            #expect(refusal.code == .invalidArguments)
            #expect(refusal.serverErrorCode == "BAD_REQUEST")
            #expect(!refusal.isDelete)
            #expect(
                a.recorder.events.contains {
                    if case .changeRefused(let r) = $0 { r.recordID == routineID } else { false }
                })
            #expect(await a.routines.value("routine-legs") == timed)  // still applied here
            let status = await a.context.status()
            #expect(status.refusedRecords == 1)
            #expect(status.pendingRecords == 1)
            #expect(try await serverRecord(server, "routine-legs")?["targetMinutes"] == nil)
            #expect(try await serverRecord(server, "ex-squat") != nil)  // the rest went through

            // syncNow sends it again and reports it again.
            let again = try await a.context.syncNow()
            #expect(again.refused.map(\.recordID) == [routineID])

            // A restart keeps it parked.
            try await a.close()
            a = try await WorkoutsDevice.open(aDirectory, server: server)
            #expect(!a.neededSignIn)  // the web auth token was kept in the directory
            #expect(await a.context.refusedChanges().map(\.recordID) == [routineID])
            #expect(await a.routines.value("routine-legs") == timed)

            // The schema with targetMinutes is deployed; the next launch's start() sends the parked change
            // again ("sent again only when asked — by the next start() and by every syncNow()").
            try await server.backing.setProductionSchema(Workouts.schema)
            try await a.close()
            a = try await WorkoutsDevice.open(aDirectory, server: server)
            #expect(await a.context.refusedChanges().isEmpty)
            #expect(await a.context.status().pendingRecords == 0)
            #expect(try await serverRecord(server, "routine-legs")?["targetMinutes"] == .int(45))
            #expect(try await b.context.syncNow().isComplete)
            #expect(await b.routines.value("routine-legs") == timed)

            try await a.close()
            try await b.close()
        }
    }

    // A container whose deployed schema has the notes unencrypted refuses the encrypted save: deploying
    // the wrong schema shows as a refusal, not as notes stored in the clear.
    @Test func aSchemaDeployedWithTheNotesUnencryptedRefusesThem() async throws {
        var clear = Workouts.schema
        clear.recordTypes["Routine"]?["privateNotes"] = .string
        try await withWorkoutsServer(schema: clear) { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            try await a.routines.save(Workouts.legDay())
            let summary = try await a.context.syncNow()
            #expect(summary.refused.map(\.recordID) == [WorkoutRoutine.recordID("routine-legs")])
            #expect(try await serverRecord(server, "routine-legs") == nil)
            #expect(await a.routines.value("routine-legs") == Workouts.legDay())
            try await a.close()
        }
    }

    @Test func aRefusedNewRoutineCanBeDiscarded() async throws {
        try await withWorkoutsServer(schema: Workouts.schemaWithoutTargetMinutes) { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            var timed = Workouts.legDay()
            timed.targetMinutes = 30
            try await a.routines.save(timed)
            try await a.exercises.save(Workouts.squat)  // owned by the refused routine
            let summary = try await a.context.syncNow()
            #expect(summary.refused.map(\.recordID) == [WorkoutRoutine.recordID("routine-legs")])
            #expect(try await serverRecord(server, "routine-legs") == nil)

            let discarded = try await a.context.discardRefusedChanges([WorkoutRoutine.recordID("routine-legs")])
            #expect(discarded == [WorkoutRoutine.recordID("routine-legs")])
            // The server has no version to put back: the routine goes, and the exercise it owns with it.
            #expect(await a.routines.value("routine-legs") == nil)
            #expect(await a.exercises.value("ex-squat") == nil)
            #expect(await a.context.status().refusedRecords == 0)
            try await a.close()
        }
    }

    // 3b'. The push path without a web auth token: the long-poll source ends its stream with
    // notAuthenticated ("Only a sign-in failure ... ends the stream"), so the app knows to sign in.
    @Test func theLongPollSourceEndsWithNotAuthenticatedWithoutAWebAuthToken() async throws {
        try await withWorkoutsServer { server, directory in
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server)
            try await b.transport.signOut()
            let source = LongPollNotificationSource(transport: b.transport)
            var received: [CloudNotification] = []
            do {
                for try await notification in source.notifications() { received.append(notification) }
                Issue.record("the stream ended without an error")
            } catch let error as CloudError {
                #expect(error.code == .notAuthenticated)
            }
            #expect(received.isEmpty)
            try await b.close()
        }
    }

    // 3d. Signed out and killed with a change pending: the next launch signs in, opens, and sends it.
    @Test func aChangeMadeWhileSignedOutGoesOutAfterARelaunchAndSignIn() async throws {
        try await withWorkoutsServer { server, directory in
            let aDirectory = directory.appendingPathComponent("A")
            var a = try await WorkoutsDevice.open(aDirectory, server: server)
            try await a.transport.signOut()
            try await a.routines.save(Workouts.legDay())
            await a.context.waitUntilIdle()
            #expect(await a.context.status().paused == .notAuthenticated)
            try await a.close()

            a = try await WorkoutsDevice.open(aDirectory, server: server)  // currentUser() → sign-in page
            #expect(a.neededSignIn)
            #expect(await a.context.status().pendingRecords == 0)
            #expect(try await serverRecord(server, "routine-legs")?["privateNotes"] == .string("left knee: go easy"))
            try await a.close()
        }
    }

    // 3c. After signing in again, a pull to refresh alone does not resume: the token may be another
    // user's, and only the host knows whose (the emulator audit). Naming the account currentUser() gives
    // resumes.
    @Test func afterSigningInAgainOnlyNamingTheAccountResumesSending() async throws {
        try await withWorkoutsServer { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            try await a.transport.signOut()
            try await a.routines.save(Workouts.legDay())
            await a.context.waitUntilIdle()
            #expect(await a.context.status().paused == .notAuthenticated)

            let (userID, _) = try await signIn(a.transport)
            let summary = try await a.context.syncNow()
            #expect(summary.problems.map(\.kind) == [.paused(.notAuthenticated)])
            #expect(summary.sent == 0)
            #expect(try await serverRecord(server, "routine-legs") == nil)

            try await a.context.accountDidChange(to: CloudAccount(id: userID, transport: a.transport))
            #expect(try await a.context.syncNow().isComplete)
            #expect(await a.context.status().paused == nil)
            #expect(try await serverRecord(server, "routine-legs") != nil)
            try await a.close()
        }
    }

    // 4c. B edits an exercise while offline, A deletes its routine meanwhile: once B syncs, the exercise is
    // gone everywhere (the docs: an orphan is deleted "here and on the server, so none is left anywhere").
    @Test func anExerciseEditedOfflineGoesWithItsRoutineDeletedElsewhere() async throws {
        try await withWorkoutsServer { server, directory in
            let a = try await WorkoutsDevice.open(directory.appendingPathComponent("A"), server: server)
            let b = try await WorkoutsDevice.open(directory.appendingPathComponent("B"), server: server, start: false)
            var batch = RecordBatch()
            try batch.save(Workouts.legDay())
            try batch.save([Workouts.squat, Workouts.lunge])
            try await a.context.apply(batch)
            await a.context.waitUntilIdle()
            #expect(try await b.context.syncNow().isComplete)

            var heavier = Workouts.squat
            heavier.weightKg = 100
            try await b.exercises.save(heavier)  // B is not started: it waits, as offline
            try await a.routines.delete("routine-legs")
            await a.context.waitUntilIdle()
            #expect(try await server.backing.records(in: WorkoutRoutine.zone).isEmpty)

            let summary = try await b.context.syncNow()
            #expect(summary.isComplete, "problems: \(summary.problems)")
            #expect(await b.routines.count() == 0)
            #expect(await b.exercises.count() == 0)
            #expect(try await server.backing.records(in: WorkoutRoutine.zone).isEmpty)
            #expect(try await a.context.syncNow().isComplete)
            #expect(await a.exercises.count() == 0)
            try await a.close()
            try await b.close()
        }
    }

    // 5. Closing and reopening a device keeps everything, pending changes included.
    @Test func restartingADeviceKeepsEverythingIncludingPendingChanges() async throws {
        try await withWorkoutsServer { server, directory in
            let aDirectory = directory.appendingPathComponent("A")
            let bDirectory = directory.appendingPathComponent("B")
            // A is not started: its changes wait, as while offline.
            var a = try await WorkoutsDevice.open(aDirectory, server: server, start: false)
            var b = try await WorkoutsDevice.open(bDirectory, server: server)
            var batch = RecordBatch()
            try batch.save(Workouts.legDay())
            try batch.save([Workouts.squat, Workouts.lunge])
            try await a.context.apply(batch)
            #expect(await a.context.status().pendingRecords == 3)
            try await a.close()

            a = try await WorkoutsDevice.open(aDirectory, server: server, start: false)
            #expect(!a.neededSignIn)
            #expect(await a.context.status().pendingRecords == 3)
            #expect(await a.routines.value("routine-legs") == Workouts.legDay())
            #expect(await a.exercises.value("ex-squat") == Workouts.squat)
            #expect(await a.exercises.value("ex-lunge") == Workouts.lunge)
            #expect(try await server.backing.records(in: WorkoutRoutine.zone).isEmpty)

            let sent = try await a.context.syncNow()
            #expect(sent.isComplete)
            #expect(sent.sent == 3)
            #expect(try await b.context.syncNow().fetched == 3)

            // B restarts: what it fetched is there, and nothing is fetched again.
            try await b.close()
            b = try await WorkoutsDevice.open(bDirectory, server: server, start: false)
            #expect(!b.neededSignIn)
            #expect(await b.routines.value("routine-legs") == Workouts.legDay())
            #expect(await b.exercises.value("ex-squat") == Workouts.squat)
            let refetch = try await b.context.syncNow()
            #expect(refetch.isComplete)
            #expect(refetch.fetched == 0)

            try await a.close()
            try await b.close()
        }
    }
}

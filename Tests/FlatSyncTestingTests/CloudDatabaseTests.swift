import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The pieces under the clouds: the database value's encoding, the seeded generator, fault plans.

@Suite("CloudDatabase and fault plans")
struct CloudDatabaseTests {
    /// A database with a bit of everything: zones deleted and re-created, records of every field type,
    /// tombstones with several lives, a fault plan mid-way, counters.
    private func busyDatabase() throws -> CloudDatabase {
        var database = CloudDatabase(changeHistoryLimit: 50, faultPlan: .random(rate: 0.5, seed: 3), serverID: 42)
        try database.createZones([.notes, .photos])
        _ = try database.modifyRecords(
            saving: [
                RecordSave(
                    makeRecord("a", ["s": .string("ü"), "i": .int(-7), "d": .date(Date(timeIntervalSince1970: 1.25))])),
                RecordSave(makeRecord("b")), RecordSave(makeRecord("c", in: .photos)),
            ],
            deleting: [],
            atomically: true
        )
        _ = try database.modifyRecords(
            saving: [], deleting: [RecordDeletion(recordID("b"), policy: .force)], atomically: false)
        _ = try database.modifyRecords(saving: [RecordSave(makeRecord("b"))], deleting: [], atomically: false)
        _ = try database.modifyRecords(
            saving: [], deleting: [RecordDeletion(recordID("b"), policy: .force)], atomically: false)
        try database.deleteZoneAsUser(.photos)
        try database.createZones([.photos])
        _ = try? database.perform(.listZones) { $0.listZones() }
        return database
    }

    /// Two zones a page: every zone once, in name order; a zone that changed behind the pages while the
    /// client paged comes again with the next fetch, not never; a smaller `resultsLimit` wins.
    @Test func databaseChangesComeInPagesThatMissNothing() throws {
        let (a, b, c, d, e) = (ZoneID("A"), ZoneID("B"), ZoneID("C"), ZoneID("D"), ZoneID("E"))
        var database = CloudDatabase()
        database.setDatabaseChangesLimit(2)
        try database.createZones([a, b, c, d, e])
        let first = try database.fetchDatabaseChanges(since: nil)
        #expect(first.changedZones == [a, b] && first.moreComing)
        _ = try database.modifyRecords(
            saving: [RecordSave(makeRecord("x", in: a)), RecordSave(makeRecord("y", in: e))], deleting: [],
            atomically: false)
        let second = try database.fetchDatabaseChanges(since: first.token)
        #expect(second.changedZones == [c, d] && second.moreComing)
        let third = try database.fetchDatabaseChanges(since: second.token)
        #expect(third.changedZones == [e] && !third.moreComing)
        let next = try database.fetchDatabaseChanges(since: third.token)
        #expect(next.changedZones == [a, e], "changed while paging: reported again")
        #expect(!next.moreComing)

        try database.deleteZones([b, c, d])
        var deleted: [ZoneID] = []
        var token = next.token
        var pages = 0
        while true {
            let page = try database.fetchDatabaseChanges(since: token, resultsLimit: 1)
            pages += 1
            deleted += page.deletedZones.map(\.zone)
            #expect(page.changedZones.isEmpty)
            token = page.token
            if !page.moreComing { break }
        }
        #expect(deleted == [b, c, d] && pages == 3)
        #expect(try database.fetchDatabaseChanges(since: token).deletedZones.isEmpty, "each deletion once")
    }

    /// CloudKit's native fetch from no token returns deletions too (Apple DTS, in ckws-client.md); what
    /// CloudKit Web Services does is not known, so the emulator can answer either way. Set, a fetch from
    /// no token also reports the deletions the zone's history holds that fit in its first page; later
    /// pages report deletions as from any token, and a fetch from a token is unchanged.
    @Test func aFetchFromNoTokenCanReportDeletionsToo() throws {
        var database = CloudDatabase()
        try database.createZones([.notes])
        _ = try database.modifyRecords(
            saving: ["a", "b", "c", "d"].map { RecordSave(makeRecord($0)) }, deleting: [], atomically: false)
        _ = try database.modifyRecords(
            saving: [], deleting: ["b", "d"].map { RecordDeletion(recordID($0), policy: .force) }, atomically: false)
        let quiet = try database.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
        #expect(quiet.deletedRecordIDs.isEmpty && Set(quiet.changedRecords.map(\.id.name)) == ["a", "c"])
        #expect(!database.reportsDeletionsFromNoToken)

        database.setReportsDeletionsFromNoToken(true)
        let told = try database.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
        #expect(Set(told.changedRecords.map(\.id.name)) == ["a", "c"])
        #expect(Set(told.deletedRecordIDs.map(\.name)) == ["b", "d"] && !told.moreComing)
        // Paged: the first page (a, c) holds no deletion; "c" deleted while paging is reported after.
        let first = try database.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 2)
        #expect(first.changedRecords.map(\.id.name) == ["a", "c"] && first.moreComing)
        #expect(first.deletedRecordIDs.isEmpty, "b and d do not fit in the first page, and later pages skip them")
        _ = try database.modifyRecords(
            saving: [], deleting: [RecordDeletion(recordID("c"), policy: .force)], atomically: false)
        let second = try database.fetchZoneChanges(in: .notes, since: first.token, resultsLimit: 2)
        #expect(second.deletedRecordIDs.map(\.name) == ["c"] && !second.moreComing)
        let after = try database.fetchZoneChanges(in: .notes, since: told.token, resultsLimit: 10)
        #expect(after.changedRecords.isEmpty && after.deletedRecordIDs.map(\.name) == ["c"], "net, from a token")
    }

    @Test func theDatabaseRoundTripsThroughAPropertyList() throws {
        let database = try busyDatabase()
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        let decoded = try PropertyListDecoder().decode(CloudDatabase.self, from: encoder.encode(database))
        #expect(decoded == database)

        // And it behaves the same afterwards: the same next tag, the same token bytes.
        var original = database
        var copy = decoded
        #expect(
            try original.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 1)
                == copy.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 1))
        let save = [RecordSave(makeRecord("z"))]
        #expect(
            try original.modifyRecords(saving: save, deleting: [], atomically: true)
                == copy.modifyRecords(saving: save, deleting: [], atomically: true))
    }

    /// The packed records keep every field value exactly, whatever its size or sign.
    @Test func recordFieldsRoundTripExactlyAtTheirExtremes() throws {
        var database = CloudDatabase(serverID: .max)
        try database.createZones([.notes])
        let fields: [String: FieldValue] = [
            "min": .int(.min), "max": .int(.max), "zero": .int(0), "minusOne": .int(-1),
            "empty": .string(""), "long": .string(String(repeating: "é🙂", count: 500)),
            "past": .date(.distantPast), "future": .date(.distantFuture),
            "fraction": .date(Date(timeIntervalSinceReferenceDate: -0.1)),
            "infinite": .date(Date(timeIntervalSinceReferenceDate: .infinity)),
        ]
        _ = try database.modifyRecords(saving: [RecordSave(makeRecord("a", fields))], deleting: [], atomically: true)
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        let decoded = try PropertyListDecoder().decode(CloudDatabase.self, from: encoder.encode(database))
        #expect(decoded == database)
        // Dates as CloudKit keeps them, to the millisecond (documented); the packing keeps them exactly.
        #expect(decoded.records(in: .notes).map(\.fields) == [fields.mapValues(\.roundedToMilliseconds)])
    }

    @Test func faultPlansRoundTripThroughAPropertyList() throws {
        let plan = FaultPlan.failNext(2, .modifyRecords, with: .zoneBusy, retryAfter: .milliseconds(1_500))
            .then(.loseResponses(1, nil))
            .then(
                .random(
                    rate: 0.25, seed: .max,
                    effects: [
                        .responseLost, .error(.networkFailure),
                        .recordError(.requestRateLimited, retryAfter: .seconds(2)),
                    ],
                    kinds: [.fetchZoneChanges]))
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        #expect(try PropertyListDecoder().decode(FaultPlan.self, from: encoder.encode(plan)) == plan)
    }

    /// Targets survive JSON, as `HTTPCloudAdministration` sends plans and a `DirectoryCloud` may be shared
    /// with a build that writes them; a plan persisted before targets existed still decodes, with none.
    @Test func targetedFaultPlansRoundTripThroughJSONAndOldPlansDecode() throws {
        let plan = FaultPlan.failRecord(named: "task-7", in: .notes, with: .invalidArguments, retryAfter: .seconds(2))
            .then(.failRecord(named: "task-8", with: .quotaExceeded, times: 3))
            .then(
                FaultPlan(scripted: [
                    ScriptedFault(kind: nil, count: 1, effect: .responseLost, target: FaultTarget(recordName: "x"))
                ])
            )
            .then(.failRecords(1, with: .zoneBusy))
        let decoded = try JSONDecoder().decode(FaultPlan.self, from: JSONEncoder().encode(plan))
        #expect(decoded == plan)
        #expect(
            decoded.scripted.map(\.target) == [
                FaultTarget(recordName: "task-7", zone: .notes), FaultTarget(recordName: "task-8"),
                FaultTarget(recordName: "x"), nil,
            ])

        let old =
            #"{"scripted":[{"kind":"modifyRecords","count":1,"effect":{"code":"invalidArguments","oneRecord":true}}]}"#
        #expect(
            try JSONDecoder().decode(FaultPlan.self, from: Data(old.utf8)) == .failRecords(1, with: .invalidArguments))
    }

    /// A fault with requests to let through first serves that many of its kind untouched (not counted, no
    /// random draw), then fails the next; other kinds pass it by. It survives JSON, and older plans decode
    /// without it.
    @Test func aFaultAfterPassingRequestsLetsThemThroughFirst() throws {
        var database = CloudDatabase()
        try database.createZones([.notes])
        let plan = FaultPlan.failNext(1, .fetchZoneChanges, with: .zoneBusy, after: 2)
        #expect(try JSONDecoder().decode(FaultPlan.self, from: JSONEncoder().encode(plan)) == plan)
        database.setFaultPlan(plan)
        func fetch(_ database: inout CloudDatabase) -> CloudError? {
            do {
                _ = try database.perform(.fetchZoneChanges) { (database) throws(CloudError) in
                    try database.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
                }
                return nil
            } catch {
                return error
            }
        }
        _ = try database.perform(.fetchDatabaseChanges) { (database) throws(CloudError) in
            try database.fetchDatabaseChanges(since: nil)
        }
        #expect(fetch(&database) == nil)
        #expect(fetch(&database) == nil)
        #expect(database.counters.faultsInjected.isEmpty)
        #expect(fetch(&database)?.code == .zoneBusy)
        #expect(fetch(&database) == nil)
        #expect(database.faultPlan.isEmpty)
        #expect(database.counters.faultsInjected == ["zoneBusy": 1])
    }

    /// A record fault fails the first record of the next modify request, inside a success: the others
    /// are applied (none when atomic), a record whose `validate` reference points at the failed one is
    /// refused as the server lacks its target, and requests of other kinds are served untouched and not
    /// counted.
    @Test func aRecordFaultFailsTheFirstRecordAndAppliesTheRest() throws {
        var database = CloudDatabase()
        try database.createZones([.notes])
        let fault = FaultEffect.recordError(.internalError, retryAfter: .seconds(3))
        database.setFaultPlan(FaultPlan(scripted: [ScriptedFault(kind: nil, count: 3, effect: fault)]))
        _ = try database.perform(.fetchZoneChanges) { (database) throws(CloudError) in
            try database.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
        }
        #expect(database.counters.faultsInjected.isEmpty, "a fetch has no record to fail")

        let parent = makeRecord("parent")
        let child = makeRecord(
            "child", ["owner": .reference(RecordReference(recordName: "parent", action: .validate))])
        let result = try database.perform(.modifyRecords) { (database) throws(CloudError) in
            try database.modifyRecords(
                saving: [RecordSave(parent), RecordSave(child), RecordSave(makeRecord("other"))], deleting: [],
                atomically: false)
        }
        #expect(result.failed[recordID("parent")]?.code == .internalError)
        #expect(result.failed[recordID("parent")]?.retryAfter == .seconds(3))
        #expect(result.failed[recordID("child")]?.serverErrorCode == "VALIDATING_REFERENCE_ERROR", "no parent")
        #expect(Set(result.saved.keys) == [recordID("other")])
        #expect(database.records(in: .notes).map(\.id.name) == ["other"])
        #expect(database.counters.faultsInjected == [fault.counterKey: 1])

        let atomic = try database.perform(.modifyRecords) { (database) throws(CloudError) in
            try database.modifyRecords(
                saving: [RecordSave(makeRecord("x")), RecordSave(makeRecord("y"))], deleting: [], atomically: true)
        }
        #expect(atomic.failed[recordID("x")]?.code == .internalError)
        #expect(atomic.failed[recordID("y")]?.code == .batchRequestFailed)
        #expect(atomic.saved.isEmpty && database.records(in: .notes).count == 1)
        #expect(database.faultPlan.isEmpty)
    }

    @Test func theGeneratorIsSplitMix64() {
        // The published SplitMix64 sequence for seed 1234567.
        var generator = SeededRandomNumberGenerator(seed: 1_234_567)
        let expected: [UInt64] = [
            6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423,
            4_593_380_528_125_082_431, 16_408_922_859_458_223_821,
        ]
        #expect((0..<5).map { _ in generator.next() } == expected)

        var unit = SeededRandomNumberGenerator(seed: 9)
        for _ in 0..<1_000 {
            let value = unit.nextUnitInterval()
            #expect(value >= 0 && value < 1)
            #expect((0..<3).contains(unit.nextIndex(below: 3)))
        }
    }

    @Test func tokensFromAnotherServerIDAreRefused() throws {
        var first = CloudDatabase(serverID: 1)
        var second = CloudDatabase(serverID: 2)
        try first.createZones([.notes])
        try second.createZones([.notes])
        let token = try first.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 1).token
        #expect(throws: CloudError.self) { try second.fetchZoneChanges(in: .notes, since: token, resultsLimit: 1) }
        do {
            _ = try second.fetchZoneChanges(in: .notes, since: token, resultsLimit: 1)
        } catch {
            #expect(error.code == .changeTokenExpired)
            #expect(error.message.contains("another server"))
        }
    }

    @Test func compactionForgetsOldTombstonesButKeepsTheRecords() throws {
        var database = CloudDatabase(changeHistoryLimit: 2, serverID: 5)
        try database.createZones([.notes])
        _ = try database.modifyRecords(
            saving: (0..<10).map { RecordSave(makeRecord("r\($0)")) }, deleting: [], atomically: true)
        _ = try database.modifyRecords(
            saving: [], deleting: (0..<5).map { RecordDeletion(recordID("r\($0)"), policy: .force) }, atomically: true)
        let token = try database.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 100).token
        _ = try database.modifyRecords(
            saving: (0..<2).map { RecordSave(makeRecord("s\($0)")) }, deleting: [], atomically: true)
        #expect(database.records(in: .notes).count == 7)
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        var restored = try PropertyListDecoder().decode(CloudDatabase.self, from: encoder.encode(database))
        let changes = try restored.fetchZoneChanges(in: .notes, since: token, resultsLimit: 100)
        #expect(Set(changes.changedRecords.map(\.id.name)) == ["s0", "s1"])
    }
}

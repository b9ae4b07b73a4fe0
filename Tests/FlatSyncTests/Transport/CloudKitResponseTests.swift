import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

// What the CKWS transport reads: responses written from Apple's documented response keys (records with
// `recordChangeTag`, `created`/`modified`, typed fields; `syncToken`/`moreComing`; per-item errors with
// `serverErrorCode`) and from shapes other clients observed live (tombstones with only `recordName` and
// `deleted`, per-record errors inside a 200, `_defaultZone` in zone lists). One key is our emulator's own,
// which CloudKit may never send: `purged` on a deleted zone, in the database-changes test.

@Suite("CKWS transport: responses")
struct CloudKitResponseTests {
    static let zone = ZoneID("Notes")
    static func id(_ name: String) -> RecordID { RecordID(zone: zone, name: name) }

    @Test func aRecordsFieldsTagAndWriterAreRead() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"""
                {"zones":[{"zoneID":{"zoneName":"Notes","ownerRecordName":"_abc","zoneType":"REGULAR_CUSTOM_ZONE"},
                  "moreComing":true,"syncToken":"AQAA+/=",
                  "records":[
                    {"recordName":"a","recordType":"Note","recordChangeTag":"k3j4",
                     "fields":{
                       "s":{"value":"héllo","type":"STRING"},
                       "i":{"value":-9223372036854775808,"type":"INT64"},
                       "n":{"value":"9007199254740993","type":"INT64"},
                       "d":{"value":2.5,"type":"DOUBLE"},
                       "t":{"value":1700000000123,"type":"TIMESTAMP"},
                       "tf":{"value":1700000000123.0,"type":"TIMESTAMP"},
                       "b":{"value":"AAEC/w==","type":"BYTES"},
                       "sl":{"value":["x","y"],"type":"STRING_LIST"},
                       "el":{"value":[],"type":"INT64_LIST"},
                       "untyped":{"value":"Chen"},
                       "untypedNumber":{"value":42},
                       "ref":{"value":{"recordName":"b","action":"NONE"},"type":"REFERENCE"},
                       "loc":{"value":{"latitude":1,"longitude":2},"type":"LOCATION"},
                       "fsLastModifiedBy":{"value":"device-A","type":"STRING"}},
                     "created":{"timestamp":1700000000000,"userRecordName":"_abc","deviceID":"cloud-device"},
                     "modified":{"timestamp":1700000000123,"userRecordName":"_abc","deviceID":"cloud-device"},
                     "deleted":false},
                    {"recordName":"gone","deleted":true}
                  ]}]}
                """#)
        ])
        let page = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 10)
        let when = Date(timeIntervalSince1970: 1_700_000_000.123)
        #expect(page.moreComing)
        #expect(page.token == ChangeToken(data: Data("AQAA+/=".utf8)))
        #expect(page.deletedRecordIDs == [Self.id("gone")])
        let record = try #require(page.changedRecords.first)
        #expect(page.changedRecords.count == 1)
        #expect(record.id == Self.id("a"))
        #expect(record.type == "Note")
        #expect(record.changeTag == ChangeTag("k3j4"))
        #expect(record.lastModifiedBy == "device-A", "the reserved field's, not modified.deviceID's")
        #expect(
            record.fields == [
                "s": .string("héllo"), "i": .int(.min), "n": .int(9_007_199_254_740_993), "d": .double(2.5),
                "t": .date(when), "tf": .date(when), "b": .bytes(Data([0, 1, 2, 255])),
                "sl": .list([.string("x"), .string("y")]), "el": .list([]), "untyped": .string("Chen"),
                "untypedNumber": .int(42), "ref": .reference(RecordReference(recordName: "b", action: .none)),
                "loc": .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":1,"longitude":2}"#)),
            ], "a REFERENCE is read, a LOCATION kept as sent; an untyped string is never BYTES")
        #expect(when.roundedToMilliseconds == when, "a date stamped by a store comes back equal")
    }

    /// `modified.deviceID` is the server's name for a device, never a FlatSync device ID (ckws-client.md: who
    /// sets it for a web client is not known): a version without the reserved field has no writer.
    @Test func withoutTheReservedFieldAVersionHasNoWriter() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"records":[{"recordName":"a","recordType":"Note","recordChangeTag":"1","fields":{},"modified":{"deviceID":"B"}}]}"#
            )
        ])
        let found = try await makeTransport(exchange).lookupRecords([Self.id("a")])
        let record = try #require(found[Self.id("a")])
        #expect(record.lastModifiedBy == nil)
    }

    /// Whether CloudKit sends `isEncrypted` back with an encrypted field, and under which type name, is not
    /// documented (MistKit #392): the value reads as its plain type, with the flag or without, and under the
    /// schema's `ENCRYPTED_` name too.
    @Test func anEncryptedFieldReadsAsItsPlainValue() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"""
                {"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t","records":[
                  {"recordName":"a","recordType":"Note","recordChangeTag":"k",
                   "fields":{"secret":{"value":"x","type":"STRING","isEncrypted":true},
                             "codes":{"value":[1,2],"type":"INT64_LIST","isEncrypted":true},
                             "plain":{"value":"y","type":"STRING"},
                             "named":{"value":"z","type":"ENCRYPTED_STRING"},
                             "listed":{"value":[3],"type":"ENCRYPTED_INT64_LIST"}}}]}]}
                """#)
        ])
        let page = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 10)
        let fields = try #require(page.changedRecords.first?.fields)
        #expect(
            fields == [
                "secret": .string("x"), "codes": .list([.int(1), .int(2)]), "plain": .string("y"),
                "named": .string("z"), "listed": .list([.int(3)]),
            ])
    }

    /// An entry of a changes page that names a record but is an error, or has no type, is documented by
    /// neither Apple nor a live capture. Failing the page for it would stop the zone's fetches for good: the
    /// transport looks such records up, takes the version found, and reads one not found as deleted.
    @Test func aChangesEntryThatIsAnErrorOrHasNoTypeIsLookedUp() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"""
                {"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t2","moreComing":false,"records":[
                  {"recordName":"plain","recordType":"Note","recordChangeTag":"1","fields":{}},
                  {"recordName":"typeless","recordChangeTag":"2"},
                  {"recordName":"failed","serverErrorCode":"INTERNAL_ERROR","reason":"try later"}]}]}
                """#),
            .json(
                #"""
                {"records":[
                  {"recordName":"typeless","recordType":"Note","recordChangeTag":"3","fields":{"s":{"value":"x","type":"STRING"}}},
                  {"recordName":"failed","serverErrorCode":"NOT_FOUND","reason":"gone"}]}
                """#),
        ])
        let page = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 10)
        #expect(page.changedRecords.map(\.id) == [Self.id("plain"), Self.id("typeless")])
        #expect(page.changedRecords.last?.fields == ["s": .string("x")])
        #expect(page.changedRecords.last?.changeTag == ChangeTag("3"))
        #expect(page.deletedRecordIDs == [Self.id("failed")])
        #expect(page.token == ChangeToken(data: Data("t2".utf8)))
        let lookup = try #require(exchange.requests.last)
        #expect(lookup.operation == "records/lookup")
        let names = ((lookup.jsonBody as? [String: Any])?["records"] as? [[String: Any]])?.compactMap {
            $0["recordName"] as? String
        }
        #expect(Set(names ?? []) == ["typeless", "failed"])
    }

    /// A record the lookup cannot give either fails the page, as before: nothing is taken as deleted that
    /// the server may still hold, and the fetch is tried again later.
    @Test func aChangesEntryTheLookupCannotReadFailsThePage() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t2","records":[{"recordName":"failed","serverErrorCode":"INTERNAL_ERROR"}]}]}"#
            ),
            .json(#"{"records":[{"recordName":"failed","serverErrorCode":"INTERNAL_ERROR","reason":"still"}]}"#),
        ])
        let error = await #expect(throws: CloudError.self) {
            _ = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 10)
        }
        #expect(error?.code == .internalError)
        #expect(exchange.requests.map(\.operation) == ["changes/zone", "records/lookup"])
    }

    @Test func aMissingMoreComingIsFalse() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"zones":[{"zoneID":{"zoneName":"Notes"},"records":[],"syncToken":"t","moreComing":null}]}"#)
        ])
        let page = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 10)
        #expect(!page.moreComing)
    }

    // Apple's pages show `zones` in every answer of `changes/database` but do not say that an empty list is
    // sent rather than left out; other clients read a missing one as empty (ckws audit, 2026-11-28).
    @Test func aDatabaseChangesPageWithATokenAndNoZonesKeyChangedNoZone() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"syncToken":"db-2","moreComing":false}"#),
            .json(#"{"moreComing":false}"#),
            .json(#"{}"#),
        ])
        let transport = makeTransport(exchange)
        let changes = try await transport.fetchDatabaseChanges(since: ChangeToken(data: Data("db-1".utf8)))
        #expect(changes.changedZones.isEmpty && changes.deletedZones.isEmpty)
        #expect(changes.token == ChangeToken(data: Data("db-2".utf8)))
        for _ in 0..<2 {
            let error = await #expect(throws: CloudError.self) {
                _ = try await transport.fetchDatabaseChanges(since: nil)
            }
            #expect(error?.code == .unexpectedServerResponse, "without a token it is not a page of changes")
        }
    }

    /// Asked from no token, `changes/database` lists every zone there is (the engine takes a zone it does not
    /// name as deleted, and wipes it): an answer without `zones` is unreadable, as a zone listing's is, not a
    /// database without zones (its `_defaultZone` is always there).
    @Test func aDatabaseListingFromNoTokenWithoutItsZonesKeyIsUnreadableNotEmpty() async throws {
        let exchange = ScriptedExchange([.json(#"{"syncToken":"db-1","moreComing":false}"#)])
        let error = await #expect(throws: CloudError.self) {
            _ = try await makeTransport(exchange).fetchDatabaseChanges(since: nil)
        }
        #expect(error?.code == .unexpectedServerResponse)
    }

    @Test func aZoneListingWithoutItsZonesKeyIsUnreadableNotEmpty() async throws {
        // Read as empty, it would say that every zone is gone.
        let exchange = ScriptedExchange([.json(#"{}"#), .json(#"{"syncToken":"x"}"#)])
        let transport = makeTransport(exchange)
        for _ in 0..<2 {
            let error = await #expect(throws: CloudError.self) { _ = try await transport.listZones() }
            #expect(error?.code == .unexpectedServerResponse)
        }
    }

    @Test func databaseChangesNameChangedAndDeletedZonesButNotTheDefaultZone() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"""
                {"syncToken":"db-9","moreComing":true,"zones":[
                  {"zoneID":{"zoneName":"_defaultZone"}},
                  {"zoneID":{"zoneName":"ReadingList","zoneType":"REGULAR_CUSTOM_ZONE"},"syncToken":"x"},
                  {"zoneID":{"zoneName":"Old"},"deleted":true},
                  {"zoneID":{"zoneName":"ReadingHistory"},"deleted":true,"purged":true},
                  {"zoneID":{"zoneName":"ReadingHistory"}}
                ]}
                """#)
        ])
        let changes = try await makeTransport(exchange).fetchDatabaseChanges(since: nil)
        #expect(changes.changedZones == [.readingList, .readingHistory])
        #expect(
            changes.deletedZones == [
                ZoneDeletion(zone: ZoneID("Old"), reason: .unknown),
                ZoneDeletion(zone: .readingHistory, reason: .deletedByUser),
            ])
        #expect(changes.token == ChangeToken(data: Data("db-9".utf8)))
        #expect(changes.moreComing)
    }

    @Test func zoneListsLeaveOutTheDefaultZoneAndDeletedZones() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"zones":[{"zoneID":{"zoneName":"_defaultZone"},"atomic":false},{"zoneID":{"zoneName":"B"},"atomic":true},{"zoneID":{"zoneName":"A"}},{"zoneID":{"zoneName":"C"},"deleted":true}]}"#
            )
        ])
        #expect(try await makeTransport(exchange).listZones() == [ZoneID("A"), ZoneID("B")])
    }

    /// A zone-error entry (`{zoneID, serverErrorCode, …}`, documented in both lists) is that zone's: the
    /// other zones still come. A missing zone is left out of the list (to be created); a zone with another
    /// error counts as existing (creating it would count as done, and queue its data again), so that using
    /// it meets the error. A changes answer names it changed, so that its own fetch meets the error. An
    /// error without a zone still fails the whole answer.
    @Test func aZonesOwnErrorFailsThatZoneAndNotTheList() async throws {
        let missing = #"{"zoneID":{"zoneName":"Notes"},"serverErrorCode":"ZONE_NOT_FOUND","reason":"gone"}"#
        let busy = #"{"zoneID":{"zoneName":"Busy"},"serverErrorCode":"THROTTLED","retryAfter":3}"#
        let exchange = ScriptedExchange([
            .json(#"{"zones":[{"zoneID":{"zoneName":"A"}},"# + missing + "," + busy + "]}"),
            .json(#"{"syncToken":"db-2","zones":[{"zoneID":{"zoneName":"A"}},"# + missing + "]}"),
            .json(#"{"zones":[{"serverErrorCode":"INTERNAL_ERROR"}]}"#),
        ])
        let transport = makeTransport(exchange)
        #expect(try await transport.listZones() == [ZoneID("A"), ZoneID("Busy")])
        let changes = try await transport.fetchDatabaseChanges(since: nil)
        #expect(changes.changedZones == [ZoneID("A"), ZoneID("Notes")])
        #expect(changes.deletedZones.isEmpty)
        await #expect(throws: CloudError.self) { _ = try await transport.listZones() }
    }

    /// `zones/modify` answers a zone's failure as that zone's entry inside a 200 (ckws.md §3, MistKit PR
    /// #443). Creating a zone that exists and deleting one that is gone count as done (the codes are the
    /// likely ones, not documented for this); any other zone's error fails the call with its code and wait.
    @Test func aZoneModifyFailsForAZonesOwnErrorUnlessItIsAlreadyDone() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"zones":[{"zoneID":{"zoneName":"A"},"serverErrorCode":"EXISTS","reason":"exists"},"#
                    + #"{"zoneID":{"zoneName":"B"},"atomic":true}]}"#),
            .json(#"{"zones":[{"zoneID":{"zoneName":"A"},"serverErrorCode":"ZONE_NOT_FOUND","reason":"gone"}]}"#),
            .json(
                #"{"zones":[{"zoneID":{"zoneName":"A"},"atomic":true},"#
                    + #"{"zoneID":{"zoneName":"B"},"serverErrorCode":"QUOTA_EXCEEDED","reason":"full"}]}"#),
            .json(
                #"{"zones":[{"zoneID":{"zoneName":"A"},"serverErrorCode":"THROTTLED","reason":"slow","retryAfter":7}]}"#
            ),
        ])
        let transport = makeTransport(exchange)
        try await transport.createZones([ZoneID("A"), ZoneID("B")])
        try await transport.deleteZones([ZoneID("A")])
        let full = await #expect(throws: CloudError.self) {
            try await transport.createZones([ZoneID("A"), ZoneID("B")])
        }
        #expect(full?.code == .quotaExceeded)
        let throttled = await #expect(throws: CloudError.self) { try await transport.createZones([ZoneID("A")]) }
        #expect(throttled?.code == .requestRateLimited)
        #expect(throttled?.retryAfter == .seconds(7))
    }

    // MARK: - records/modify results

    @Test func aModifyReportsEachRecordAndLooksUpTheConflictedOnes() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"""
                {"records":[
                  {"recordName":"saved","recordType":"Note","recordChangeTag":"t2","fields":{"v":{"value":1,"type":"INT64"}}},
                  {"recordName":"conflict","serverErrorCode":"CONFLICT","reason":"record to insert already exists"},
                  {"recordName":"invalid","serverErrorCode":"BAD_REQUEST","reason":"Invalid value, expected type TIMESTAMP."},
                  {"recordName":"busy","serverErrorCode":"THROTTLED","retryAfter":3},
                  {"recordName":"deleted","deleted":true},
                  {"recordName":"alreadyGone","serverErrorCode":"NOT_FOUND"},
                  {"recordName":"updatedGone","serverErrorCode":"NOT_FOUND"},
                  {"recordName":"deleteConflict","serverErrorCode":"CONFLICT"}
                ]}
                """#),
            .json(
                #"{"records":[{"recordName":"conflict","recordType":"Note","recordChangeTag":"t9","fields":{"v":{"value":9,"type":"INT64"}}},{"recordName":"deleteConflict","serverErrorCode":"NOT_FOUND"}]}"#
            ),
        ])
        let note = { (name: String) in RecordSave(Record(id: Self.id(name), type: "Note")) }
        let result = try await makeTransport(exchange).modifyRecords(
            saving: [
                note("saved"), note("conflict"), note("invalid"), note("busy"),
                RecordSave(Record(id: Self.id("updatedGone"), type: "Note", changeTag: ChangeTag("t1"))),
            ],
            deleting: [
                RecordDeletion(Self.id("deleted"), policy: .force),
                RecordDeletion(Self.id("alreadyGone"), policy: .force),
                RecordDeletion(Self.id("deleteConflict"), changeTag: ChangeTag("old")),
            ],
            atomically: false)

        #expect(result.saved[Self.id("saved")]?.fields == ["v": .int(1)])
        #expect(result.saved[Self.id("saved")]?.changeTag == ChangeTag("t2"))
        let conflict = try #require(result.failed[Self.id("conflict")])
        #expect(conflict.code == .serverRecordChanged)
        #expect(conflict.serverRecord?.changeTag == ChangeTag("t9"), "the server's record, looked up")
        #expect(conflict.serverRecord?.fields == ["v": .int(9)])
        #expect(result.failed[Self.id("invalid")]?.code == .invalidArguments)
        #expect(result.failed[Self.id("invalid")]?.serverErrorCode == "BAD_REQUEST")
        #expect(result.failed[Self.id("busy")]?.code == .requestRateLimited)
        #expect(result.failed[Self.id("busy")]?.retryAfter == .seconds(3))
        #expect(result.failed[Self.id("updatedGone")]?.code == .unknownItem)
        #expect(
            result.deleted == [Self.id("deleted"), Self.id("alreadyGone"), Self.id("deleteConflict")],
            "a delete that finds nothing, or whose conflict has gone since, is done")
        #expect(result.failed.count == 4)

        #expect(exchange.requests.map(\.operation) == ["records/modify", "records/lookup"])
        #expect(
            exchange.requests[1].jsonBody
                == json(
                    #"{"zoneID":{"zoneName":"Notes"},"records":[{"recordName":"conflict"},{"recordName":"deleteConflict"}]}"#
                ),
            "one lookup for every conflict of the request")
    }

    @Test func aFailedLookupLeavesTheConflictsWithItsErrorAndKeepsWhatWentThrough() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"records":[{"recordName":"a","recordType":"Note","recordChangeTag":"1","fields":{}},{"recordName":"b","serverErrorCode":"CONFLICT"}]}"#
            ),
            .json(#"{"serverErrorCode":"TRY_AGAIN_LATER","reason":"later","retryAfter":2}"#, status: 503),
        ])
        let result = try await makeTransport(exchange).modifyRecords(
            saving: [
                RecordSave(Record(id: Self.id("a"), type: "Note")), RecordSave(Record(id: Self.id("b"), type: "Note")),
            ],
            deleting: [], atomically: false)
        #expect(result.saved.keys.map(\.name) == ["a"])
        #expect(result.failed[Self.id("b")]?.code == .serviceUnavailable)
        #expect(result.failed[Self.id("b")]?.retryAfter == .seconds(2))
    }

    @Test func anAtomicFailureReportsTheCulpritAndTheBatchFailureOfTheOthers() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"records":[{"recordName":"a","serverErrorCode":"ATOMIC_ERROR"},{"recordName":"b","serverErrorCode":"CONFLICT"}]}"#
            ),
            .json(#"{"records":[{"recordName":"b","recordType":"Note","recordChangeTag":"5","fields":{}}]}"#),
        ])
        let result = try await makeTransport(exchange).modifyRecords(
            saving: [
                RecordSave(Record(id: Self.id("a"), type: "Note")), RecordSave(Record(id: Self.id("b"), type: "Note")),
            ],
            deleting: [], atomically: true)
        #expect(result.failed[Self.id("a")]?.code == .batchRequestFailed)
        #expect(result.failed[Self.id("b")]?.code == .serverRecordChanged)
        #expect(result.saved.isEmpty)
    }

    @Test func aTaglessDeleteIfUnchangedLooksTheRecordUpInsteadOfSendingADeleteCKWSCannotExpress() async throws {
        let exchange = ScriptedExchange([
            .json(
                #"{"records":[{"recordName":"present","recordType":"Note","recordChangeTag":"4","fields":{}},{"recordName":"absent","serverErrorCode":"NOT_FOUND"}]}"#
            )
        ])
        let result = try await makeTransport(exchange).modifyRecords(
            saving: [], deleting: [RecordDeletion(Self.id("present")), RecordDeletion(Self.id("absent"))],
            atomically: false)
        #expect(result.failed[Self.id("present")]?.code == .serverRecordChanged)
        #expect(result.failed[Self.id("present")]?.serverRecord?.changeTag == ChangeTag("4"))
        #expect(result.deleted == [Self.id("absent")])
        #expect(exchange.requests.map(\.operation) == ["records/lookup"], "no modify was needed")
    }

    @Test func aWholeZoneMissingFailsItsRecordsOneByOne() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"serverErrorCode":"ZONE_NOT_FOUND","reason":"Zone 'Notes' does not exist"}"#, status: 404)
        ])
        let result = try await makeTransport(exchange).modifyRecords(
            saving: [RecordSave(Record(id: Self.id("a"), type: "Note"))],
            deleting: [RecordDeletion(Self.id("b"), policy: .force)], atomically: false)
        #expect(result.failed[Self.id("a")]?.code == .zoneNotFound)
        #expect(result.failed[Self.id("b")]?.code == .zoneNotFound)
    }

    // MARK: - Answers that cannot be read

    enum Unreadable: String, CaseIterable, CustomTestStringConvertible {
        case html, truncatedJSON, empty, missingRecords, recordWithoutName
        var testDescription: String { rawValue }
        var body: String {
            switch self {
            case .html: return "<html><body>Bad Gateway</body></html>"
            case .truncatedJSON: return #"{"records":[{"recordName":"a","recordType":"No"#
            case .empty: return ""
            case .missingRecords: return #"{"result":"ok"}"#
            case .recordWithoutName:
                // One without a type is looked up (`aChangesEntryThatIsAnErrorOrHasNoTypeIsLookedUp`); one
                // without a name cannot be.
                return
                    #"{"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t","records":[{"recordType":"N","fields":{}}]}]}"#
            }
        }
    }

    @Test(arguments: Unreadable.allCases)
    func a200ThatCannotBeReadIsAnUnexpectedServerResponse(_ unreadable: Unreadable) async throws {
        let exchange = ScriptedExchange([
            HTTPExchangeResponse(status: 200, headers: [:], body: Data(unreadable.body.utf8))
        ])
        let error = await #expect(throws: CloudError.self) {
            _ = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 5)
        }
        #expect(error?.code == .unexpectedServerResponse)
        #expect(error?.isTransient == true, "nothing is dropped for an answer nobody can read")
    }

    /// Whether a page holds only net changes is not documented: a name listed twice counts as its last
    /// listing says, whether that is a version or a deletion, and the rest keep the page's order.
    @Test func aNameListedTwiceInAPageCountsByItsLastListing() async throws {
        let record = { (name: String) in #"{"recordName":"\#(name)","recordType":"N","fields":{}}"# }
        let tombstone = { (name: String) in #"{"recordName":"\#(name)","deleted":true}"# }
        let entries = [record("a"), tombstone("a"), tombstone("b"), record("b"), record("c"), tombstone("d")]
        let exchange = ScriptedExchange([
            .json(
                #"{"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t","records":["#
                    + entries.joined(separator: ",") + "]}]}")
        ])
        let page = try await makeTransport(exchange).fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 10)
        #expect(page.changedRecords.map(\.id.name) == ["b", "c"])
        #expect(page.deletedRecordIDs.map(\.name) == ["a", "d"])
    }

    /// A value its type does not allow is kept opaque, as it came, and the rest of the page is read: one
    /// odd field another client wrote must not make every page of the zone unreadable for good. A save sends
    /// it back as it came.
    @Test func aFieldItsTypeDoesNotAllowIsKeptAsItCameAndThePageIsRead() async throws {
        let odd =
            #"{"recordName":"a","recordType":"N","fields":{"t":{"type":"TIMESTAMP","value":"soon"},"#
            + #""b":{"type":"BYTES","value":"%%%"},"r":{"type":"REFERENCE","value":{"recordName":"x","action":"LATER"}},"#
            + #""ok":{"type":"STRING","value":"fine"}}}"#
        let good = #"{"recordName":"b","recordType":"N","fields":{"s":{"type":"STRING","value":"hi"}}}"#
        let exchange = ScriptedExchange([
            .json(#"{"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t","records":["# + odd + "," + good + "]}]}"),
            .json(#"{"records":[{"recordName":"a","recordType":"N","recordChangeTag":"2"}]}"#),
        ])
        let transport = makeTransport(exchange, schema: nil)
        let page = try await transport.fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 5)
        #expect(page.changedRecords.map(\.id.name).sorted() == ["a", "b"])
        let a = try #require(page.changedRecords.first { $0.id.name == "a" })
        #expect(a["t"] == .opaque(OpaqueFieldValue(type: "TIMESTAMP", json: #""soon""#)))
        #expect(a["b"] == .opaque(OpaqueFieldValue(type: "BYTES", json: #""%%%""#)))
        #expect(a["r"] == .opaque(OpaqueFieldValue(type: "REFERENCE", json: #"{"recordName":"x","action":"LATER"}"#)))
        #expect(a["ok"] == .string("fine"))

        _ = try await transport.modifyRecords(
            saving: [RecordSave(a, policy: .allKeys)], deleting: [], atomically: false)
        let sent = try #require(exchange.requests.last?.jsonBody as? [String: Any])
        let operation = try #require((sent["operations"] as? [[String: Any]])?.first)
        let fields = try #require((operation["record"] as? [String: Any])?["fields"] as? [String: [String: Any]])
        #expect(fields["t"]?["type"] as? String == "TIMESTAMP" && fields["t"]?["value"] as? String == "soon")
        #expect(fields["b"]?["value"] as? String == "%%%")
        #expect((fields["r"]?["value"] as? [String: Any])?["action"] as? String == "LATER")
    }

    // MARK: - Reading as a tree of the body would

    /// Bodies that read as one would read a parsed tree of them: a key given twice means its last value even
    /// when the first could not be used, a value of the wrong kind is as good as missing, an error body is
    /// the error whatever else the body holds.
    @Test func aKeyGivenTwiceMeansItsLastValueEvenWhenTheFirstCouldNotBeUsed() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"zones":5,"zones":[{"zoneID":{},"zoneID":{"zoneName":"A"}},{"zoneID":{"zoneName":"B"}}]}"#),
            .json(
                #"""
                {"zones":[{"zoneID":{"zoneName":"Notes"},"syncToken":"t","moreComing":"yes","records":5,
                "records":[{"recordName":"a","recordType":7,"recordType":"Note",
                "fields":{"n":{"type":"INT64","value":"x"}},"fields":{"n":{"value":2,"type":"INT64"},"s":{"value":null}},
                "modified":{"deviceID":"old"},"modified":{"userRecordName":"u"}}]}]}
                """#),
        ])
        let transport = makeTransport(exchange)
        #expect(try await transport.listZones() == [ZoneID("A"), ZoneID("B")])
        let changes = try await transport.fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 5)
        let record = try #require(changes.changedRecords.first)
        #expect(record.type == "Note")
        #expect(record.fields == ["n": .int(2)], "the last fields object; a null value is no field")
        #expect(record.lastModifiedBy == nil, "the last modified object, which names no device")
        #expect(!changes.moreComing, "a moreComing that is no boolean is as good as missing")
    }

    @Test func anEmptyZoneNameIsAZoneNameButAMissingOneIsAProblem() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"zones":[{"zoneID":{"zoneName":""}},{"zoneID":{"zoneName":"A"}}]}"#),
            .json(#"{"zones":[{"zoneID":{"zoneName":5}}]}"#),
        ])
        let transport = makeTransport(exchange)
        // The empty name is read; the list leaves it out as it leaves out what it cannot use.
        #expect(try await transport.listZones().contains(ZoneID("A")))
        let error = await #expect(throws: CloudError.self) { _ = try await transport.listZones() }
        #expect(error?.code == .unexpectedServerResponse)
        #expect(error?.message.contains("zoneName") == true)
    }

    @Test(arguments: [
        #"{"serverErrorCode":"TRY_AGAIN_LATER","zones":5}"#, #"{"zones":[7],"serverErrorCode":"TRY_AGAIN_LATER"}"#,
        #"{"zones":[{"zoneID":{}}],"serverErrorCode":"TRY_AGAIN_LATER","retryAfter":3}"#,
    ])
    func anErrorBodyIsTheErrorWhateverElseTheBodyHolds(_ body: String) async throws {
        let exchange = ScriptedExchange([.json(body)])
        let error = await #expect(throws: CloudError.self) { _ = try await makeTransport(exchange).listZones() }
        #expect(error?.code == .serviceUnavailable)
    }

    @Test func aBodyThatIsNotJSONAfterAnUnusableValueIsNotJSON() async throws {
        let exchange = ScriptedExchange([.json(#"{"zones":[7],"x":}"#)])
        let error = await #expect(throws: CloudError.self) { _ = try await makeTransport(exchange).listZones() }
        #expect(error?.code == .unexpectedServerResponse)
        #expect(error?.message.contains("not JSON") == true)
    }

    @Test func aZoneMissingNamedInA200FailsTheModifysRecordsAndTheLookupReturnsIt() async throws {
        let missing = #"{"serverErrorCode":"ZONE_NOT_FOUND","reason":"Zone 'Notes' does not exist"}"#
        let exchange = ScriptedExchange([.json(missing), .json(missing)])
        let transport = makeTransport(exchange)
        let result = try await transport.modifyRecords(
            saving: [RecordSave(Record(id: Self.id("a"), type: "Note"))], deleting: [], atomically: false)
        #expect(result.failed[Self.id("a")]?.code == .zoneNotFound)
        let lookup = try await transport.lookup(["a"], in: Self.zone)
        #expect(lookup.found.isEmpty)
        #expect(lookup.zoneError?.code == .zoneNotFound)
    }
}

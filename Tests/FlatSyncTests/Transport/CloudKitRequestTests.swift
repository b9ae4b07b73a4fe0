import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

// What the CKWS transport sends: URLs, methods and JSON bodies, compared with golden JSON written from
// Apple's CloudKit Web Services Reference (keys and types of each request; TIMESTAMP as integer
// milliseconds, BYTES as base64, `type` on every field).

@Suite("CKWS transport: requests")
struct CloudKitRequestTests {
    static let zone = ZoneID("Notes")
    static let when = Date(timeIntervalSince1970: 1_700_000_000.123)

    @Test func theURLNamesContainerEnvironmentDatabaseAndOperationAndEscapesTokensByHand() async throws {
        let exchange = ScriptedExchange([.json(#"{"zones":[]}"#)])
        _ = try await makeTransport(exchange).listZones()
        let request = try #require(exchange.requests.first)
        #expect(request.method == "GET")
        #expect(request.body == nil)
        #expect(
            request.url.absoluteString
                == "https://api.apple-cloudkit.com/database/1/iCloud.com.example.news/development/private/zones/list"
                + "?ckAPIToken=api%2Bkey%2F0%3D&ckWebAuthToken=web%2Btoken%2F1%3D")
        #expect(request.query("ckWebAuthToken") == "web+token/1=", "a + left unescaped would arrive as a space")
        #expect(request.timeout == .seconds(30))
    }

    @Test func withoutATokenTheQueryHasOnlyTheAPIToken() async throws {
        let exchange = ScriptedExchange([.json(#"{"zones":[]}"#)])
        _ = try await makeTransport(exchange, tokens: InMemoryWebAuthTokenStore()).listZones()
        #expect(exchange.requests.first?.url.query == "ckAPIToken=api%2Bkey%2F0%3D")
    }

    @Test func savesAndDeletesBecomeTheMatchingOperationTypesWithTypedFields() async throws {
        let exchange = ScriptedExchange([.json(#"{"records":[]}"#)])
        let id = { (name: String) in RecordID(zone: Self.zone, name: name) }
        var full = Record(
            id: id("a"), type: "Note",
            fields: [
                "s": .string("héllo"), "i": .int(.max), "d": .double(0.5), "t": .date(Self.when),
                "b": .bytes(Data([0, 1, 2, 255])), "l": .list([.int(1), .int(2)]), "e": .list([]),
                "tl": .list([.date(Self.when)]),
                "r": .reference(RecordReference(recordName: "b", zoneName: "Notes", action: .deleteSelf)),
                "rl": .list([.reference(RecordReference(recordName: "c"))]),
                "loc": .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":1.5,"longitude":-2}"#)),
            ], lastModifiedBy: "device-A")
        full.changeTag = ChangeTag("tag-1")
        let plain = Record(id: id("b"), type: "Note", fields: ["s": .string("x")])
        _ = try await makeTransport(exchange).modifyRecords(
            saving: [
                RecordSave(full), RecordSave(plain), RecordSave(plain.withID(id("c")), policy: .changedKeys),
                RecordSave(plain.withID(id("d")).withChangeTag(ChangeTag("old")), policy: .allKeys),
                RecordSave(
                    plain.withID(id("g")).withChangeTag(ChangeTag("tag-g")), policy: .replaceIfServerRecordUnchanged),
            ],
            deleting: [
                RecordDeletion(id("e"), changeTag: ChangeTag("tag-e")), RecordDeletion(id("f"), policy: .force),
            ],
            atomically: false)

        let request = try #require(exchange.requests.first)
        #expect(request.method == "POST")
        #expect(request.operation == "records/modify")
        #expect(request.headers["Content-Type"] == "application/json; charset=utf-8")
        let expected = json(
            #"""
            {"atomic": false, "zoneID": {"zoneName": "Notes"}, "operations": [
              {"operationType": "update", "record": {"recordName": "a", "recordType": "Note", "recordChangeTag": "tag-1",
                "fields": {
                  "s": {"type": "STRING", "value": "héllo"},
                  "i": {"type": "INT64", "value": 9223372036854775807},
                  "d": {"type": "DOUBLE", "value": 0.5},
                  "t": {"type": "TIMESTAMP", "value": 1700000000123},
                  "b": {"type": "BYTES", "value": "AAEC/w=="},
                  "l": {"type": "INT64_LIST", "value": [1, 2]},
                  "e": {"type": "STRING_LIST", "value": []},
                  "tl": {"type": "TIMESTAMP_LIST", "value": [1700000000123]},
                  "r": {"type": "REFERENCE", "value": {"action": "DELETE_SELF", "recordName": "b", "zoneID": {"zoneName": "Notes"}}},
                  "rl": {"type": "REFERENCE_LIST", "value": [{"action": "NONE", "recordName": "c"}]},
                  "loc": {"type": "LOCATION", "value": {"latitude": 1.5, "longitude": -2}},
                  "fsLastModifiedBy": {"type": "STRING", "value": "device-A"}}}},
              {"operationType": "create", "record": {"recordName": "b", "recordType": "Note",
                "fields": {"s": {"type": "STRING", "value": "x"}}}},
              {"operationType": "forceUpdate", "record": {"recordName": "c", "recordType": "Note",
                "fields": {"s": {"type": "STRING", "value": "x"}}}},
              {"operationType": "forceReplace", "record": {"recordName": "d", "recordType": "Note",
                "fields": {"s": {"type": "STRING", "value": "x"}}}},
              {"operationType": "replace", "record": {"recordName": "g", "recordType": "Note", "recordChangeTag": "tag-g",
                "fields": {"s": {"type": "STRING", "value": "x"}}}},
              {"operationType": "delete", "record": {"recordName": "e", "recordChangeTag": "tag-e"}},
              {"operationType": "forceDelete", "record": {"recordName": "f"}}
            ]}
            """#)
        #expect(request.jsonBody == expected, "\(String(decoding: request.body ?? Data(), as: UTF8.self))")
        // The exact text of INT64.max, which a Double would round.
        #expect(String(decoding: request.body ?? Data(), as: UTF8.self).contains("9223372036854775807"))
    }

    /// With a schema, every list goes out with its declared type, empty or not, and no record type or value
    /// outside the schema goes out at all.
    @Test func aSchemaTypesEmptyListsAndKeepsEverythingElseHome() async throws {
        let schema = CloudSchema(recordTypes: [
            "Note": [
                "tags": .list(.int64), "names": .list(.string), "s": .string, CloudSchema.lastModifiedByField: .string,
            ]
        ])
        let exchange = ScriptedExchange([.json(#"{"records":[]}"#)])
        let transport = makeTransport(exchange, schema: schema)
        let note = Record(
            id: RecordID(zone: Self.zone, name: "a"), type: "Note",
            fields: ["tags": .list([]), "names": .list([]), "s": .string("x")], lastModifiedBy: "device-A")
        _ = try await transport.modifyRecords(saving: [RecordSave(note)], deleting: [], atomically: false)
        let body = try #require(exchange.requests.first?.jsonBody as? [String: Any])
        let operation = try #require((body["operations"] as? [[String: Any]])?.first)
        let fields = try #require((operation["record"] as? [String: Any])?["fields"] as? [String: Any])
        #expect((fields["tags"] as? [String: Any])?["type"] as? String == "INT64_LIST")
        #expect((fields["names"] as? [String: Any])?["type"] as? String == "STRING_LIST")

        for outside in [
            Record(id: note.id, type: "Other", fields: ["s": .string("x")]),
            Record(id: note.id, type: "Note", fields: ["tags": .list([.string("not a number")])]),
            Record(id: note.id, type: "Note", fields: ["s": .int(1)]),
        ] {
            let error = await #expect(throws: CloudError.self) {
                _ = try await transport.modifyRecords(saving: [RecordSave(outside)], deleting: [], atomically: false)
            }
            #expect(error?.code == .invalidArguments, "\(outside)")
        }
        #expect(exchange.requests.count == 1, "nothing outside the schema was sent")
    }

    /// A field the schema encrypts goes out with `"isEncrypted": true` beside its plain type, lists too
    /// (Apple's "Encrypting user data"; the shape live clients send, brightdigit/MistKit #392 and #485); an
    /// unencrypted one without it.
    @Test func anEncryptedFieldGoesOutMarkedWithItsPlainType() async throws {
        let schema = CloudSchema(recordTypes: [
            "Note": [
                "secret": .encrypted(.string), "codes": .list(.encrypted(.int64)), "when": .encrypted(.timestamp),
                "s": .string, CloudSchema.lastModifiedByField: .string,
            ]
        ])
        let exchange = ScriptedExchange([.json(#"{"records":[]}"#)])
        let transport = makeTransport(exchange, schema: schema)
        let note = Record(
            id: RecordID(zone: Self.zone, name: "a"), type: "Note",
            fields: [
                "secret": .string("x"), "codes": .list([.int(1)]), "s": .string("y"),
                "when": .date(Date(timeIntervalSince1970: 1)),
            ], lastModifiedBy: "device-A")
        _ = try await transport.modifyRecords(saving: [RecordSave(note)], deleting: [], atomically: false)
        let body = try #require(exchange.requests.first?.jsonBody as? [String: Any])
        let operation = try #require((body["operations"] as? [[String: Any]])?.first)
        let fields = try #require((operation["record"] as? [String: Any])?["fields"] as? [String: Any])
        func field(_ key: String) -> [String: Any] { fields[key] as? [String: Any] ?? [:] }
        #expect(field("secret")["type"] as? String == "STRING")
        #expect(field("secret")["isEncrypted"] as? Bool == true)
        #expect(field("codes")["type"] as? String == "INT64_LIST")
        #expect(field("codes")["isEncrypted"] as? Bool == true)
        #expect(field("when")["type"] as? String == "TIMESTAMP")
        #expect(field("when")["value"] as? Int == 1_000)
        #expect(field("when")["isEncrypted"] as? Bool == true)
        #expect(field("s")["isEncrypted"] == nil)
        #expect(field(CloudSchema.lastModifiedByField)["isEncrypted"] == nil)
    }

    /// A transport made to write any record (`schema: nil`) still marks the fields a context declares
    /// encrypted when the context opens with it (CloudKit refuses an encrypted field sent unmarked, so every
    /// save of such a record would be parked for good), and types its empty lists as the context declares.
    @Test func aTransportWithoutASchemaStillMarksTheFieldsAContextDeclaresEncrypted() async throws {
        let exchange = ScriptedExchange([.json(#"{"records":[]}"#)])
        let transport = makeTransport(exchange, schema: nil)
        try transport.prepareToWrite(
            CloudSchema.flatSync.adding(
                CloudSchema(recordTypes: [
                    "Note": ["secret": .encrypted(.string), "s": .string, "scores": .list(.int64)]
                ])))
        #expect(transport.schema == nil, "it still writes any record")
        let note = Record(
            id: RecordID(zone: Self.zone, name: "a"), type: "Note",
            fields: ["secret": .string("x"), "s": .string("y"), "scores": .list([])], lastModifiedBy: "device-A")
        let other = Record(id: RecordID(zone: Self.zone, name: "b"), type: "Undeclared", fields: ["n": .int(1)])
        _ = try await transport.modifyRecords(
            saving: [RecordSave(note), RecordSave(other)], deleting: [], atomically: false)
        let body = try #require(exchange.requests.first?.jsonBody as? [String: Any])
        let operations = try #require(body["operations"] as? [[String: Any]])
        func field(_ index: Int, _ key: String) -> [String: Any] {
            ((operations[index]["record"] as? [String: Any])?["fields"] as? [String: Any])?[key] as? [String: Any]
                ?? [:]
        }
        #expect(field(0, "secret")["type"] as? String == "STRING")
        #expect(field(0, "secret")["isEncrypted"] as? Bool == true)
        #expect(field(0, "s")["isEncrypted"] == nil)
        #expect(field(0, "scores")["type"] as? String == "INT64_LIST", "an empty list with its declared type")
        #expect(field(1, "n")["type"] as? String == "INT64", "an undeclared type goes out as before")
    }

    /// `init` cannot throw, so a configured schema with a type CloudKit has not is refused when a context is
    /// given the transport, as a context's own impossible type is, before anything is written.
    @Test func aSchemaWithATypeCloudKitHasNotIsRefusedBeforeAnythingIsWritten() throws {
        let impossible = CloudSchema(recordTypes: ["Note": ["owner": .encrypted(.reference)]])
        let configured = makeTransport(ScriptedExchange([]), schema: CloudSchema.flatSync.adding(impossible))
        let error = #expect(throws: FlatSyncError.self) { try configured.prepareToWrite(.flatSync) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.message.contains("owner of Note") == true, "names the field: \(error?.message ?? "")")

        let plain = makeTransport(ScriptedExchange([]), schema: nil)
        #expect(throws: FlatSyncError.self) {
            try plain.prepareToWrite(CloudSchema(recordTypes: ["Note": ["tags": .list(.list(.string))]]))
        }
        #expect(plain.writingSchema.declared?.recordTypes["Note"] == nil, "the refused schema was not taken")
    }

    /// A field the schema does not declare came from the server (another client wrote it; a store writes
    /// only declared fields): an update leaves it out, since the server keeps what it is not sent, and a
    /// create or a replace sends it back as it came, with the type its value has, rather than drop it.
    @Test func aFieldFromTheServerOutsideTheSchemaIsLeftToTheServerOrSentBackAsItCame() async throws {
        let schema = CloudSchema(recordTypes: ["Note": ["s": .string, CloudSchema.lastModifiedByField: .string]])
        let exchange = ScriptedExchange(Array(repeating: .json(#"{"records":[]}"#), count: 3))
        let transport = makeTransport(exchange, schema: schema)
        var note = Record(
            id: RecordID(zone: Self.zone, name: "a"), type: "Note",
            fields: ["s": .string("x"), "color": .string("green"), "scores": .list([.int(3)])])
        func sentFields(_ save: RecordSave) async throws -> (operation: String?, fields: [String: Any]) {
            _ = try await transport.modifyRecords(saving: [save], deleting: [], atomically: false)
            let body = try #require(exchange.requests.last?.jsonBody as? [String: Any])
            let operation = try #require((body["operations"] as? [[String: Any]])?.first)
            let fields = try #require((operation["record"] as? [String: Any])?["fields"] as? [String: Any])
            return (operation["operationType"] as? String, fields)
        }
        let created = try await sentFields(RecordSave(note))
        #expect(created.operation == "create")
        #expect((created.fields["color"] as? [String: Any])?["type"] as? String == "STRING")
        #expect((created.fields["scores"] as? [String: Any])?["type"] as? String == "INT64_LIST")

        note.changeTag = ChangeTag(rawValue: "t1")
        let updated = try await sentFields(RecordSave(note))
        #expect(updated.operation == "update")
        #expect(Set(updated.fields.keys) == ["s"], "the server keeps what an update does not send")

        let replaced = try await sentFields(RecordSave(note, policy: .replaceIfServerRecordUnchanged))
        #expect(replaced.operation == "replace")
        #expect(Set(replaced.fields.keys) == ["s", "color", "scores"], "a replace would drop what it does not send")
    }

    @Test func aCallSpanningZonesSendsOneModifyPerZone() async throws {
        let exchange = ScriptedExchange([.json(#"{"records":[]}"#), .json(#"{"records":[]}"#)])
        _ = try await makeTransport(exchange).modifyRecords(
            saving: [
                RecordSave(Record(id: RecordID(zone: ZoneID("A"), name: "1"), type: "T")),
                RecordSave(Record(id: RecordID(zone: ZoneID("B"), name: "2"), type: "T")),
                RecordSave(Record(id: RecordID(zone: ZoneID("A"), name: "3"), type: "T")),
            ], deleting: [], atomically: true)
        let bodies = exchange.requests.compactMap { $0.jsonBody as? [String: Any] }
        #expect(bodies.compactMap { ($0["zoneID"] as? [String: Any])?["zoneName"] as? String } == ["A", "B"])
        let operationsInA = bodies.first?["operations"] as? [[String: Any]] ?? []
        #expect(operationsInA.compactMap { ($0["record"] as? [String: Any])?["recordName"] as? String } == ["1", "3"])
        #expect(bodies.allSatisfy { $0["atomic"] as? Bool == true }, "atomic per zone, as in CloudKit")
    }

    @Test func changesRequestsCarryTheTokenAsTheStringItCameFromAndClampTheLimit() async throws {
        let exchange = ScriptedExchange([
            .json(#"{"zones":[],"syncToken":"db-2","moreComing":false}"#),
            .json(#"{"zones":[],"syncToken":"db-3","moreComing":false}"#),
            .json(#"{"zones":[{"zoneID":{"zoneName":"Notes"},"records":[],"syncToken":"z-2"}]}"#),
            .json(#"{"zones":[{"zoneID":{"zoneName":"Notes"},"records":[],"syncToken":"z-3"}]}"#),
        ])
        let transport = makeTransport(exchange)
        let first = try await transport.fetchDatabaseChanges(since: nil)
        _ = try await transport.fetchDatabaseChanges(since: first.token)
        let page = try await transport.fetchZoneChanges(in: Self.zone, since: nil, resultsLimit: 1_000)
        _ = try await transport.fetchZoneChanges(in: Self.zone, since: ChangeToken(data: Data()), resultsLimit: 7)

        let bodies = exchange.requests.map(\.jsonBody)
        #expect(bodies[0] == json("{}"), "no token: the key is left out")
        #expect(bodies[1] == json(#"{"syncToken":"db-2"}"#))
        #expect(page.token == ChangeToken(data: Data("z-2".utf8)))
        #expect(
            bodies[2] == json(#"{"resultsLimit":200,"zones":[{"zoneID":{"zoneName":"Notes"},"resultsLimit":200}]}"#),
            "CKWS returns at most 200 records a page")
        #expect(
            bodies[3]
                == json(
                    #"{"resultsLimit":7,"zones":[{"zoneID":{"zoneName":"Notes"},"resultsLimit":7,"syncToken":""}]}"#),
            "an empty token is still a token, not 'from the start'")
        #expect(
            exchange.requests.map(\.operation) == [
                "changes/database", "changes/database", "changes/zone", "changes/zone",
            ])
    }

    @Test func zonesAreCreatedAndDeletedWithZonesModify() async throws {
        let exchange = ScriptedExchange([.json(#"{"zones":[]}"#), .json(#"{"zones":[]}"#)])
        let transport = makeTransport(exchange)
        try await transport.createZones([ZoneID("A"), ZoneID("B")])
        try await transport.deleteZones([ZoneID("A")])
        #expect(
            exchange.requests[0].jsonBody
                == json(
                    #"{"operations":[{"operationType":"create","zone":{"zoneID":{"zoneName":"A"}}},{"operationType":"create","zone":{"zoneID":{"zoneName":"B"}}}]}"#
                ))
        #expect(
            exchange.requests[1].jsonBody
                == json(#"{"operations":[{"operationType":"delete","zone":{"zoneID":{"zoneName":"A"}}}]}"#))
    }

    @Test func lookupsNameTheRecordsOfOneZone() async throws {
        let exchange = ScriptedExchange([.json(#"{"records":[]}"#)])
        _ = try await makeTransport(exchange).lookupRecords([
            RecordID(zone: Self.zone, name: "a"), RecordID(zone: Self.zone, name: "b"),
        ])
        #expect(
            exchange.requests.first?.jsonBody
                == json(#"{"zoneID":{"zoneName":"Notes"},"records":[{"recordName":"a"},{"recordName":"b"}]}"#))
    }

    @Test func theCurrentUserIsAskedOfThePublicDatabaseWithAGet() async throws {
        let exchange = ScriptedExchange([.json(#"{"userRecordName":"_abc","firstName":"Mei"}"#)])
        let user = try await makeTransport(exchange).currentUser()
        #expect(user.userRecordName == "_abc")
        #expect(user.firstName == "Mei")
        let request = try #require(exchange.requests.first)
        #expect(request.method == "GET")
        #expect(request.url.path == "/database/1/iCloud.com.example.news/development/public/users/current")
    }

    // MARK: - Refused before sending

    enum Unsendable: String, CaseIterable, CustomTestStringConvertible {
        case emptyZoneName, emptyRecordName, duplicateRecord, tooManyOperations, emptyRecordType
        case reservedFieldName, mixedList, nestedList, infiniteDouble, dateOutOfRange
        var testDescription: String { rawValue }

        var expectedCode: CloudError.Code { self == .tooManyOperations ? .limitExceeded : .invalidArguments }

        var saves: [RecordSave] {
            let zone = CloudKitRequestTests.zone
            func record(_ fields: [String: FieldValue], name: String = "r", in zone: ZoneID = zone) -> RecordSave {
                RecordSave(Record(id: RecordID(zone: zone, name: name), type: "Note", fields: fields))
            }
            switch self {
            case .emptyZoneName: return [record([:], in: ZoneID(""))]
            case .emptyRecordName: return [record([:], name: "")]
            case .duplicateRecord: return [record([:]), record([:])]
            case .tooManyOperations: return (0...200).map { record([:], name: "r\($0)") }
            case .emptyRecordType:
                return [RecordSave(Record(id: RecordID(zone: zone, name: "r"), type: ""))]
            case .reservedFieldName: return [record(["fsLastModifiedBy": .string("x")])]
            case .mixedList: return [record(["l": .list([.int(1), .string("2")])])]
            case .nestedList: return [record(["l": .list([.list([])])])]
            case .infiniteDouble: return [record(["d": .double(.infinity)])]
            case .dateOutOfRange: return [record(["t": .date(Date(timeIntervalSince1970: 1e300))])]
            }
        }
    }

    @Test(arguments: Unsendable.allCases)
    func whatCKWSCannotCarryOrWouldMisreadIsRefusedBeforeSending(_ unsendable: Unsendable) async throws {
        let exchange = ScriptedExchange([])
        let transport = makeTransport(exchange)
        await #expect {
            _ = try await transport.modifyRecords(saving: unsendable.saves, deleting: [], atomically: false)
        } throws: { ($0 as? CloudError)?.code == unsendable.expectedCode }
        #expect(exchange.requests.isEmpty, "nothing was sent")
    }
}

extension Record {
    func withID(_ id: RecordID) -> Record {
        var copy = self
        copy.id = id
        return copy
    }
}

@Suite("CKWS transport: request sizes")
struct CloudKitRequestSizeTests {
    @Test func aLookupOfMoreThan200RecordsIsSplitInto200s() async throws {
        let exchange = ScriptedExchange { _ in .json(#"{"records":[]}"#) }
        let ids = (0..<450).map { RecordID(zone: ZoneID("Z"), name: "r\($0)") }
        _ = try await makeTransport(exchange).lookupRecords(ids)
        let counts = exchange.requests.map { (($0.jsonBody as? [String: Any])?["records"] as? [Any])?.count ?? 0 }
        #expect(counts == [200, 200, 50])
    }
}

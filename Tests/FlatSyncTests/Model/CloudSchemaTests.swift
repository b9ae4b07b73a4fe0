import Foundation
import Testing

@testable import FlatSync

/// The declared schema: its types, what it accepts, CloudKit's words for what it refuses, and its two
/// renderings.
@Suite struct CloudSchemaTests {
    typealias FieldType = CloudSchema.FieldType

    @Test func everyTypeNameRoundTripsAndListsDoNotNest() {
        let scalars: [FieldType] = [.string, .int64, .double, .timestamp, .bytes, .reference, .asset, .location]
        for type in scalars + scalars.map(FieldType.list) {
            #expect(FieldType(wireName: type.wireName) == type, "\(type)")
        }
        #expect(FieldType.list(.int64).wireName == "INT64_LIST")
        #expect(FieldType.list(.int64).schemaName == "LIST<INT64>")
        #expect(FieldType(wireName: "STRING_LIST_LIST") == nil)
        #expect(FieldType(wireName: "BOOLEAN") == nil)
    }

    /// CloudKit's schema grammar: `[ ENCRYPTED ] { BYTES | STRING | DOUBLE | INT64 | LOCATION | TIMESTAMP }`,
    /// and a list's element may be one ("Integrating a Text-Based Schema into Your Workflow").
    @Test func encryptedTypesHaveTheirPlainWireNameAndNamesOfTheirOwn() throws {
        let encryptable: [FieldType] = [.string, .int64, .double, .timestamp, .bytes, .location]
        for base in encryptable {
            for type in [FieldType.encrypted(base), .list(.encrypted(base))] {
                #expect(type.isEncrypted)
                #expect(FieldType(fullName: type.fullName) == type, "\(type)")
                #expect(type.declarationProblem == nil, "\(type)")
            }
            #expect(FieldType.encrypted(base).wireName == base.wireName)
            #expect(FieldType.encrypted(base).fullName == "ENCRYPTED_" + base.wireName)
        }
        #expect(FieldType.encrypted(.string).schemaName == "ENCRYPTED STRING")
        #expect(FieldType.list(.encrypted(.int64)).schemaName == "LIST<ENCRYPTED INT64>")
        #expect(FieldType.list(.encrypted(.int64)).wireName == "INT64_LIST")
        #expect(FieldType.list(.encrypted(.int64)).fullName == "ENCRYPTED_INT64_LIST")
        #expect(!FieldType.string.isEncrypted && !FieldType.list(.string).isEncrypted)
        for name in ["ENCRYPTED_REFERENCE", "ENCRYPTED_ASSET", "ENCRYPTED_ENCRYPTED_STRING", "ENCRYPTED_"] {
            #expect(FieldType(fullName: name) == nil, "\(name)")
        }
        for refused: FieldType in [
            .encrypted(.reference), .encrypted(.asset), .encrypted(.list(.string)), .encrypted(.encrypted(.string)),
            .list(.encrypted(.reference)), .list(.list(.string)),
        ] {
            #expect(refused.declarationProblem != nil, "\(refused)")
        }
        #expect(FieldType.encrypted(.string).accepts(.string("x")) && !FieldType.encrypted(.string).accepts(.int(1)))
        #expect(FieldType.list(.encrypted(.int64)).accepts(.list([.int(1)])))

        let schema = CloudSchema(recordTypes: [
            "Diary": ["entry": .encrypted(.string), "tags": .list(.encrypted(.string))]
        ])
        let lines = schema.ckdbText.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
        #expect(lines.contains("entry ENCRYPTED STRING,"))
        #expect(lines.contains("tags LIST<ENCRYPTED STRING>,"))
        #expect(try CloudSchema(json: schema.jsonData) == schema)
        #expect(String(decoding: schema.jsonData, as: UTF8.self).contains(#""entry" : "ENCRYPTED_STRING""#))
        let plain = CloudSchema(recordTypes: ["Diary": ["entry": .string]])
        #expect(plain.firstConflict(with: schema)?.contains("ENCRYPTED_STRING") == true)
    }

    @Test func aTypeAcceptsValuesOfItsKind() {
        let reference = FieldValue.reference(RecordReference(recordName: "r"))
        let location = FieldValue.opaque(OpaqueFieldValue(type: "LOCATION", json: "{}"))
        let asset = FieldValue.opaque(OpaqueFieldValue(type: "ASSETID", json: "{}"))
        #expect(FieldType.string.accepts(.string("x")) && !FieldType.string.accepts(.int(1)))
        #expect(FieldType.timestamp.accepts(.date(Date())) && !FieldType.timestamp.accepts(.int(1)))
        #expect(FieldType.reference.accepts(reference) && !FieldType.reference.accepts(.string("r")))
        #expect(FieldType.location.accepts(location) && !FieldType.location.accepts(asset))
        #expect(FieldType.asset.accepts(asset))
        #expect(FieldType.list(.int64).accepts(.list([])), "an empty list fits any list type")
        #expect(FieldType.list(.int64).accepts(.list([.int(1), .int(2)])))
        #expect(!FieldType.list(.int64).accepts(.list([.int(1), .string("2")])))
        #expect(FieldType.list(.reference).accepts(.list([reference])))
        #expect(!FieldType.int64.accepts(.list([])))
    }

    @Test func whatAProductionContainerRefusesIsSaidInCloudKitsWords() {
        let schema = CloudSchema(recordTypes: ["Note": ["title": .string, "fsLastModifiedBy": .string]])
        let id = RecordID(zone: ZoneID("Z"), name: "n")
        #expect(schema.problem(saving: Record(id: id, type: "Note", fields: ["title": .string("t")])) == nil)
        #expect(
            schema.problem(saving: Record(id: id, type: "Photo"))
                == "Cannot create new type Photo in production schema")
        #expect(
            schema.problem(saving: Record(id: id, type: "Note", fields: ["body": .string("b")]))
                == "Cannot create or modify field 'body' in record 'Note' in production schema")
        #expect(
            schema.problem(saving: Record(id: id, type: "Note", fields: ["title": .int(1)]))
                == "Invalid value, expected type STRING.", "as seen live (MistKit #375)")
        let withoutWriter = CloudSchema(recordTypes: ["Note": ["title": .string]])
        #expect(
            withoutWriter.problem(saving: Record(id: id, type: "Note", lastModifiedBy: "device"))?.contains(
                "'fsLastModifiedBy'") == true, "the writer's field must be deployed too")
    }

    @Test func theDeclaredSchemaHoldsEveryFieldTheStoresWrite() throws {
        var item = ReadingHistoryItem(articleID: "a")
        item.lastVisited = Date()
        item.firstSeen = Date()
        item.deviceID = "d"
        item.liking = .liked
        item.likingChangedAt = Date()
        item.flags = [.read, .seen, .offensive, .consumed, .pruningDisabled]
        var history = item.record
        history.lastModifiedBy = "d"
        #expect(history.fields.count == ReadingHistoryItem.recordKeys.count, "every field of the item is written")
        #expect(CloudSchema.flatSync.problem(saving: history) == nil)
        var entry = ReadingListEntry(articleID: "a", dateAdded: Date(), origin: 2, title: "t").record
        entry.lastModifiedBy = "d"
        #expect(CloudSchema.flatSync.problem(saving: entry) == nil)
    }

    @Test func theSchemaLanguageHasEveryTypeFieldSystemFieldAndGrant() {
        let schema = CloudSchema(recordTypes: [
            "Note": ["title": .string, "tags": .list(.string), "grant": .int64, "two words": .string]
        ])
        let text = schema.ckdbText
        #expect(text.hasPrefix("DEFINE SCHEMA\n"))
        #expect(text.contains("    RECORD TYPE Note (\n"))
        #expect(text.contains(#"        "___recordID"   REFERENCE,"#), "the system fields, names aligned")
        #expect(text.contains("        tags            LIST<STRING>,"))
        #expect(text.contains(#"        "grant"         INT64,"#), "a reserved word is quoted")
        #expect(text.contains(#"        "two words"     STRING,"#))
        #expect(text.contains(#"        GRANT READ TO "_world""# + "\n    );"))
        #expect(text.contains("    RECORD TYPE Users (\n"), "the type every container has")
        #expect(text.contains("        roles           LIST<INT64>,"))
    }

    @Test func jsonRoundTripsAndBadJSONIsATypedError() throws {
        let decoded = try CloudSchema(json: CloudSchema.flatSync.jsonData)
        #expect(decoded == .flatSync)
        let text = String(decoding: CloudSchema.flatSync.jsonData, as: UTF8.self)
        #expect(text.contains(#""dateAdded" : "TIMESTAMP""#))
        for bad in [#"{"recordTypes":{"Note":{"x":"BOOLEAN"}}}"#, "[]", "not json"] {
            let error = #expect(throws: FlatSyncError.self) { try CloudSchema(json: Data(bad.utf8)) }
            #expect(error?.code == .invalidArgument, "\(bad)")
        }
    }
}

import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit
@testable import FlatSyncTesting

@Suite("CKWS emulator: JSON")
struct CloudKitJSONTests {
    private func text(_ value: JSONValue) -> String {
        String(decoding: CloudKitJSON.data(value), as: UTF8.self)
    }

    @Test func writesSortedObjectsAndExactNumbers() {
        let object: CloudKitJSON.Object = [
            "b": [.integer(.max), .integer(.min), 0], "a": true, "c": .null, "d": [:],
            "e": .double(0.1 + 0.2), "f": .double(-0.0), "g": .double(.leastNonzeroMagnitude), "h": .double(2.0),
            "i": .double(.infinity), "j": 7, "k": ["z": 1, "y": ["x": false, "w": "v"]],
        ]
        #expect(
            text(CloudKitJSON.value(object))
                == #"{"a":true,"b":[9223372036854775807,-9223372036854775808,0],"c":null,"d":{},"#
                + #""e":0.30000000000000004,"f":-0.0,"g":5e-324,"h":2.0,"i":null,"j":7,"#
                + #""k":{"y":{"w":"v","x":false},"z":1}}"#)
    }

    @Test func escapesOnlyWhatJSONRequires() throws {
        let string = "a\"b\\c/d\n\r\t\u{0}\u{1f}é👋\u{2028}"
        let written = text(["s": .string(string)])
        #expect(written == #"{"s":"a\"b\\c/d\n\r\t\u0000\u001fé👋\#u{2028}"}"#)
        // Foundation's own parser reads it back: the text is JSON, not only JSON to our reader.
        let parsed = try JSONSerialization.jsonObject(with: Data(written.utf8)) as? [String: Any]
        #expect(parsed?["s"] as? String == string)
    }

    @Test func doublesReadBackBitForBit() throws {
        let values: [Double] = [0.1, -0.1, 1e300, 1.7976931348623157e308, 2.2250738585072014e-308, 123_456.789, 1e-7]
        let data = CloudKitJSON.data(.array(values.map(JSONValue.double)))
        #expect((try JSONSerialization.jsonObject(with: data) as? [Any])?.count == values.count)
        // Read back as the emulator reads a DOUBLE field.
        let elements = try CloudKitJSON.array(try JSONValue.parse(data), "x")
        let read = try elements.map { (value) throws(CloudKitJSON.Problem) in try CloudKitJSON.double(value, "x") }
        #expect(read.map(\.bitPattern) == values.map(\.bitPattern))
    }

    @Test func readsIntegersExactlyAndRefusesWrongKinds() throws {
        let body = Data(
            #"{"max":9223372036854775807,"min":-9223372036854775808,"whole":1.2e1,"big":1e19,"s":"1","t":true,"n":null,"dup":1,"dup":2}"#
                .utf8)
        let object = try CloudKitJSON.object(from: body)
        #expect(try CloudKitJSON.int64(object["max"], "max") == .max)
        #expect(try CloudKitJSON.int64(object["min"], "min") == .min)
        #expect(try CloudKitJSON.int64(object["whole"], "whole") == 12)
        #expect(try CloudKitJSON.int64(object["dup"], "dup") == 2)
        #expect(throws: CloudKitJSON.Problem.self) { try CloudKitJSON.int64(object["big"], "big") }
        #expect(throws: CloudKitJSON.Problem.self) { try CloudKitJSON.int64(object["s"], "s") }
        #expect(throws: CloudKitJSON.Problem.self) { try CloudKitJSON.bool(object["s"], default: true, "s") }
        #expect(try CloudKitJSON.bool(object["t"], default: false, "t"))
        #expect(try CloudKitJSON.bool(object["n"], default: true, "n"))
        #expect(try CloudKitJSON.optionalString(object["n"], "n") == nil)
        #expect(try CloudKitJSON.object(from: Data(" \n".utf8)).isEmpty)
        #expect(throws: CloudKitJSON.Problem.self) { try CloudKitJSON.object(from: Data("[1]".utf8)) }
        #expect(throws: CloudKitJSON.Problem.self) { try CloudKitJSON.object(from: Data("{\"a\":".utf8)) }
    }

    @Test func aFieldWithoutATypeIsGuessedFromItsJSON() throws {
        func field(_ json: String) throws -> FieldValue {
            try CloudKitRecordJSON.field(from: try JSONValue.parse(Data(json.utf8)), "field")
        }
        #expect(try field(#"{"value":"a"}"#) == .string("a"))
        #expect(try field(#"{"value":12}"#) == .int(12))
        #expect(try field(#"{"value":12.0}"#) == .double(12))
        #expect(try field(#"{"value":1e2}"#) == .double(100))
        #expect(try field(#"{"value":[1,2]}"#) == .list([.int(1), .int(2)]))
        #expect(throws: CloudKitJSON.Problem.self) { try field(#"{"value":[1,"a"]}"#) }
        #expect(throws: CloudKitJSON.Problem.self) { try field(#"{"value":true}"#) }
        #expect(try field(#"{"value":1500,"type":"TIMESTAMP"}"#) == .date(Date(timeIntervalSince1970: 1.5)))
    }

    @Test func writesARecordInKeyOrderAndReadsItBack() throws {
        let zone = ZoneID("Reading")
        let record = Record(
            id: RecordID(zone: zone, name: "item-é"), type: "HistoryItem",
            fields: [
                "title": .string("a \"quoted\" title\n"), "count": .int(.min), "score": .double(0.1),
                "visited": .date(Date(timeIntervalSince1970: 1_700_000_000.123)), "blob": .bytes(Data([0, 255, 128])),
                "tags": .list([.string("b"), .string("a")]), "empty": .list([]), "Upper": .int(.max),
            ],
            changeTag: ChangeTag("7"), lastModifiedBy: "device-1")
        var writer = JSONValue.Writer()
        CloudKitRecordJSON.write(record, userRecordName: "_user", now: Date(timeIntervalSince1970: 2), to: &writer)
        let written = writer.data
        // Every object in key order: written again with its keys sorted, the bytes are the same.
        let tree = try JSONValue.parse(written)
        #expect(CloudKitJSON.data(tree) == written)
        // The device in `created` and `modified` is the server's, never the writer's FlatSync ID.
        #expect(tree["created"] == ["deviceID": "_emulator-device", "timestamp": 2_000, "userRecordName": "_user"])
        #expect(tree["modified"] == ["deviceID": "_emulator-device", "timestamp": 2_000, "userRecordName": "_user"])
        #expect(tree["deleted"] == false)
        #expect(tree["fields"]?["fsLastModifiedBy"] == ["type": "STRING", "value": "device-1"])
        #expect(tree["fields"]?["empty"] == ["type": "STRING_LIST", "value": []])
        #expect(tree["zoneID"] == ["ownerRecordName": "_defaultOwner", "zoneName": "Reading"])
        // What a client reads back is the record (the empty list, typeless, reads back as an empty list).
        #expect(try CloudKitRecordJSON.record(from: tree, in: zone, "record") == record)

        // A double JSON cannot carry goes out as null, which a reader refuses as a field without a value.
        var nan = Record(id: RecordID(zone: zone, name: "n"), type: "T")
        nan.fields["x"] = .double(.nan)
        var nanWriter = JSONValue.Writer()
        CloudKitRecordJSON.write(nan, userRecordName: "_user", now: Date(), to: &nanWriter)
        #expect(try JSONValue.parse(nanWriter.data)["fields"]?["x"] == ["type": "DOUBLE", "value": .null])

        var tombstone = JSONValue.Writer()
        CloudKitRecordJSON.writeTombstone("gone", to: &tombstone)
        #expect(String(decoding: tombstone.data, as: UTF8.self) == #"{"deleted":true,"recordName":"gone"}"#)
    }
}

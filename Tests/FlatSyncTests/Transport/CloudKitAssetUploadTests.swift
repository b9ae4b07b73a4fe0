import FlatSyncTestSupport
import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// Uploading an asset made on the device before the save that carries it, against scripted answers, in the
/// two steps UploadAssets.html documents: `assets/upload` names a URL, the bytes are POSTed there, and the
/// answer's `singleFile` is the field's value in `records/modify`, untagged as Apple's example sends it.
@Suite struct CloudKitAssetUploadTests {
    static let singleFile = #"""
        {"singleFile":{"wrappingKey":"6Q/w==","fileChecksum":"AfBDVGPsl9","receipt":"Ab3Rq","referenceChecksum":"AQo8","size":5}}
        """#
    static let upload = #"{"tokens":[{"recordName":"p1","fieldName":"image","url":"https://cvws.example/up/1"}]}"#
    static let saved = #"""
        {"records":[{"recordName":"p1","recordType":"Photo","recordChangeTag":"t1","fields":{
        "caption":{"type":"STRING","value":"Tides"},
        "image":{"type":"ASSETID","value":{"fileChecksum":"AfBDVGPsl9","size":5,"wrappingKey":"6Q/w==","referenceChecksum":"AQo8"}}}}]}
        """#

    /// A photo in zone Photos whose image is the file at `path` (5 bytes), as a context hands it to a transport.
    private func photo(_ name: String = "p1", path: String) -> RecordSave {
        RecordSave(
            Record(
                id: RecordID(zone: ZoneID("Photos"), name: name), type: "Photo",
                fields: [
                    "caption": .string("Tides"),
                    "image": CloudAsset.localFieldValue(file: "f1", size: 5, path: path),
                ]))
    }

    private func withFile(_ body: (String) async throws -> Void) async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("f1")
            try Data("hello".utf8).write(to: file)
            try await body(file.path)
        }
    }

    @Test func theBytesGoUpFirstAndTheSaveCarriesTheUploadsDescription() async throws {
        try await withFile { path in
            let exchange = ScriptedExchange([
                .json(Self.upload), .json(Self.singleFile), .json(Self.saved),
            ])
            let transport = makeTransport(exchange)
            let result = try await transport.modifyRecords(saving: [photo(path: path)], deleting: [], atomically: true)
            #expect(result.failed.isEmpty)
            #expect(result.saved.first?.value.fields["image"]?.assetValue?.fileChecksum == "AfBDVGPsl9")

            let requests = exchange.requests
            try #require(requests.count == 3)
            #expect(requests[0].operation == "assets/upload")
            #expect(
                requests[0].jsonBody
                    == json(
                        #"{"zoneID":{"zoneName":"Photos"},"tokens":[{"recordName":"p1","recordType":"Photo","fieldName":"image"}]}"#
                    ))
            #expect(requests[1].method == "POST")
            #expect(requests[1].url.absoluteString == "https://cvws.example/up/1", "as given, no credentials")
            #expect(requests[1].body == Data("hello".utf8))
            #expect(requests[1].headers == ["Content-Type": "application/octet-stream"])
            #expect(requests[2].operation == "records/modify")
            let operations = try #require((requests[2].jsonBody as? [String: Any])?["operations"] as? [[String: Any]])
            let fields = try #require((operations.first?["record"] as? [String: Any])?["fields"] as? [String: Any])
            #expect(
                fields["image"] as? NSObject
                    == json(
                        #"{"value":{"wrappingKey":"6Q/w==","fileChecksum":"AfBDVGPsl9","receipt":"Ab3Rq","referenceChecksum":"AQo8","size":5}}"#
                    ),
                "the upload's description, untagged")
        }
    }

    /// A refusal of the bytes fails that record alone, unsent; a failure of the asset host or the network
    /// is the request's, tried again later; a file that cannot be read fails its record.
    @Test func failedUploadsAreTyped() async throws {
        try await withFile { path in
            let refused = ScriptedExchange([
                .json(#"{"tokens":[{"recordName":"p1","fieldName":"image","url":"https://cvws.example/up/1"}]}"#),
                HTTPExchangeResponse(status: 413, body: Data("too large".utf8)),
                .json(#"{"records":[{"recordName":"plain","recordType":"Note","recordChangeTag":"t1","fields":{}}]}"#),
            ])
            let plain = RecordSave(
                Record(id: RecordID(zone: ZoneID("Photos"), name: "plain"), type: "Note", fields: [:]))
            let result = try await makeTransport(refused).modifyRecords(
                saving: [photo(path: path), plain], deleting: [], atomically: false)
            #expect(result.failed[RecordID(zone: ZoneID("Photos"), name: "p1")]?.code == .invalidArguments)
            #expect(result.saved.keys.map(\.name) == ["plain"])
            let modify = try #require(refused.requests.last?.jsonBody as? [String: Any])
            #expect((modify["operations"] as? [Any])?.count == 1, "the refused record is not sent")

            let failing = ScriptedExchange([
                .json(Self.upload), HTTPExchangeResponse(status: 503, body: Data()),
            ])
            let error = await #expect(throws: CloudError.self) {
                try await makeTransport(failing).modifyRecords(
                    saving: [photo(path: path)], deleting: [], atomically: true)
            }
            #expect(error?.code == .serviceUnavailable)
            #expect(failing.requests.count == 2, "no modify after a failed upload")

            let unreadable = ScriptedExchange([.json(Self.upload)])
            let atomic = try await makeTransport(unreadable).modifyRecords(
                saving: [photo(path: path + "-missing"), plain], deleting: [], atomically: true)
            #expect(atomic.failed[RecordID(zone: ZoneID("Photos"), name: "p1")]?.code == .invalidArguments)
            #expect(atomic.failed[plain.record.id]?.code == .batchRequestFailed)
            #expect(
                unreadable.requests.count == 1, "nothing is saved of an atomic request with a file that cannot be read")
        }
    }

    /// An asset made on the device never goes on the wire as FlatSync keeps it.
    @Test func anAssetNotUploadedIsNeverSent() throws {
        let save = photo(path: "/nowhere")
        #expect(throws: CloudKitWire.FieldProblem.self) {
            try CloudKitWire.Field.check(try #require(save.record.fields["image"]))
        }
    }

    /// A replace of a record holding an asset the server returned asks for the asset again first
    /// (`assets/rereference`, RereferenceAssets.html) and sends what that answers; a refusal of the
    /// rereference leaves the save as it was, to fail on its own.
    @Test func aReplaceAsksForItsKeptAssetAgain() async throws {
        let fetched = FieldValue.opaque(
            OpaqueFieldValue(
                type: "ASSETID",
                json:
                    #"{"downloadURL":"https://h/B/x/${f}","fileChecksum":"AfBDVGPsl9","referenceChecksum":"AQo8","size":5,"wrappingKey":"6Q/w=="}"#
            ))
        let replace = RecordSave(
            Record(
                id: RecordID(zone: ZoneID("Photos"), name: "p1"), type: "Photo", fields: ["image": fetched],
                changeTag: ChangeTag("t0")), policy: .replaceIfServerRecordUnchanged)
        let rereferenced =
            #"{"fileChecksum":"AfBDVGPsl9","receipt":"R2","referenceChecksum":"AQo8","size":5,"wrappingKey":"6Q/w=="}"#
        let exchange = ScriptedExchange([.json(#"{"assets":["# + rereferenced + "]}"), .json(Self.saved)])
        let result = try await makeTransport(exchange).modifyRecords(saving: [replace], deleting: [], atomically: true)
        #expect(result.failed.isEmpty)
        let requests = exchange.requests
        try #require(requests.count == 2)
        #expect(requests[0].operation == "assets/rereference")
        #expect(
            requests[0].jsonBody
                == json(#"{"zoneID":{"zoneName":"Photos"},"assets":[{"recordName":"p1","fieldName":"image"}]}"#))
        let operations = try #require((requests[1].jsonBody as? [String: Any])?["operations"] as? [[String: Any]])
        #expect(operations.first?["operationType"] as? String == "replace")
        let fields = try #require((operations.first?["record"] as? [String: Any])?["fields"] as? [String: Any])
        #expect(fields["image"] as? NSObject == json(#"{"value":"# + rereferenced + "}"))

        // Refused (MistKit: one bad entry fails the whole request): the save goes as it was.
        let refusing = ScriptedExchange([
            .json(#"{"uuid":"u","serverErrorCode":"BAD_REQUEST","reason":"no such asset"}"#, status: 400),
            .json(Self.saved),
        ])
        _ = try await makeTransport(refusing).modifyRecords(saving: [replace], deleting: [], atomically: true)
        let sent = try #require((refusing.requests.last?.jsonBody as? [String: Any])?["operations"] as? [[String: Any]])
        let sentFields = try #require((sent.first?["record"] as? [String: Any])?["fields"] as? [String: Any])
        #expect(
            (sentFields["image"] as? [String: Any])?["value"] as? NSObject
                == json(try #require(fetched.opaqueValue).json))
    }
}

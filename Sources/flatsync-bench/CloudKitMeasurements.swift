import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation

// The CloudKit Web Services rows: the push-and-pull of SyncMeasurements through the real transport and
// the emulator over HTTP on 127.0.0.1, and what the CKWS JSON costs per record on its own.

enum CloudKitMeasurements {
    /// Device A sends 10,000 new history items, device B (new) fetches them all, both through
    /// `CloudKitWebServicesTransport` → HTTP on 127.0.0.1 → `CloudKitWebServicesServer` → `InMemoryCloud`.
    static func pushPullOverHTTP(_ context: BenchContext) async throws -> Results {
        let count = 10_000
        let runs = context.pick(full: 3, quick: 1)
        progress("push \(count) records and pull them on another device, through CKWS over HTTP × \(runs)")
        var samples: [Double] = []
        var requests = 0
        for run in 0..<runs {
            let cloud = InMemoryCloud()
            let server = try CloudKitWebServicesServer(backing: cloud)
            do {
                let round = try await SyncMeasurements.pushPullRound(
                    count: count, name: "http-\(run)", context: context, cloud: cloud
                ) {
                    CloudKitWebServicesTransport(
                        configuration: .init(
                            containerID: "iCloud.dev.flatsync.bench", environment: .development, apiToken: "bench",
                            tokenStore: InMemoryWebAuthTokenStore(), baseURL: server.baseURL))
                }
                samples.append(round.milliseconds)
                requests = round.requests
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()
        }
        var results = Results()
        results["push_pull_10k_http_ms"] = samples.min()!
        results["push_pull_10k_http_requests"] = Double(requests)
        results.note(
            "push + pull over HTTP: the same \(count) records through CloudKitWebServicesTransport, HTTP/1.1 on "
                + "127.0.0.1 and the CKWS emulator over an InMemoryCloud (CKWS pages: 100 records a modify, 200 a "
                + "fetch); best of \(runs); \(requests) database requests.")
        return results
    }

    /// Encoding 10,000 records into `records/modify` bodies and decoding them from `changes/zone` pages,
    /// through the transport with an exchange that answers at once: the JSON's cost per record, without
    /// the network.
    static func jsonCodec(_ context: BenchContext) async throws -> Results {
        let pages = context.pick(full: 50, quick: 10)
        let perPage = 200
        progress("CKWS JSON: encode and decode \(pages * perPage) records")
        let records = (0..<perPage).map { index in
            var item = ReadingHistoryItem(articleID: Measurements.historyArticle(index))
            item.lastVisited = Date(timeIntervalSince1970: 1_700_000_000 + Double(index)).roundedToMilliseconds
            item.firstSeen = item.lastVisited
            item.readCount = 3
            item.maxVersionSeen = 7
            item.deviceID = "bench-device"
            var record = item.record
            record.lastModifiedBy = "bench-device"
            return record
        }
        let zone = ReadingHistoryItem.zone
        let capture = CapturingExchange()
        let encoder = CloudKitWebServicesTransport(configuration: configuration(capture))
        // One page of records as the server sends them back, made from what the transport sent.
        _ = try await encoder.modifyRecords(saving: records.map { RecordSave($0) }, deleting: [], atomically: false)
        let page = try CapturingExchange.page(fromModifyBody: capture.lastBody, zone: zone.name)
        // From now on the modify is answered as CKWS answers a save: each record's name, type and new tag.
        capture.answer = try CapturingExchange.saved(fromModifyBody: capture.lastBody)

        let encodeMilliseconds = try await timeMilliseconds {
            for _ in 0..<pages {
                _ = try await encoder.modifyRecords(
                    saving: records.map { RecordSave($0) }, deleting: [], atomically: false)
            }
        }
        let decoder = CloudKitWebServicesTransport(configuration: configuration(FixedAnswer(page)))
        var decoded = 0
        let decodeMilliseconds = try await timeMilliseconds {
            for _ in 0..<pages {
                decoded += try await decoder.fetchZoneChanges(in: zone, since: nil, resultsLimit: perPage)
                    .changedRecords.count
            }
        }
        guard decoded == pages * perPage else { throw BenchError("decoded \(decoded) records") }
        var results = Results()
        let total = Double(pages * perPage)
        results["ckws_encode_us_per_record"] = encodeMilliseconds * 1_000 / total
        results["ckws_decode_us_per_record"] = decodeMilliseconds * 1_000 / total
        results["ckws_record_bytes"] = Double(page.count) / Double(perPage)
        results.note(
            "CKWS JSON: \(Int(total)) history records (8 fields each, plus the writer's device ID) encoded into "
                + "records/modify bodies (each answered as a save is: the record's name, type and new tag) and "
                + "decoded from changes/zone pages of \(perPage), through the transport with an exchange that "
                + "answers at once (no network).")
        return results
    }

    private static func configuration(_ http: any HTTPExchange) -> CloudKitWebServicesTransport.Configuration {
        .init(
            containerID: "iCloud.dev.flatsync.bench", environment: .development, apiToken: "bench",
            tokenStore: InMemoryWebAuthTokenStore(), baseURL: URL(string: "http://127.0.0.1:9")!, http: http)
    }
}

/// Answers every request with ``answer`` (at first an empty result), keeping the last body sent.
private final class CapturingExchange: HTTPExchange {
    private let body = LockedData()
    private let answerBody = LockedData(Data(#"{"records":[],"zones":[]}"#.utf8))

    var lastBody: Data { body.value }

    var answer: Data {
        get { answerBody.value }
        set { answerBody.value = newValue }
    }

    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        if let data = request.body { body.value = data }
        return HTTPExchangeResponse(status: 200, body: answer)
    }

    /// The answer to a `records/modify` body that saved every record: each entry with the record's name,
    /// type and a new change tag (CKWS sends the whole record back; the transport reads what it needs).
    static func saved(fromModifyBody body: Data) throws -> Data {
        guard let request = try JSONSerialization.jsonObject(with: body) as? [String: Any],
            let operations = request["operations"] as? [[String: Any]]
        else { throw BenchError("the modify body is not what CKWS expects") }
        let records = operations.enumerated().compactMap { index, operation -> [String: Any]? in
            guard let record = operation["record"] as? [String: Any] else { return nil }
            return [
                "recordName": record["recordName"] ?? "", "recordType": record["recordType"] ?? "",
                "recordChangeTag": "tag-\(index)",
            ]
        }
        return try JSONSerialization.data(withJSONObject: ["records": records])
    }

    /// A `changes/zone` page holding the records of a `records/modify` body, each with a change tag.
    static func page(fromModifyBody body: Data, zone: String) throws -> Data {
        guard let request = try JSONSerialization.jsonObject(with: body) as? [String: Any],
            let operations = request["operations"] as? [[String: Any]]
        else { throw BenchError("the modify body is not what CKWS expects") }
        let records = operations.enumerated().compactMap { index, operation -> [String: Any]? in
            guard var record = operation["record"] as? [String: Any] else { return nil }
            record["recordChangeTag"] = "tag-\(index)"
            return record
        }
        let page: [String: Any] = [
            "zones": [["zoneID": ["zoneName": zone], "records": records, "syncToken": "token", "moreComing": false]]
        ]
        return try JSONSerialization.data(withJSONObject: page)
    }
}

/// Answers every request with the same 200.
private struct FixedAnswer: HTTPExchange {
    let body: Data
    init(_ body: Data) { self.body = body }
    func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        HTTPExchangeResponse(status: 200, body: body)
    }
}

/// Bytes behind a lock, for the capturing exchange.
private final class LockedData: @unchecked Sendable {
    // @unchecked: every access goes through `lock`.
    private let lock = NSLock()
    private var data: Data
    init(_ data: Data = Data()) { self.data = data }
    var value: Data {
        get { lock.withLock { data } }
        set { lock.withLock { data = newValue } }
    }
}

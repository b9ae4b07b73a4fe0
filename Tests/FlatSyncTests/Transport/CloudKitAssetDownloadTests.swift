import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// Downloading an asset over CloudKit Web Services, against scripted answers: a plain GET of the fetched
/// record's link, `${f}` replaced, no CloudKit credentials, every refusal of the link read as `unknownItem`.
@Suite struct CloudKitAssetDownloadTests {
    /// A `changes/zone` answer carrying an asset field as a private database returns it (keys as MistKit's
    /// live probe saw them; the link in the shape of live captures; `ASSETID` as live responses tag it).
    static let zoneChanges = #"""
        {"zones":[{"zoneID":{"zoneName":"Photos"},"moreComing":false,"syncToken":"AQID",
        "records":[{"recordName":"p1","recordType":"Photo","recordChangeTag":"k1","deleted":false,
        "fields":{"caption":{"type":"STRING","value":"Tides"},
        "image":{"type":"ASSETID","value":{"fileChecksum":"AfBDVGPsl9","size":5,"wrappingKey":"6Q/w==",
        "referenceChecksum":"AQo8","downloadURL":"https://cvws.icloud-content.com/B/AQm9/${f}?o=Ah&e=1764330000"}}}}]}]}
        """#

    private func fetchedAsset(_ exchange: ScriptedExchange) async throws -> (CloudKitWebServicesTransport, CloudAsset) {
        let transport = makeTransport(exchange)
        let page = try await transport.fetchZoneChanges(in: ZoneID("Photos"), since: nil, resultsLimit: 200)
        let record = try #require(page.changedRecords.first)
        return (transport, try #require(record.fields["image"]?.assetValue))
    }

    @Test func aFetchedAssetDownloadsWithAPlainGetOfItsLink() async throws {
        let exchange = ScriptedExchange([
            .json(Self.zoneChanges),
            HTTPExchangeResponse(status: 200, body: Data("hello".utf8)),
        ])
        let (transport, asset) = try await fetchedAsset(exchange)
        #expect(asset.fileChecksum == "AfBDVGPsl9" && asset.size == 5)
        #expect(try await transport.downloadAsset(asset) == Data("hello".utf8))

        let get = try #require(exchange.requests.last)
        #expect(get.method == "GET")
        #expect(get.url.absoluteString == "https://cvws.icloud-content.com/B/AQm9/asset?o=Ah&e=1764330000")
        #expect(get.body == nil)
        #expect(get.headers.isEmpty, "no credentials, no content type: \(get.headers)")
        #expect(!get.url.absoluteString.contains("ckWebAuthToken") && !get.url.absoluteString.contains("ckAPIToken"))
    }

    /// What CloudKit's asset host answers an expired link with is not known: any refusal is `unknownItem`,
    /// which sends the context to look the record up again; throttling and failures of the host are what
    /// they are for any request; bytes short of the size are refused.
    @Test(arguments: [
        (403, CloudError.Code.unknownItem), (404, .unknownItem), (410, .unknownItem), (400, .unknownItem),
        (429, .requestRateLimited), (500, .serviceUnavailable), (503, .serviceUnavailable),
        (302, .unexpectedServerResponse),
    ])
    func aRefusedDownloadIsTyped(_ status: Int, _ code: CloudError.Code) async throws {
        let exchange = ScriptedExchange([
            .json(Self.zoneChanges), HTTPExchangeResponse(status: status, body: Data("<html/>".utf8)),
        ])
        let (transport, asset) = try await fetchedAsset(exchange)
        let error = await #expect(throws: CloudError.self) { try await transport.downloadAsset(asset) }
        #expect(error?.code == code, "HTTP \(status)")
    }

    @Test func bytesShortOfTheSizeAreRefused() async throws {
        let exchange = ScriptedExchange([
            .json(Self.zoneChanges), HTTPExchangeResponse(status: 200, body: Data("hel".utf8)),
        ])
        let (transport, asset) = try await fetchedAsset(exchange)
        let error = await #expect(throws: CloudError.self) { try await transport.downloadAsset(asset) }
        #expect(error?.code == .unexpectedServerResponse)
    }

    /// An asset that never came from a fetch (a save's answer has no link) sends nothing.
    @Test func anAssetWithoutALinkIsUnknownAndSendsNothing() async throws {
        let exchange = ScriptedExchange([])
        let transport = makeTransport(exchange)
        let asset = try #require(
            CloudAsset(.opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"c","size":1}"#))))
        let error = await #expect(throws: CloudError.self) { try await transport.downloadAsset(asset) }
        #expect(error?.code == .unknownItem)
        #expect(exchange.requests.isEmpty)
    }

    /// A connection that fails mid-download is the network's failure, retryable, as for any request.
    @Test func aFailedConnectionIsANetworkFailure() async throws {
        let exchange = ScriptedExchange { request in
            if request.method == "GET" { throw URLError(.networkConnectionLost) }
            return .json(Self.zoneChanges)
        }
        let (transport, asset) = try await fetchedAsset(exchange)
        let error = await #expect(throws: CloudError.self) { try await transport.downloadAsset(asset) }
        #expect(error?.code == .networkFailure)
    }

    /// Downloads go through their own exchange when one is configured (the real one: a separate session,
    /// since one HTTP/2 connection for two hosts met 421 in MistKit).
    @Test func downloadsUseTheAssetExchange() async throws {
        let api = ScriptedExchange([.json(Self.zoneChanges)])
        let assets = ScriptedExchange([HTTPExchangeResponse(status: 200, body: Data("hello".utf8))])
        var configuration = makeTransport(api).configuration
        configuration.assetHTTP = assets
        let transport = CloudKitWebServicesTransport(configuration: configuration)
        let page = try await transport.fetchZoneChanges(in: ZoneID("Photos"), since: nil, resultsLimit: 200)
        let asset = try #require(page.changedRecords.first?.fields["image"]?.assetValue)
        #expect(try await transport.downloadAsset(asset) == Data("hello".utf8))
        #expect(api.requests.count == 1 && assets.requests.count == 1)
    }
}

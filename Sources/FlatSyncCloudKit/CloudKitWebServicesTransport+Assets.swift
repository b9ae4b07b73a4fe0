import FlatSync
import Foundation

// Downloading an asset's bytes. What CloudKit does, and on what it rests (research notes of 2026-11-28):
// - A fetched record's asset description carries a `downloadURL` (Types.html: "present only when
//   fetching the enclosing record"), on another host than the API's, signed, with `${f}` where a file
//   name goes; clients replace it and fetch the link with a plain GET, no CloudKit credentials (live:
//   MistKit, OpenCloudKit, a server-to-server exporter). The bytes come back as they were uploaded.
// - The link expires after a while nobody documents; what that host answers then is not known, so every
//   refusal of the link (a 4xx) reads as `unknownItem`: look the record up again for a fresh one.

extension CloudKitWebServicesTransport {
    /// The file name put where a download link has `${f}`. CloudKit stores no file name with an asset
    /// (CKAsset), and what its host does with the name is not known: any name does.
    static let assetFileName = "asset"

    /// The asset's bytes, fetched from its download link with a plain GET that carries no credentials (the
    /// link is signed), outside the queue of API requests and on ``Configuration/assetHTTP``.
    ///
    /// - Throws: `CloudError.Code.unknownItem` when the asset carries no link (it was not fetched from
    ///   CloudKit Web Services) or its link is refused (it expired, or the bytes are gone): a fresh copy of
    ///   the record carries a fresh link. `CloudError.Code.unexpectedServerResponse` when the bytes are not
    ///   as many as the asset's size; the network's and the server's failures as for any request.
    public func downloadAsset(_ asset: CloudAsset) async throws -> Data {
        guard let link = asset.downloadURL else {
            throw CloudError(
                .unknownItem,
                "The \(asset) carries no download link (CloudKit adds one to each record it returns): fetch the "
                    + "record again.")
        }
        guard let url = Self.assetURL(link) else {
            throw CloudError(.unexpectedServerResponse, "The download link of the \(asset) is not a URL: \(link)")
        }
        let request = HTTPExchangeRequest(method: "GET", url: url, timeout: configuration.assetDownloadTimeout)
        let response: HTTPExchangeResponse
        do {
            response = try await assetHTTP.send(request)
        } catch {
            throw CloudKitErrorMapping.error(forTransportFailure: error, operation: .downloadAsset)
        }
        switch response.status {
        case 200:
            guard Int64(response.body.count) == asset.size else {
                throw CloudError(
                    .unexpectedServerResponse,
                    "The download of the \(asset) brought \(response.body.count) bytes.")
            }
            return response.body
        case 429:
            throw CloudError(.requestRateLimited, "The asset host is throttling downloads (HTTP 429).")
        case 400..<500:
            throw CloudError(
                .unknownItem,
                "The download link of the \(asset) was refused (HTTP \(response.status)): it may have expired; a "
                    + "fresh copy of its record carries a fresh one.")
        case 500..<600:
            throw CloudError(.serviceUnavailable, "The asset host failed the download (HTTP \(response.status)).")
        default:
            throw CloudError(
                .unexpectedServerResponse, "The asset host answered the download with HTTP \(response.status).")
        }
    }

    /// The exchange downloads go through (see ``Configuration/assetHTTP``).
    nonisolated var assetHTTP: any HTTPExchange {
        if let assetHTTP = configuration.assetHTTP { return assetHTTP }
        let isShared = (configuration.http as? URLSessionExchange) === URLSessionExchange.shared
        return isShared ? URLSessionExchange.assets : configuration.http
    }

    /// `link` with `${f}` replaced by a file name (a link without it is taken as it is).
    static func assetURL(_ link: String) -> URL? {
        URL(string: link.replacingOccurrences(of: "${f}", with: assetFileName))
    }
}

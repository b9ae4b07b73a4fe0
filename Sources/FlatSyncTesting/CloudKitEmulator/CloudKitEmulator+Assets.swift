import FlatSync
import FlatSyncCloudKit
import Foundation
import Synchronization

// Download links for assets: what a fetched record's asset description carries as `downloadURL`, and the
// plain GET that serves its bytes.
//
// Live captures (MistKit, SwiftShortcuts; research notes of 2026-11-28) show links on another host
// (`cvws.icloud-content.com/B/<id>/${f}?…&e=<expiry>…`), signed for a limited time, fetched with no
// CloudKit credentials, `${f}` replaced by a file name. The emulator serves them itself at
// `/_assets/{checksum}/{file}?e={generation}&r={serial}`: a link stops working when an administrator expires the
// links (`POST /_admin/expire-asset-links`), as CloudKit's do after an undocumented while. What CloudKit's
// host answers for an expired link is not known: 403 here, and the transport takes any refusal alike.

extension CloudKitEmulator {
    /// The generation of download links: links name the one they were made in, and only the current one's
    /// work.
    final class AssetLinks: Sendable {
        private let baseURL: URL
        private let generation = Mutex(1)
        /// Numbers each link made, so that two fetches of one record carry different links, as CloudKit's
        /// signed ones do (live captures differ in their `r=` and expiry).
        private let issued = Atomic(0)

        init(baseURL: URL) {
            self.baseURL = baseURL
        }

        /// The link to the bytes with checksum `fileChecksum`, `${f}` standing where a file name goes.
        func link(_ fileChecksum: String) -> String {
            let escaped = fileChecksum.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? fileChecksum
            let number = issued.add(1, ordering: .relaxed).newValue
            return baseURL.absoluteString + "/_assets/\(escaped)/${f}?e=\(generation.withLock { $0 })&r=\(number)"
        }

        /// Makes every link made so far stop working.
        func expireAll() {
            generation.withLock { $0 += 1 }
        }

        /// True when a link of generation `value` still works.
        func isCurrent(_ value: String?) -> Bool {
            value.flatMap(Int.init) == generation.withLock { $0 }
        }
    }

    /// `GET /_assets/{checksum}/{file}?e={generation}`: the bytes, counted and faulted as a
    /// `downloadAsset` request; 403 for a link that expired, 404 for bytes the server does not have.
    func assetDownload(_ request: HTTPServerRequest, _ segments: [String]) async -> HTTPServerReply {
        guard segments.count == 2, !segments[0].isEmpty else {
            return .response(Self.errorResponse(404, "NOT_FOUND", "The path is not /_assets/{checksum}/{file}."))
        }
        guard request.method == "GET" else { return methodNotAllowed(request, allowed: "GET") }
        guard assetLinks.isCurrent(request.queryValue("e")) else {
            return .response(Self.errorResponse(403, "ACCESS_DENIED", "The download link has expired."))
        }
        let checksum = segments[0]
        switch await serve(.downloadAsset, { (database) throws(CloudError) in try database.assetData(checksum) }) {
        case .success(let data):
            return .response(
                HTTPServerResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: data))
        case .failure(let error):
            return reply(for: error)
        }
    }
}

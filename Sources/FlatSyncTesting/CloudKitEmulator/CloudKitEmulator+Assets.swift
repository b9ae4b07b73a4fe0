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
        switch await serve(
            .downloadAsset, { (database) throws(CloudError) in try database.assetData(checksum: checksum) })
        {
        case .success(let data):
            return .response(
                HTTPServerResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: data))
        case .failure(let error):
            return reply(for: error)
        }
    }

    /// `assets/upload` `{"zoneID"?, "tokens": [{"recordName"?, "recordType"?, "fieldName"}]}` → `{"tokens":
    /// [{"recordName", "fieldName", "url"}]}`, a URL per field (UploadAssets.html; a missing record name is
    /// made up, as Apple's example shows). At most 200 tokens (PropertyMetrics). Counted as an `uploadAssets`
    /// request. Whether CloudKit checks the zone or the record type here is not documented: it does not.
    func uploadURLs(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result { () throws(CloudKitJSON.Problem) -> [(name: String, field: String)] in
            var tokens: [(name: String, field: String)] = []
            for (index, raw) in try CloudKitJSON.array(body["tokens"], "tokens").enumerated() {
                let token = try CloudKitJSON.object(raw, "tokens[\(index)]")
                let field = try CloudKitJSON.string(token["fieldName"], "tokens[\(index)].fieldName")
                let name =
                    try token["recordName"].map { (value) throws(CloudKitJSON.Problem) in
                        try CloudKitJSON.string(value, "tokens[\(index)].recordName")
                    } ?? UUID().uuidString.lowercased()
                tokens.append((name, field))
            }
            return tokens
        }.mapError(\.cloudError)
        let outcome = await serve(.uploadAssets) { (_) throws(CloudError) -> [(name: String, field: String)] in
            let tokens = try parsed.get()
            guard tokens.count <= Self.maximumOperations else {
                throw CloudError(
                    .limitExceeded,
                    "The request asks for \(tokens.count) tokens; CloudKit allows \(Self.maximumOperations).")
            }
            return tokens
        }
        switch outcome {
        case .failure(let error):
            return reply(for: error)
        case .success(let tokens):
            var answered: [JSONValue] = []
            for token in tokens {
                let secret = UUID().uuidString.lowercased()
                uploadTokens.withLock { _ = $0.insert(secret) }
                answered.append(
                    .object([
                        ("fieldName", .string(token.field)), ("recordName", .string(token.name)),
                        ("url", .string(baseURL.absoluteString + "/_upload/\(secret)")),
                    ]))
            }
            return Self.ok { $0.value(.object([("tokens", .array(answered))])) }
        }
    }

    /// `POST /_upload/{token}` with the bytes → `{"singleFile": {wrappingKey, fileChecksum, receipt,
    /// referenceChecksum, size}}` (UploadAssets.html; MistKit, live). A token serves one upload; an unknown or
    /// used one gets 404 (what CloudKit's asset host answers then is not known). Not counted: it goes to the
    /// asset host, not to the database.
    func assetUpload(_ request: HTTPServerRequest, token: String) async -> HTTPServerReply {
        guard request.method == "POST" else { return methodNotAllowed(request, allowed: "POST") }
        guard uploadTokens.withLock({ $0.remove(token) != nil }) else {
            return .response(Self.errorResponse(404, "NOT_FOUND", "There is no upload URL \(token)."))
        }
        do {
            let value = try await backing.uploadAsset(request.body)
            let description = try JSONValue.parse(Data((value.opaqueValue?.json ?? "{}").utf8))
            return Self.ok { $0.value(.object([("singleFile", description)]), sortingKeys: true) }
        } catch {
            return .response(Self.errorResponse(500, "INTERNAL_ERROR", "The upload could not be stored: \(error)"))
        }
    }

    /// `assets/rereference` `{"zoneID", "assets": [{"recordName", "fieldName"}]}` → `{"assets": [description]}`,
    /// one per field asked, each with a receipt, writable in a save (RereferenceAssets.html; the answer's key
    /// as MistKit reads it, live). A field that holds no asset fails the whole request with `BAD_REQUEST`, as
    /// MistKit says one bad entry does (the words are ours). Counted as a `rereferenceAssets` request.
    func rereferenceAssets(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result {
            () throws(CloudKitJSON.Problem) -> (zone: ZoneID, fields: [(name: String, key: String)]) in
            let zone = try CloudKitJSON.zoneID(from: body["zoneID"], "zoneID")
            var fields: [(name: String, key: String)] = []
            for (index, raw) in try CloudKitJSON.array(body["assets"], "assets").enumerated() {
                let asset = try CloudKitJSON.object(raw, "assets[\(index)]")
                fields.append(
                    (
                        try CloudKitJSON.string(asset["recordName"], "assets[\(index)].recordName"),
                        try CloudKitJSON.string(asset["fieldName"], "assets[\(index)].fieldName")
                    ))
            }
            return (zone, fields)
        }.mapError(\.cloudError)
        let outcome = await serve(.rereferenceAssets) { (database) throws(CloudError) -> [String] in
            let (zone, fields) = try parsed.get()
            guard fields.count <= Self.maximumOperations else {
                throw CloudError(
                    .limitExceeded,
                    "The request asks for \(fields.count) assets; CloudKit allows \(Self.maximumOperations).")
            }
            var answered: [String] = []
            for (name, key) in fields {
                guard let value = database.rereferencedAsset(RecordID(zone: zone, name: name), field: key),
                    let json = value.opaqueValue?.json
                else {
                    throw CloudError(
                        .invalidArguments, "The record \(name) holds no asset in field \(key).",
                        serverErrorCode: "BAD_REQUEST")
                }
                answered.append(json)
            }
            return answered
        }
        switch outcome {
        case .failure(let error):
            return reply(for: error)
        case .success(let descriptions):
            let values = descriptions.compactMap { try? JSONValue.parse(Data($0.utf8)) }
            return Self.ok { $0.value(.object([("assets", .array(values))]), sortingKeys: true) }
        }
    }
}

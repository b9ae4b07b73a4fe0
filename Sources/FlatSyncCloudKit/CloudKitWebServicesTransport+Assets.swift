import FlatSync
import Foundation

// Uploading and downloading an asset's bytes. What CloudKit does, and on what it rests (research notes of 2026-11-28):
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
        let request = HTTPExchangeRequest(method: "GET", url: url, timeout: configuration.assetTransferTimeout)
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
        default:
            throw Self.assetHostFailure(
                response.status, "download",
                refused: CloudError(
                    .unknownItem,
                    "The download link of the \(asset) was refused (HTTP \(response.status)): it may have expired; a "
                        + "fresh copy of its record carries a fresh one."))
        }
    }

    /// `saves` with each asset made on a device (a field whose ``CloudAsset/localPath`` names its file)
    /// uploaded and replaced by the upload's description, as CKWS documents it (UploadAssets.html): an
    /// `assets/upload` per zone and 200 fields names a URL for each, the file is POSTed there as it is (no
    /// credentials; `application/octet-stream` as MistKit sends it, live), and the answer's `singleFile`
    /// (`wrappingKey`, `fileChecksum`, `receipt`, `referenceChecksum`, `size`) is the value the save carries.
    /// The upload names the record and field the save writes, as Apple's example does (whether the server
    /// holds an upload to them is not settled).
    ///
    /// A save whose file cannot be read, or whose upload the asset host refuses (a 4xx other than 429),
    /// fails in `failed` and is not sent; the network's and the servers' failures are thrown, as for any
    /// request, and the push tries again later.
    func uploadingLocalAssets(_ saves: [RecordSave], failed: inout [RecordID: CloudError]) async throws -> [RecordSave]
    {
        var pending: [(index: Int, key: String, asset: CloudAsset)] = []
        for (index, save) in saves.enumerated() where failed[save.record.id] == nil {
            for key in save.record.fields.keys.sorted() {
                let value = save.record.fields[key]!
                if CloudAsset.isLocal(value), let asset = CloudAsset(value) { pending.append((index, key, asset)) }
            }
        }
        guard !pending.isEmpty else { return saves }
        var saves = saves
        for (zone, chunk) in requestsByZone(pending, { saves[$0.index].record.id }) {
            let request = CloudKitWire.AssetUploadRequest(
                zone: zone,
                tokens: chunk.map { (saves[$0.index].record.id.name, saves[$0.index].record.type, $0.key) })
            let reply = try await send(.uploadAssets, body: try encode(request))
            let urls = try Self.uploadURLs(reply.data)
            for item in chunk {
                let id = saves[item.index].record.id
                guard failed[id] == nil else { continue }
                guard let url = urls["\(id.name)\u{0}\(item.key)"] else {
                    throw CloudKitErrorMapping.unexpectedResponse(
                        .uploadAssets, reply.data, problem: "no upload URL for field \(item.key) of \(id.name)")
                }
                do {
                    saves[item.index].record.fields[item.key] = try await upload(item.asset, to: url)
                } catch let error as CloudError where !error.isTransient {
                    failed[id] = error
                }
            }
        }
        return saves
    }

    /// `saves` with each asset the server returned, in a save that replaces its record (a replace sets every
    /// field it does not send to null, so the asset must go), made writable again: CloudKit takes an asset's
    /// description only with an upload's receipt, and a read has none (MistKit, live), so the record's own
    /// asset is asked for again with `assets/rereference`, which "returns asset values that you can use to
    /// set asset fields" (RereferenceAssets.html; the answer read as `{"assets": [...]}`, one per field
    /// asked, as MistKit reads it live). That it serves the record's own field, not another record's, is
    /// an inference. An update leaves such a field out (the engine does not send it); a create has no record
    /// to ask, and goes as it is.
    ///
    /// A refusal of the whole request (MistKit saw one bad entry fail it) leaves the saves as they are: each
    /// then fails on its own, as it would have. The network's and the server's failures are thrown.
    func rereferencingKeptAssets(_ saves: [RecordSave]) async throws -> [RecordSave] {
        var wanted: [(index: Int, key: String)] = []
        for (index, save) in saves.enumerated()
        where save.record.changeTag != nil
            && (save.policy == .replaceIfServerRecordUnchanged || save.policy == .allKeys)
        {
            for key in save.record.fields.keys.sorted() {
                if let asset = save.record.fields[key]?.assetValue, asset.fileChecksum != nil,
                    !Self.hasReceipt(save.record.fields[key]!)
                {
                    wanted.append((index, key))
                }
            }
        }
        guard !wanted.isEmpty else { return saves }
        var saves = saves
        for (zone, chunk) in requestsByZone(wanted, { saves[$0.index].record.id }) {
            let request = CloudKitWire.AssetRereferenceRequest(
                zone: zone, assets: chunk.map { (saves[$0.index].record.id.name, $0.key) })
            let reply: ResponseBody
            do {
                reply = try await send(.rereferenceAssets, body: try encode(request))
            } catch let error as CloudError where !error.isTransient {
                continue
            }
            guard let json = try? JSONValue.parse(reply.data), case .array(let assets)? = json["assets"],
                assets.count == chunk.count
            else {
                throw CloudKitErrorMapping.unexpectedResponse(
                    .rereferenceAssets, reply.data, problem: "not one asset for each field asked")
            }
            for (item, description) in zip(chunk, assets) {
                guard case .string? = description["fileChecksum"] else { continue }
                saves[item.index].record.fields[item.key] = Self.assetFieldValue(description)
            }
        }
        return saves
    }

    /// True when an asset's description carries a `receipt` (an upload's or a rereference's), so a save can
    /// carry it.
    static func hasReceipt(_ value: FieldValue) -> Bool {
        guard let json = value.opaqueValue.flatMap({ try? JSONValue.parse(Data($0.json.utf8)) }) else { return false }
        return json["receipt"] != nil
    }

    /// The upload URLs of an `assets/upload` answer, by record name and field name.
    private static func uploadURLs(_ data: Data) throws(CloudError) -> [String: String] {
        guard let json = try? JSONValue.parse(data), case .array(let tokens)? = json["tokens"] else {
            throw CloudKitErrorMapping.unexpectedResponse(.uploadAssets, data, problem: "no tokens")
        }
        var urls: [String: String] = [:]
        for token in tokens {
            guard case .string(let name)? = token["recordName"], case .string(let field)? = token["fieldName"],
                case .string(let url)? = token["url"]
            else { throw CloudKitErrorMapping.unexpectedResponse(.uploadAssets, data, problem: "a token lacks a key") }
            urls["\(name)\u{0}\(field)"] = url
        }
        return urls
    }

    /// POSTs an asset's file to `link` and returns the field value its answer describes.
    private func upload(_ asset: CloudAsset, to link: String) async throws -> FieldValue {
        guard let path = asset.localPath, let bytes = FileManager.default.contents(atPath: path) else {
            throw CloudError(
                .invalidArguments, "The file of the \(asset) cannot be read (\(asset.localPath ?? "no path")).")
        }
        guard let url = URL(string: link) else {
            throw CloudError(.unexpectedServerResponse, "The upload URL CloudKit gave is not a URL: \(link)")
        }
        let request = HTTPExchangeRequest(
            method: "POST", url: url, headers: ["Content-Type": "application/octet-stream"], body: bytes,
            timeout: configuration.assetTransferTimeout)
        let response: HTTPExchangeResponse
        do {
            response = try await assetHTTP.send(request)
        } catch {
            throw CloudKitErrorMapping.error(forTransportFailure: error, operation: .uploadAssetBytes)
        }
        switch response.status {
        case 200:
            guard let json = try? JSONValue.parse(response.body), let description = json["singleFile"],
                case .string? = description["fileChecksum"], case .string? = description["receipt"]
            else {
                throw CloudKitErrorMapping.unexpectedResponse(
                    .uploadAssetBytes, response.body, problem: "no singleFile with a fileChecksum and a receipt")
            }
            return Self.assetFieldValue(description)
        default:
            throw Self.assetHostFailure(
                response.status, "upload",
                refused: CloudError(
                    .invalidArguments,
                    "The asset host refused the upload of the \(asset) (HTTP \(response.status))."))
        }
    }

    /// The error of an answer of the asset host other than 200 to an upload or a download (`what`): `refused`
    /// for a 4xx, which names the asset; the request's own failures otherwise, tried again later. A 421
    /// Misdirected Request is a connection reused for a host it cannot serve (RFC 9110 §15.5.20), as MistKit
    /// met live when one HTTP/2 connection served the API host and the asset host.
    private static func assetHostFailure(_ status: Int, _ what: String, refused: CloudError) -> CloudError {
        switch status {
        case 429:
            return CloudError(.requestRateLimited, "The asset host is throttling the \(what) (HTTP 429).")
        case 421:
            return CloudError(
                .networkFailure,
                "The asset host answered the \(what) with 421 Misdirected Request: a connection made for another "
                    + "host was reused (give the transport an assetHTTP of its own).")
        case 400..<500:
            return refused
        case 500..<600:
            return CloudError(.serviceUnavailable, "The asset host failed the \(what) (HTTP \(status)).")
        default:
            return CloudError(.unexpectedServerResponse, "The asset host answered the \(what) with HTTP \(status).")
        }
    }

    /// The field value of an asset description CloudKit answered (an upload's `singleFile`, a rereference's
    /// entry), its keys sorted.
    private static func assetFieldValue(_ description: JSONValue) -> FieldValue {
        var writer = JSONValue.Writer()
        writer.value(description, sortingKeys: true)
        return .opaque(OpaqueFieldValue(type: "ASSETID", json: String(decoding: writer.data, as: UTF8.self)))
    }

    /// `items` by their records' zone, in the order the zones first appear, cut into requests of at most
    /// ``maximumOperationsPerRequest`` (200 tokens or assets, as PropertyMetrics allows).
    private func requestsByZone<Item>(_ items: [Item], _ id: (Item) -> RecordID) -> [(zone: ZoneID, items: [Item])] {
        Self.groupedByZone(items.map { (id($0), $0) }).flatMap { zone, items in
            stride(from: 0, to: items.count, by: maximumOperationsPerRequest).map {
                (zone, Array(items[$0..<min($0 + maximumOperationsPerRequest, items.count)]))
            }
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

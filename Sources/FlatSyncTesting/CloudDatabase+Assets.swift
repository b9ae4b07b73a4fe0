import FlatSync
import Foundation

// Assets: bytes kept apart from the records that name them, as CloudKit keeps a `CKAsset`'s.
//
// What the test clouds do, and on what it rests (research notes in the closing note of 2026-11-28):
// - An upload (CKWS `assets/upload`, then a POST of the bytes to the URL it gives) answers a description
//   `{wrappingKey, fileChecksum, receipt, referenceChecksum, size}` that a save carries as the field's value
//   (documented: UploadAssets.html; seen live by MistKit).
// - A save must carry the receipt of an upload: what a fetch returns has none, and MistKit found live that
//   such a description cannot be written back. CloudKit's words for that refusal are not known: the
//   record fails with BAD_REQUEST here, in words of our own.
// - Reads return `{fileChecksum, size, wrappingKey, referenceChecksum}` (the private database, live in
//   MistKit's probe), and over CKWS a `downloadURL`, which the emulator adds as it answers.
// - The checksums here are serial numbers, not hashes of the bytes: nothing the engine does may depend on
//   how CloudKit computes them.
// - CloudKit deletes bytes lazily once no record names them (CKAsset); the test clouds keep them.

extension CloudDatabase {
    /// Bytes an upload stored, with the receipt a save must carry to attach them.
    struct StoredAsset: Codable, Equatable, Sendable {
        var data: Data
        var receipt: String
    }

    /// Stores `data` as an upload does and returns the description a save carries to attach it to a
    /// record's field (an `ASSETID` value with the upload's receipt).
    package mutating func uploadAsset(_ data: Data) -> FieldValue {
        let number = (assetUploads?.count ?? 0) + 1
        let checksum = "fs\(String(serverID, radix: 16))-\(number)"
        let receipt = "receipt-\(checksum)"
        assetUploads = (assetUploads ?? [:]).merging([checksum: StoredAsset(data: data, receipt: receipt)]) { $1 }
        return Self.assetValue([
            "fileChecksum": checksum, "size": data.count, "receipt": receipt,
            "wrappingKey": "key-\(checksum)", "referenceChecksum": "reference-\(checksum)",
        ])
    }

    /// The bytes of `asset`.
    ///
    /// - Throws: `CloudError.Code.unknownItem` when no upload stored them (an asset made on a device and never
    ///   uploaded has no checksum).
    package func assetData(_ asset: CloudAsset) throws(CloudError) -> Data {
        guard let checksum = asset.fileChecksum else {
            throw CloudError(.unknownItem, "The \(asset) was never uploaded: the server has no checksum for it.")
        }
        return try assetData(checksum: checksum)
    }

    /// The bytes whose checksum is `checksum`.
    ///
    /// - Throws: `CloudError.Code.unknownItem` when no upload stored them.
    package func assetData(checksum: String) throws(CloudError) -> Data {
        guard let stored = assetUploads?[checksum] else {
            throw CloudError(.unknownItem, "The server has no asset \(checksum).")
        }
        return stored.data
    }

    /// The bytes of the assets made on a device that `saves` carry (``CloudAsset/localPath``), read from
    /// their files, by record and field; a save whose file cannot be read fails, record by record, as a
    /// transport that cannot upload it fails it. What the in-process clouds do where CKWS uploads first.
    static func readLocalAssets(_ saves: [RecordSave]) -> (
        bytes: [RecordID: [String: Data]], failed: [RecordID: CloudError]
    ) {
        var bytes: [RecordID: [String: Data]] = [:]
        var failed: [RecordID: CloudError] = [:]
        for save in saves {
            for (key, value) in save.record.fields where CloudAsset.isLocal(value) {
                guard let path = CloudAsset(value)?.localPath, let data = FileManager.default.contents(atPath: path)
                else {
                    failed[save.record.id] = CloudError(
                        .invalidArguments,
                        "The file of the asset in field '\(key)' of \(save.record.id) cannot be read.")
                    break
                }
                bytes[save.record.id, default: [:]][key] = data
            }
        }
        return (bytes, failed)
    }

    /// Serves a modify whose saves may carry assets made on a device: each one's bytes, read first
    /// (``readLocalAssets(_:)``), are stored as an upload and its field takes the upload's description, as a
    /// client of CloudKit uploads before it saves; and a replace's assets the server returned are given
    /// their receipts back (``rereferencingKeptAssets(_:)``). A save whose file cannot be read fails; with
    /// `atomically`, the whole request then fails unsent.
    package static func modifyUploading(
        saving saves: [RecordSave], deleting deletes: [RecordDeletion], atomically: Bool,
        isolation: isolated (any Actor)? = #isolation,
        serve: (@escaping @Sendable (inout CloudDatabase) throws(CloudError) -> ModifyRecordsResult) async throws
            -> ModifyRecordsResult
    ) async throws -> ModifyRecordsResult {
        let (bytes, unreadable) = readLocalAssets(saves)
        if atomically && !unreadable.isEmpty {
            var result = ModifyRecordsResult(failed: unreadable)
            for id in saves.map(\.record.id) + deletes.map(\.id) where result.failed[id] == nil {
                result.failed[id] = CloudError(
                    .batchRequestFailed,
                    "The atomic request failed because another record in it failed; nothing was applied.")
            }
            return result
        }
        let sendable = saves.filter { unreadable[$0.record.id] == nil }
        var result = try await serve { (database) throws(CloudError) in
            let uploaded = sendable.map { save -> RecordSave in
                guard let fields = bytes[save.record.id] else { return save }
                var save = save
                for (key, data) in fields { save.record.fields[key] = database.uploadAsset(data) }
                return save
            }
            return try database.modifyRecords(
                saving: database.rereferencingKeptAssets(uploaded), deleting: deletes, atomically: atomically)
        }
        result.failed.merge(unreadable) { $1 }
        return result
    }

    /// The description, with a receipt, of the asset the record `id` holds in field `key` now: what CKWS
    /// `assets/rereference` answers ("asset values that you can use to set asset fields", RereferenceAssets.html);
    /// nil when the record does not exist or the field holds no single asset.
    package func rereferencedAsset(_ id: RecordID, field key: String) -> FieldValue? {
        guard let value = currentRecord(id)?.fields[key], CloudAsset.holdsAssets(value), !CloudAsset.isLocal(value),
            let descriptions = Self.assetDescriptions(in: value), descriptions.count == 1,
            let checksum = descriptions[0]["fileChecksum"] as? String, let stored = assetUploads?[checksum],
            value.opaqueValue.map({ CloudAsset.wireTypes.contains($0.type) }) == true
        else { return nil }
        var description = descriptions[0]
        description["receipt"] = stored.receipt
        return Self.assetValue(description)
    }

    /// `saves` with each receipt-less asset a replace carries, the one its record holds on the server in that
    /// field, given its receipt back: what a CKWS client does with `assets/rereference` before such a save
    /// (see `CloudKitWebServicesTransport`), which the in-process clouds do within the modify.
    func rereferencingKeptAssets(_ saves: [RecordSave]) -> [RecordSave] {
        saves.map { save in
            guard save.policy == .replaceIfServerRecordUnchanged || save.policy == .allKeys else { return save }
            var save = save
            for (key, value) in save.record.fields {
                guard let asset = value.assetValue, asset.fileChecksum != nil,
                    Self.assetDescriptions(in: value)?.first?["receipt"] == nil,
                    let current = rereferencedAsset(save.record.id, field: key), current.assetValue == asset
                else { continue }
                save.record.fields[key] = current
            }
            return save
        }
    }

    /// Why a save's assets cannot be attached: a description without the receipt of an upload of its
    /// checksum (one a fetch returned, say); nil when every asset it carries has one.
    func assetFailure(_ record: Record) -> CloudError? {
        for key in record.fields.keys.sorted() {
            guard let descriptions = Self.assetDescriptions(in: record.fields[key]!) else { continue }
            for description in descriptions {
                let checksum = description["fileChecksum"] as? String ?? ""
                guard let stored = assetUploads?[checksum], description["receipt"] as? String == stored.receipt else {
                    // The wording is ours: CloudKit's for this refusal has not been seen.
                    return CloudError(
                        .invalidArguments,
                        "The asset in field '\(key)' of record '\(record.id.name)' has no receipt of an upload: "
                            + "upload the bytes (assets/upload) and send the description the upload answered.",
                        serverErrorCode: "BAD_REQUEST")
                }
            }
        }
        return nil
    }

    /// `fields` as the server keeps them: each asset's description without its receipt, which a read never
    /// returns.
    static func withoutReceipts(_ fields: [String: FieldValue]) -> [String: FieldValue] {
        var kept = fields
        for (key, value) in fields {
            guard case .opaque(let opaque) = value, let descriptions = assetDescriptions(in: value) else { continue }
            let stripped = descriptions.map { $0.filter { $0.key != "receipt" } }
            let json: Any = CloudAsset.listWireTypes.contains(opaque.type) ? stripped : stripped[0]
            kept[key] = .opaque(OpaqueFieldValue(type: opaque.type, json: jsonText(json)))
        }
        return kept
    }

    /// The descriptions an asset field (or a list of them) holds, as JSON objects; nil for another value.
    static func assetDescriptions(in value: FieldValue) -> [[String: Any]]? {
        guard case .opaque(let opaque) = value, CloudAsset.holdsAssets(value),
            let json = try? JSONSerialization.jsonObject(with: Data(opaque.json.utf8))
        else { return nil }
        if let one = json as? [String: Any] { return [one] }
        return json as? [[String: Any]]
    }

    /// An `ASSETID` value whose JSON is `description`.
    static func assetValue(_ description: [String: Any]) -> FieldValue {
        .opaque(OpaqueFieldValue(type: "ASSETID", json: jsonText(description)))
    }

    private static func jsonText(_ json: Any) -> String {
        // Keys sorted, so that one description is always one text (values compare by it).
        let data = (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A file that CloudKit keeps beside a record (an `ASSET` field): a photo, a recording, a document.
///
/// A record's field holds only the asset's description; the bytes live apart. Make an asset from bytes
/// with ``SyncContext/makeAsset(_:)``, which keeps them in the store's directory, durably, and put it in a
/// field of a value you save: the context uploads the bytes when it sends the record. An asset another
/// device (or a native app on the same container, saving a `CKAsset`) put in a record arrives as its
/// description, and ``SyncContext/data(of:in:)`` downloads the bytes on demand.
///
/// Declare the field as ``CloudSchema/FieldType/asset`` and hold it as a `CloudAsset` property of a
/// `Codable` type, or read it with ``RecordFields/asset(_:)``:
///
/// ```swift
/// struct Photo: SyncableRecord, Codable {
///     static let zone = ZoneID("Photos")
///     static let recordType = "Photo"
///     static let fieldTypes: [String: CloudSchema.FieldType] = ["caption": .string, "image": .asset]
///     var id: String
///     var caption: String
///     var image: CloudAsset?
/// }
///
/// let image = try await context.makeAsset(jpegData)
/// try await context.records(Photo.self).save(Photo(id: "p1", caption: "Tides", image: image))
///
/// if let photo = await context.records(Photo.self).value("p1"), let image = photo.image {
///     let bytes = try await context.data(of: image, in: photo)
/// }
/// ```
///
/// A save may keep the asset its record holds, drop it (the server then forgets the bytes once no record
/// names them), or give the field an asset made on this device; not another record's asset, whose
/// description CloudKit takes back only from an upload.
///
/// Two assets are equal when they name the same bytes: the same ``fileChecksum`` and ``size`` for an asset
/// from the server, the same file for one made here. The temporary download link the server attaches to
/// each fetched copy plays no part.
public struct CloudAsset: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The server's checksum of the bytes, which names them: copies of one asset share it. Nil for an asset
    /// made on this device, which this device keeps as it made it (its bytes in the store's directory) once
    /// uploaded too, until a save of the record with other bytes arrives; other devices see the server's
    /// description.
    public let fileChecksum: String?
    /// The number of bytes.
    public let size: Int64
    /// The field's value as the record keeps it: saving the value unchanged sends nothing for the field.
    public let fieldValue: FieldValue
    /// Where the bytes could be fetched when the record was fetched, if the server said: a link CloudKit
    /// signs for a limited time (undocumented how long; MistKit saw it expire), with `${f}` where a file
    /// name goes. Never trusted to last: a download that fails with it looks the record up again.
    package let downloadURL: String?
    /// For an asset made on this device, the name of its file in the store's `assets` folder.
    package let localFile: String?
    /// For an asset made on this device, the file's whole path: set only in the records a context hands a
    /// transport to send, which uploads the file (see ``localFieldValue(file:size:path:)``).
    package let localPath: String?

    /// The asset a field holds: a kept `ASSETID` (or `ASSET`) value whose JSON names a checksum and a size,
    /// or an asset made on this device; nil for any other value.
    public init?(_ fieldValue: FieldValue) {
        guard case .opaque(let kept) = fieldValue else { return nil }
        let json = Data(kept.json.utf8)
        if kept.type == Self.localType {
            guard let local = try? JSONDecoder().decode(LocalDescription.self, from: json), !local.file.isEmpty,
                local.size >= 0
            else { return nil }
            (fileChecksum, size, downloadURL) = (nil, local.size, nil)
            (localFile, localPath) = (local.file, local.path)
        } else {
            guard Self.wireTypes.contains(kept.type),
                let description = try? JSONDecoder().decode(Description.self, from: json),
                !description.fileChecksum.isEmpty, let size = description.size.value, size >= 0
            else { return nil }
            (fileChecksum, self.size, downloadURL) = (description.fileChecksum, size, description.downloadURL)
            (localFile, localPath) = (nil, nil)
        }
        self.fieldValue = fieldValue
    }

    /// The type names a field holding one asset has: `ASSETID` as CloudKit Web Services tags what it
    /// returns (live captures in MistKit, OpenCloudKit), `ASSET` as its schema names the type.
    package static let wireTypes: Set<String> = ["ASSETID", "ASSET"]

    /// The names of a list of assets' type.
    package static let listWireTypes: Set<String> = ["ASSETID_LIST", "ASSET_LIST"]

    /// The kept type of an asset made on this device: a value of FlatSync's own, which never goes on the wire
    /// as it is (a transport uploads the file and sends the upload's description).
    package static let localType = "FLATSYNC_LOCAL_ASSET"

    /// The field value of an asset made on this device: its file's name in the store's `assets` folder and
    /// its size, and, in a record handed to a transport, the file's whole path.
    package static func localFieldValue(file: String, size: Int64, path: String? = nil) -> FieldValue {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(LocalDescription(file: file, size: size, path: path))) ?? Data()
        return .opaque(OpaqueFieldValue(type: localType, json: String(decoding: json, as: UTF8.self)))
    }

    /// True when `value` holds an asset or a list of them, by its type: what a host's save may keep but not
    /// change.
    package static func holdsAssets(_ value: FieldValue) -> Bool {
        guard case .opaque(let kept) = value else { return false }
        return wireTypes.contains(kept.type) || listWireTypes.contains(kept.type) || kept.type == localType
    }

    /// True when `value` is an asset made on this device.
    package static func isLocal(_ value: FieldValue) -> Bool {
        value.opaqueValue?.type == localType
    }

    /// What names the bytes of each asset `value` holds (``fileChecksum`` and ``size``, or the file of one
    /// made here): one for an asset field, each element's for a list of them; nil when it holds none, or a
    /// description without both.
    package static func identities(in value: FieldValue) -> [String]? {
        guard case .opaque(let kept) = value else { return nil }
        if kept.type == localType { return CloudAsset(value).map { [$0.identity] } }
        let json = Data(kept.json.utf8)
        let descriptions: [Description]
        if wireTypes.contains(kept.type), let one = try? JSONDecoder().decode(Description.self, from: json) {
            descriptions = [one]
        } else if listWireTypes.contains(kept.type),
            let list = try? JSONDecoder().decode([Description].self, from: json)
        {
            descriptions = list
        } else {
            return nil
        }
        var identities: [String] = []
        for description in descriptions {
            guard !description.fileChecksum.isEmpty, let size = description.size.value else { return nil }
            identities.append("\(description.fileChecksum) \(size)")
        }
        return identities
    }

    /// What names the bytes: the checksum and size, or the local file.
    private var identity: String {
        if let fileChecksum { return "\(fileChecksum) \(size)" }
        return "local \(localFile ?? "")"
    }

    /// The keys of the description FlatSync reads; the rest (`wrappingKey`, `referenceChecksum`) stays in
    /// ``fieldValue``.
    private struct Description: Decodable {
        var fileChecksum: String
        var size: Size
        var downloadURL: String?
    }

    /// An asset made on this device, as its field keeps it.
    private struct LocalDescription: Codable {
        var file: String
        var size: Int64
        var path: String?
    }

    /// A size as a JSON integer, or as a string of one (CloudKit's `numbersAsStrings`).
    private struct Size: Decodable {
        var value: Int64?

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let number = try? container.decode(Int64.self) {
                value = number
            } else {
                value = Int64(try container.decode(String.self))
            }
        }
    }

    public static func == (lhs: CloudAsset, rhs: CloudAsset) -> Bool {
        lhs.identity == rhs.identity
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(identity)
    }

    public var description: String {
        if let fileChecksum { return "asset \(fileChecksum) (\(size) bytes)" }
        return "asset made on this device (\(size) bytes)"
    }

    /// Decodes the field value it was read from (see ``FieldValue``'s `Codable` form).
    public init(from decoder: any Decoder) throws {
        let value = try FieldValue(from: decoder)
        guard let asset = CloudAsset(value) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "\(value) is not an asset"))
        }
        self = asset
    }

    /// Encodes ``fieldValue``.
    public func encode(to encoder: any Encoder) throws {
        try fieldValue.encode(to: encoder)
    }
}

extension FieldValue {
    /// The asset, if this field holds one (see ``CloudAsset``).
    public var assetValue: CloudAsset? { CloudAsset(self) }
}

extension Record {
    /// The bytes of the assets made on this device that the record holds: what a save of it uploads (its
    /// ``approximateSize`` counts only their descriptions, as CloudKit's 1 MB limit leaves assets out).
    package var localAssetBytes: Int {
        var bytes = 0
        for value in fields.values where CloudAsset.isLocal(value) { bytes += Int(CloudAsset(value)?.size ?? 0) }
        return bytes
    }
}

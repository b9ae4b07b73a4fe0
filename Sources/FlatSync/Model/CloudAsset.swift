#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A file that CloudKit keeps beside a record (an `ASSET` field): a photo, a recording, a document.
///
/// A record's field holds only the asset's description; the bytes live apart on Apple's servers, and
/// ``SyncContext/data(of:in:)`` downloads them. FlatSync reads assets that other clients wrote (a native
/// app on the same container saving a `CKAsset`, say) but cannot yet upload one: a host value may keep the
/// asset its record holds, or drop it (the server then forgets the bytes once no record refers to them),
/// and a save that gives a field another asset is refused (see ``SyncableRecord``).
///
/// Declare the field as ``CloudSchema/FieldType/asset`` and read it as a `CloudAsset` property of a
/// `Codable` type, or with ``RecordFields/asset(_:)``:
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
/// if let photo = await context.records(Photo.self).value(id), let image = photo.image {
///     let bytes = try await context.data(of: image, in: photo)
/// }
/// ```
///
/// Two assets are equal when they name the same bytes: the same ``fileChecksum`` and ``size``. The
/// temporary download link the server attaches to each fetched copy plays no part.
public struct CloudAsset: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The server's checksum of the bytes, which names them: copies of one asset share it.
    public let fileChecksum: String
    /// The number of bytes, as the server counted them.
    public let size: Int64
    /// The field's value as the server sent it, which a record keeps: saving the value unchanged sends
    /// nothing for the field.
    public let fieldValue: FieldValue
    /// Where the bytes could be fetched when the record was fetched, if the server said: a link CloudKit
    /// signs for a limited time (undocumented how long; MistKit saw it expire), with `${f}` where a file
    /// name goes. Never trusted to last: a download that fails with it looks the record up again.
    package let downloadURL: String?

    /// The asset a field holds: a kept `ASSETID` (or `ASSET`) value whose JSON names a checksum and a size;
    /// nil for any other value.
    public init?(_ fieldValue: FieldValue) {
        guard case .opaque(let kept) = fieldValue, Self.wireTypes.contains(kept.type),
            let description = try? JSONDecoder().decode(Description.self, from: Data(kept.json.utf8)),
            !description.fileChecksum.isEmpty, let size = description.size.value, size >= 0
        else { return nil }
        self.fileChecksum = description.fileChecksum
        self.size = size
        self.fieldValue = fieldValue
        self.downloadURL = description.downloadURL
    }

    /// The type names a field holding one asset has: `ASSETID` as CloudKit Web Services tags what it
    /// returns (live captures in MistKit, OpenCloudKit), `ASSET` as its schema names the type.
    package static let wireTypes: Set<String> = ["ASSETID", "ASSET"]

    /// The names of a list of assets' type.
    package static let listWireTypes: Set<String> = ["ASSETID_LIST", "ASSET_LIST"]

    /// True when `value` holds an asset or a list of them, by its type: what a host's save may keep but not
    /// change.
    package static func holdsAssets(_ value: FieldValue) -> Bool {
        guard case .opaque(let kept) = value else { return false }
        return wireTypes.contains(kept.type) || listWireTypes.contains(kept.type)
    }

    /// What names the bytes of each asset `value` holds (``fileChecksum`` and ``size``): one for an asset
    /// field, each element's for a list of them; nil when it holds none, or a description without both.
    package static func identities(in value: FieldValue) -> [String]? {
        guard case .opaque(let kept) = value else { return nil }
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

    /// The keys of the description FlatSync reads; the rest (`wrappingKey`, `referenceChecksum`) stays in
    /// ``fieldValue``.
    private struct Description: Decodable {
        var fileChecksum: String
        var size: Size
        var downloadURL: String?
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
        lhs.fileChecksum == rhs.fileChecksum && lhs.size == rhs.size
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(fileChecksum)
        hasher.combine(size)
    }

    public var description: String { "asset \(fileChecksum) (\(size) bytes)" }

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

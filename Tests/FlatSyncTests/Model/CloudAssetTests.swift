import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// Reading an asset field: what `CloudAsset` makes of the descriptions CloudKit Web Services returns, and
/// how a `Codable` host value carries one.
@Suite struct CloudAssetTests {
    /// A private database's read, with the keys MistKit's probe saw live (wrappingKey, referenceChecksum) and
    /// a download link in the shape of live captures (research notes of 2026-11-28).
    static let privateRead = OpaqueFieldValue(
        type: "ASSETID",
        json: #"{"downloadURL":"https://cvws.icloud-content.com/B/AQm9/${f}?o=Ah&v=1&e=1764330000&k=kx","#
            + #""fileChecksum":"AfBDVGPsl9","referenceChecksum":"AQo8","size":48213,"wrappingKey":"6Q/w=="}"#)

    @Test func aFetchedDescriptionReadsAsAnAsset() throws {
        let asset = try #require(CloudAsset(.opaque(Self.privateRead)))
        #expect(asset.fileChecksum == "AfBDVGPsl9")
        #expect(asset.size == 48_213)
        #expect(asset.downloadURL == "https://cvws.icloud-content.com/B/AQm9/${f}?o=Ah&v=1&e=1764330000&k=kx")
        #expect(asset.fieldValue == .opaque(Self.privateRead), "the value is kept as it came")
        #expect(FieldValue.opaque(Self.privateRead).assetValue == asset)
    }

    /// The public database's read has only three keys (SwiftShortcuts' capture); a size may come as a string
    /// (`numbersAsStrings`); the schema's name `ASSET` reads too.
    @Test func aDescriptionWithTheFewestKeysReadsToo() throws {
        let publicRead = OpaqueFieldValue(
            type: "ASSETID", json: #"{"downloadURL":"https://h/B/x/${f}","fileChecksum":"c1","size":"12"}"#)
        #expect(CloudAsset(.opaque(publicRead))?.size == 12)
        let named = OpaqueFieldValue(type: "ASSET", json: #"{"fileChecksum":"c1","size":12}"#)
        #expect(CloudAsset(.opaque(named))?.downloadURL == nil)
    }

    @Test func otherValuesAreNoAssets() {
        let values: [FieldValue] = [
            .string("c1"), .bytes(Data([1])),
            .opaque(OpaqueFieldValue(type: "LOCATION", json: #"{"latitude":1,"longitude":2}"#)),
            .opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"size":12}"#)),
            .opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"","size":12}"#)),
            .opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"c","size":-1}"#)),
            .opaque(OpaqueFieldValue(type: "ASSETID", json: "not json")),
            .opaque(OpaqueFieldValue(type: "ASSETID_LIST", json: #"[{"fileChecksum":"c","size":1}]"#)),
        ]
        for value in values { #expect(CloudAsset(value) == nil, "\(value)") }
    }

    /// Two copies of one asset fetched at different times carry different links: they are one asset.
    @Test func copiesWithOtherLinksAreEqual() throws {
        let first = try #require(CloudAsset(.opaque(Self.privateRead)))
        let later = OpaqueFieldValue(
            type: "ASSETID", json: Self.privateRead.json.replacingOccurrences(of: "e=1764330000", with: "e=1764339999"))
        let second = try #require(CloudAsset(.opaque(later)))
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(first.fieldValue != second.fieldValue)
        let other = OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"AfBDVGPsl9","size":1}"#)
        #expect(CloudAsset(.opaque(other)) != first, "another size is other bytes")
    }

    @Test func identitiesNameTheBytesOfAnAssetOrAList() {
        #expect(CloudAsset.identities(in: .opaque(Self.privateRead)) == ["AfBDVGPsl9 48213"])
        let list = OpaqueFieldValue(
            type: "ASSETID_LIST",
            json: #"[{"fileChecksum":"a","size":1,"downloadURL":"x"},{"fileChecksum":"b","size":"2"}]"#)
        #expect(CloudAsset.identities(in: .opaque(list)) == ["a 1", "b 2"])
        #expect(CloudAsset.identities(in: .string("a")) == nil)
        #expect(CloudAsset.holdsAssets(.opaque(list)))
        #expect(!CloudAsset.holdsAssets(.opaque(OpaqueFieldValue(type: "LOCATION", json: "{}"))))
    }

    typealias Photo = TestPhoto

    /// A `Codable` value reads the field as a `CloudAsset` and writes back exactly the value it read, so an
    /// unchanged asset is no change.
    @Test func aCodableValueCarriesTheFieldItRead() throws {
        let fields = RecordFields(["caption": .string("Tides"), "image": .opaque(Self.privateRead)], recordName: "p1")
        let photo = try Photo(id: "p1", fields: fields)
        #expect(photo.image?.fileChecksum == "AfBDVGPsl9")
        #expect(try photo.fields["image"] == .opaque(Self.privateRead))
        #expect(try fields.asset("image").size == 48_213)
        #expect(throws: FlatSyncError.self) { try fields.asset("caption") }

        let without = try Photo(id: "p2", fields: RecordFields(["caption": .string("Dunes")], recordName: "p2"))
        #expect(without.image == nil)
        #expect(try without.fields["image"] == nil)
        let wrong = RecordFields(["caption": .string("x"), "image": .string("not an asset")], recordName: "p3")
        #expect(throws: FlatSyncError.self) { try Photo(id: "p3", fields: wrong) }
    }

    /// Through another encoder (JSON, say) a `CloudAsset` is the field value it came from.
    @Test func anAssetEncodesAsItsFieldValue() throws {
        let asset = try #require(CloudAsset(.opaque(Self.privateRead)))
        let decoded = try JSONDecoder().decode(CloudAsset.self, from: try JSONEncoder().encode(asset))
        #expect(decoded.fieldValue == asset.fieldValue)
        let notAnAsset = try JSONEncoder().encode(FieldValue.string("x"))
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(CloudAsset.self, from: notAnAsset) }
    }
}

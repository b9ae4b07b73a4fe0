import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The transport conformance suite, assets: what every test cloud does with an asset another client uploaded
// (CloudDatabase+Assets.swift has each rule and its source).

@Suite("Cloud conformance: assets")
struct CloudAssetConformanceTests {
    private let bytes = Data((0..<3_000).map { UInt8($0 % 251) })

    /// The description as JSON text, to look for keys in.
    private func text(_ value: FieldValue?) -> String {
        value?.opaqueValue?.json ?? ""
    }

    @Test(arguments: CloudUnderTest.allCases)
    func anAssetAnotherClientSavedComesBackFromEveryReadAndDownloads(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let upload = try await cloud.uploadAsset(bytes)
            #expect(text(upload).contains("receipt"), "an upload's description carries its receipt")
            let saved = try await cloud.saveOne(makeRecord("photo", ["image": upload, "caption": .string("Tides")]))
            let asset = try #require(saved.fields["image"]?.assetValue)
            #expect(asset.size == 3_000)

            let fetched = try #require(try await cloud.fetchAll().changed[recordID("photo")]?.fields["image"])
            let lookedUp = try #require(
                try await cloud.lookupRecords([recordID("photo")])[recordID("photo")]?.fields["image"])
            for value in [saved.fields["image"], fetched, lookedUp] {
                #expect(value?.assetValue == asset)
                #expect(!text(value).contains("receipt"), "a read returns no receipt: \(text(value))")
            }
            // Types.html: the link is "present only when fetching the enclosing record".
            #expect(text(saved.fields["image"]).contains("downloadURL") == false)
            #expect(text(fetched).contains("downloadURL") == kind.isHTTP)
            #expect(try await cloud.downloadAsset(try #require(fetched.assetValue)) == bytes)
            #expect(try await cloud.downloadAsset(try #require(lookedUp.assetValue)) == bytes)
        }
    }

    /// A description without the receipt of an upload (what a read returns) cannot be written back: the
    /// record is refused on its own, and the request's other records are saved (MistKit saw live that a
    /// fetched asset cannot be attached again; CloudKit's words for it are not known).
    @Test(arguments: CloudUnderTest.allCases)
    func aSaveCarryingAFetchedDescriptionIsRefusedRecordByRecord(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let saved = try await cloud.saveOne(makeRecord("photo", ["image": try await cloud.uploadAsset(bytes)]))
            let fetched = try #require(try await cloud.fetchAll().changed[recordID("photo")]?.fields["image"])

            let result = try await cloud.save([makeRecord("copy", ["image": fetched]), makeRecord("plain")])
            #expect(result.failed[recordID("copy")]?.code == .invalidArguments)
            #expect(result.saved[recordID("plain")] != nil)
            let resent = try await cloud.save([
                makeRecord("photo", ["image": fetched, "caption": .string("x")], tag: saved.changeTag)
            ])
            #expect(resent.failed[recordID("photo")]?.code == .invalidArguments, "nor sent back to its own record")
            #expect(Set(try await cloud.records(in: .notes).map(\.id.name)) == ["photo", "plain"])
        }
    }

    /// An update that leaves the asset field out keeps it (CKWS `update` "changes only the fields you
    /// specify"); a replace without it removes it.
    @Test(arguments: CloudUnderTest.allCases)
    func anUpdateWithoutTheFieldKeepsTheAsset(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let upload = try await cloud.uploadAsset(bytes)
            let saved = try await cloud.saveOne(makeRecord("photo", ["image": upload, "caption": .string("a")]))
            let updated = try await cloud.saveOne(makeRecord("photo", ["caption": .string("b")], tag: saved.changeTag))
            #expect(updated.fields["image"]?.assetValue == saved.fields["image"]?.assetValue)
            let replaced = try await cloud.saveOne(
                makeRecord("photo", ["caption": .string("c")], tag: updated.changeTag),
                policy: .replaceIfServerRecordUnchanged)
            #expect(replaced.fields["image"] == nil)
        }
    }

    /// Bytes the server does not have (an asset of another server, with no link) are an unknown item.
    @Test(arguments: CloudUnderTest.allCases)
    func anAssetTheServerDoesNotHaveIsUnknown(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            let stranger = try #require(
                CloudAsset(.opaque(OpaqueFieldValue(type: "ASSETID", json: #"{"fileChecksum":"nowhere","size":3}"#))))
            await expectCloudError(.unknownItem) { _ = try await cloud.downloadAsset(stranger) }
        }
    }

    /// A save carrying an asset made on a device (its file's path, as a context hands it over) uploads the
    /// bytes first, on every cloud: the record holds the upload's description and the bytes download. A
    /// file that cannot be read fails that record alone.
    @Test(arguments: CloudUnderTest.allCases)
    func aSaveOfAnAssetMadeOnADeviceUploadsItsBytes(_ kind: CloudUnderTest) async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("made-here")
            try bytes.write(to: file)
            try await kind.withCloud { cloud in
                try await cloud.createZones([.notes])
                let local = CloudAsset.localFieldValue(file: "made-here", size: Int64(bytes.count), path: file.path)
                let missing = CloudAsset.localFieldValue(file: "gone", size: 3, path: file.path + "-gone")
                let result = try await cloud.save([
                    makeRecord("photo", ["image": local]), makeRecord("lost", ["image": missing]),
                ])
                #expect(result.failed[recordID("lost")]?.code == .invalidArguments)
                let saved = try #require(result.saved[recordID("photo")]?.fields["image"])
                let asset = try #require(saved.assetValue)
                #expect(asset.fileChecksum != nil && asset.size == Int64(bytes.count))
                #expect(!text(saved).contains("receipt") && !text(saved).contains("made-here"))
                let fetched = try #require(try await cloud.fetchAll().changed[recordID("photo")]?.fields["image"])
                #expect(try await cloud.downloadAsset(try #require(fetched.assetValue)) == bytes)
                #expect(try await cloud.records(in: .notes).map(\.id.name) == ["photo"])
            }
        }
    }
}

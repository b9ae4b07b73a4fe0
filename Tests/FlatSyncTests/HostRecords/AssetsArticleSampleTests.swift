import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

// Photos sample begins
struct Photo: SyncableRecord, Codable {
    static let zone = ZoneID("Photos")
    static let recordType = "Photo"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["caption": .string, "image": .asset]

    var id: String
    var caption: String
    var image: CloudAsset?
}

func addPhoto(_ jpeg: Data, caption: String, to context: SyncContext) async throws -> Photo {
    let image = try await context.makeAsset(jpeg)  // durable in the store's directory before it returns
    let photo = Photo(id: UUID().uuidString, caption: caption, image: image)
    try await context.records(Photo.self).save(photo)  // the context uploads the bytes with the record
    return photo
}

func imageBytes(of id: String, in context: SyncContext) async throws -> Data? {
    guard let photo = await context.records(Photo.self).value(id), let image = photo.image else { return nil }
    return try await context.data(of: image, in: photo)  // downloaded now: keep a copy if you need one
}
// Photos sample ends

@Suite struct AssetsArticleSampleTests {
    @Test func thePhotoSampleRunsAcrossTwoDevices() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            var configuration = SyncContext.Configuration()
            configuration.recordTypes = [Photo.self]
            func open(_ name: String) async throws -> SyncContext {
                try await SyncContext.open(
                    directory: directory.appendingPathComponent(name),
                    account: CloudAccount(id: "user-1", transport: cloud), configuration: configuration)
            }
            let phone = try await open("phone")
            let jpeg = Data((0..<4_096).map { UInt8($0 % 199) })
            let photo = try await addPhoto(jpeg, caption: "Tides", to: phone)
            _ = try await phone.syncNow()

            let tablet = try await open("tablet")
            _ = try await tablet.syncNow()
            #expect(try await imageBytes(of: photo.id, in: tablet) == jpeg)
            #expect(await cloud.counters().requests(.downloadAsset) == 1)
            #expect(try await imageBytes(of: "no-such-photo", in: tablet) == nil)
            try await phone.close()
            try await tablet.close()
        }
    }

    @Test func theArticleShowsExactlyTheSampleThatIsCompiled() throws {
        let sample = try DocumentationSample("Photos sample", in: #filePath)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/SyncingYourOwnRecords.md"), "verbatim")
    }
}

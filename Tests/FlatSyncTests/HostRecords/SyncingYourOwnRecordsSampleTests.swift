import FlatSyncTestSupport
import FlatSyncTesting
import Testing

// Article sample begins
import FlatSync
import Foundation

/// A note on a saved article. It lives in the reading list's zone because it refers to the article's
/// entry: CloudKit allows references within one zone only.
struct ArticleNote: SyncableRecord {
    static let zone = ZoneID.readingList
    static let recordType = "Note"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "article": .reference, "text": .string, "created": .timestamp, "pinned": .int64,
    ]

    var id: String
    var articleID: String
    var text: String
    var created: Date
    var pinned = false

    init(id: String = UUID().uuidString, articleID: String, text: String, created: Date = .now) {
        self.id = id
        self.articleID = articleID
        self.text = text
        self.created = created
    }

    var fields: [String: FieldValue] {
        [
            // deleteSelf: unsaving the article deletes its notes, here and on every device.
            "article": .reference(ReadingListEntry.reference(to: articleID, action: .deleteSelf)),
            "text": .string(text),
            "created": .date(created),
            "pinned": .int(pinned ? 1 : 0),  // CloudKit has no Boolean type
        ]
    }

    init(id: String, fields: RecordFields) throws(FlatSyncError) {
        self.id = id
        articleID = try ReadingListEntry.articleID(from: fields.reference("article"))
        text = try fields.string("text")
        created = try fields.date("created")
        pinned = try fields.optional("pinned", RecordFields.bool) ?? false
    }
}

/// Opens a device with notes registered, notes a saved article, syncs, and returns the device's notes.
func noteAndSync(deviceDirectory: URL, cloud: any CloudTransport) async throws -> [ArticleNote] {
    var configuration = SyncContext.Configuration()
    configuration.recordTypes = [ArticleNote.self]  // every time the directory is opened
    let context = try await SyncContext.open(
        directory: deviceDirectory,
        account: CloudAccount(id: "user-1", transport: cloud),
        configuration: configuration
    )
    try await context.start()

    let notes = context.records(ArticleNote.self)
    try await context.readingList.add("tides-of-change")
    try await notes.save(ArticleNote(articleID: "tides-of-change", text: "Read with tea"))  // durable, then sent

    if var note = await notes.values().first {
        note.pinned = true
        try await notes.save(note)  // an update of the one field that changed
    }

    _ = try await context.syncNow()
    let all = await notes.values().sorted { $0.created < $1.created }
    try await context.close()
    return all
}
// Article sample ends

// Codable sample begins
struct Bookmark: SyncableRecord, Codable {
    static let zone = ZoneID("Bookmarks")
    static let recordType = "Bookmark"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "url": .string, "starred": .int64, "added": .timestamp, "tags": .list(.string),
    ]
    var id: String
    var url: String
    var starred = false
    var added = Date()
    var tags: [String] = []
}
// Codable sample ends

// Merge sample begins
extension Bookmark {
    static func merge(
        _ mine: Bookmark, _ server: Bookmark, ancestor: Bookmark?, changedFields: Set<String>
    ) -> Bookmark {
        var merged = fieldwiseMerge(mine, server, changedFields: changedFields)
        if changedFields.contains("tags") {
            let before = Set(ancestor?.tags ?? [])
            let added = Set(mine.tags).subtracting(before)
            let removed = before.subtracting(mine.tags)
            merged.tags = Set(server.tags).union(added).subtracting(removed).sorted()
        }
        return merged
    }
}
// Merge sample ends

@Suite struct SyncingYourOwnRecordsSampleTests {
    @Test func theSampleRunsAndTheNoteGoesWithItsArticleOnAnotherDevice() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let notes = try await noteAndSync(deviceDirectory: directory.appendingPathComponent("phone"), cloud: cloud)
            #expect(notes.map(\.text) == ["Read with tea"])
            #expect(notes.first?.pinned == true)

            var configuration = SyncContext.Configuration()
            configuration.recordTypes = [ArticleNote.self]
            let tablet = try await SyncContext.open(
                directory: directory.appendingPathComponent("tablet"),
                account: CloudAccount(id: "user-1", transport: cloud), configuration: configuration)
            _ = try await tablet.syncNow()
            #expect(await tablet.records(ArticleNote.self).values().map(\.pinned) == [true])
            try await tablet.readingList.remove("tides-of-change")
            #expect(await tablet.records(ArticleNote.self).count() == 0)
            _ = try await tablet.syncNow()
            #expect(await cloud.records(in: .readingList).isEmpty)
            try await tablet.close()
        }
    }

    @Test func theArticleShowsExactlyTheSampleThatIsCompiled() throws {
        let article = "Sources/FlatSync/FlatSync.docc/SyncingYourOwnRecords.md"
        #expect(try DocumentationSample("Article sample", in: #filePath).isShown(in: article), "verbatim")
        #expect(try DocumentationSample("Codable sample", in: #filePath).isShown(in: article), "verbatim")
        #expect(try DocumentationSample("Merge sample", in: #filePath).isShown(in: article), "verbatim")
    }

    /// A removes a tag while B adds one: the removed tag stays removed (a union brought it back), the added
    /// one is kept, on both devices.
    @Test func theMergeSampleKeepsATagRemovedOnOneDeviceRemoved() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            let configure: (inout SyncContext.Configuration) -> Void = { $0.recordTypes = [Bookmark.self] }
            let a = try await harness.device("A", start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            let added = Date(timeIntervalSince1970: 1_000)
            let bookmark = Bookmark(id: "b", url: "https://example.com", added: added, tags: ["old", "swift"])
            try await a.records(Bookmark.self).save(bookmark)
            _ = try await a.syncNow()
            _ = try await b.syncNow()
            var renamed = bookmark
            renamed.tags = ["swift"]
            try await a.records(Bookmark.self).save(renamed)
            var tagged = bookmark
            tagged.tags = ["old", "swift", "sync"]
            try await b.records(Bookmark.self).save(tagged)
            _ = try await b.syncNow()
            _ = try await a.syncNow()
            _ = try await b.syncNow()
            for device in [a, b] {
                #expect(try #require(await device.records(Bookmark.self).value("b")).tags == ["swift", "sync"])
                try await device.close()
            }
        }
    }

    /// Both devices tag the same bookmark offline: both tags are kept, and the field only one device
    /// changed takes that device's value, as the default merge would.
    @Test func theMergeSampleKeepsTagsFromBothDevices() async throws {
        try await SyncHarness.run(via: .direct) { harness in
            let configure: (inout SyncContext.Configuration) -> Void = { $0.recordTypes = [Bookmark.self] }
            let a = try await harness.device("A", start: false, configure: configure)
            let b = try await harness.device("B", start: false, configure: configure)
            let added = Date(timeIntervalSince1970: 1_000)
            try await a.records(Bookmark.self).save(Bookmark(id: "b", url: "https://example.com", added: added))
            _ = try await a.syncNow()
            _ = try await b.syncNow()
            try await a.records(Bookmark.self).save(
                Bookmark(id: "b", url: "https://example.com", starred: true, added: added, tags: ["swift"]))
            try await b.records(Bookmark.self).save(
                Bookmark(id: "b", url: "https://example.com", added: added, tags: ["sync"]))
            _ = try await a.syncNow()
            _ = try await b.syncNow()
            _ = try await a.syncNow()
            for device in [a, b] {
                let merged = try #require(await device.records(Bookmark.self).value("b"))
                #expect(merged.tags == ["swift", "sync"])
                #expect(merged.starred, "only A changed it: A's value")
                try await device.close()
            }
        }
    }

    @Test func theCodableSampleSavesAndReadsBack() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: .init(recordTypes: [Bookmark.self]))
            let bookmark = Bookmark(id: "b", url: "https://example.com", starred: true, tags: ["a"])
            try await store.records(Bookmark.self).save(bookmark)
            #expect(await store.records(Bookmark.self).value("b")?.url == "https://example.com")
            #expect(await store.records(Bookmark.self).value("b")?.starred == true)
            try await store.close()
        }
    }
}

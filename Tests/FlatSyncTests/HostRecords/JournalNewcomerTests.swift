// A photo-journal app's sync layer, written by a newcomer (the fifth, 2026-11-28) from FlatSync's README,
// DocC articles and public doc comments only, and tested as a host would: two devices of one account on an InMemoryCloud
// and a TestClock. Plain `import FlatSync` (no @testable): only what a host can reach.

import FlatSync
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Synchronization
import Testing

// MARK: - The app's records

/// The zone every Journal record lives in: entries refer (deleteSelf) to their album, and CloudKit allows
/// references within one zone only.
private let journalZone = ZoneID("Journal")

/// An album: a title and the entries that belong to it.
private struct JournalAlbum: SyncableRecord, Codable {
    static let zone = journalZone
    static let recordType = "Album"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["title": .string]

    var id: String
    var title: String
}

/// Version 1 of the app's entry: no rating.
private struct JournalEntryV1: SyncableRecord, Codable {
    static let zone = journalZone
    static let recordType = "Entry"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "album": .reference, "title": .string, "body": .string, "date": .timestamp,
        "tags": .list(.string), "thumbnail": .bytes, "favourite": .int64,
    ]

    var id: String
    var album: RecordReference  // deleteSelf: deleting the album deletes its entries
    var title: String
    var body: String
    var date: Date
    var tags: [String]
    var thumbnail: Data?
    var favourite: Bool
}

/// Version 2 of the app's entry: adds an optional rating (optional, as the Codable section requires of a
/// property added in a later version).
private struct JournalEntryV2: SyncableRecord, Codable {
    static let zone = journalZone
    static let recordType = "Entry"
    static let fieldTypes: [String: CloudSchema.FieldType] = [
        "album": .reference, "title": .string, "body": .string, "date": .timestamp,
        "tags": .list(.string), "thumbnail": .bytes, "favourite": .int64, "rating": .int64,
    ]

    var id: String
    var album: RecordReference
    var title: String
    var body: String
    var date: Date
    var tags: [String]
    var thumbnail: Data?
    var favourite: Bool
    var rating: Int?

    init(
        id: String, albumID: String, title: String, body: String = "", date: Date = journalDate,
        tags: [String] = [], thumbnail: Data? = nil, favourite: Bool = false, rating: Int? = nil
    ) {
        self.id = id
        album = JournalAlbum.reference(to: albumID, action: .deleteSelf)
        self.title = title
        self.body = body
        self.date = date
        self.tags = tags
        self.thumbnail = thumbnail
        self.favourite = favourite
        self.rating = rating
    }
}

/// A date at a whole millisecond, as the docs advise for values compared after a round trip.
private let journalDate = Date(timeIntervalSince1970: 1_780_000_000)

// MARK: - The app's sync layer

/// Opens one device of the user's account with the Journal types of one app version registered.
private func openJournalDevice(
    _ directory: URL, cloud: InMemoryCloud, clock: TestClock, entryType: any SyncableRecord.Type
) async throws -> SyncContext {
    var configuration = SyncContext.Configuration(clock: clock)
    configuration.recordTypes = [JournalAlbum.self, entryType]  // every time the directory is opened
    configuration.randomSeed = 7
    return try await SyncContext.open(
        directory: directory, account: CloudAccount(id: "journal-user", transport: cloud),
        configuration: configuration)
}

/// The user's account in a test: one cloud and one clock that every device opened on it shares.
private struct JournalAccount {
    let directory: URL
    let cloud = InMemoryCloud()
    let clock = TestClock()

    /// Opens (or reopens) the device named `name`, running the app version whose entry type is `entryType`.
    func open(_ name: String, _ entryType: any SyncableRecord.Type) async throws -> SyncContext {
        try await openJournalDevice(
            directory.appendingPathComponent(name), cloud: cloud, clock: clock, entryType: entryType)
    }
}

/// The server's copy of a Journal record, read behind the clients' backs.
private func serverRecord(_ name: String, in cloud: InMemoryCloud) async -> Record? {
    await cloud.records(in: journalZone).first { $0.id.name == name }
}

/// A view model a screen would hold: entry titles by ID, kept current from the store's change stream.
private final class JournalViewModel: Sendable {
    private let titles = Mutex<[String: String]>([:])
    private let updates = Mutex(0)
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(entries: RecordStore<JournalEntryV2>) async {
        let stream = entries.changes()  // subscribe before the first read, so nothing is missed between
        let initial = await entries.values()
        titles.withLock { titles in
            for entry in initial { titles[entry.id] = entry.title }
        }
        task.withLock {
            $0 = Task {
                for await ids in stream {
                    for id in ids {
                        let entry = await entries.value(id)  // nil: deleted
                        self.titles.withLock { $0[id] = entry?.title }
                    }
                    self.updates.withLock { $0 += 1 }
                }
            }
        }
    }

    var snapshot: [String: String] { titles.withLock { $0 } }
    var updateCount: Int { updates.withLock { $0 } }

    /// Waits until the stream ends (the context closed).
    func finished() async { await task.withLock { $0 }?.value }
}

// MARK: - Tests

@Suite("Journal, a newcomer's host app")
struct JournalNewcomerTests {

    // 1. Schema evolution: A runs v2 (rating), B still runs v1.

    @Test(.timeLimit(.minutes(1)))
    func v1DeviceEditKeepsTheRatingItDoesNotKnowAndUpgradeSeesIt() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV1.self)

            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(
                JournalEntryV2(
                    id: "entry-1", albumID: "album-1", title: "Geysir", body: "Steam everywhere",
                    tags: ["water", "heat"], favourite: true, rating: 4))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(await serverRecord("entry-1", in: cloud)?.fields["rating"] == .int(4))

            // B (v1) fetches the entry: it cannot read the rating, but its record keeps it.
            #expect(try await b.syncNow().isComplete)
            let entriesOnB = b.records(JournalEntryV1.self)
            var onB = try #require(await entriesOnB.value("entry-1"))
            #expect(onB.title == "Geysir")
            #expect(await entriesOnB.record("entry-1")?.fields["rating"] == .int(4))

            // B edits the title; the update names the title only, so the server keeps the rating.
            onB.title = "Strokkur"
            #expect(try await entriesOnB.save(onB))
            #expect(try await b.syncNow().isComplete)
            let onServer = await serverRecord("entry-1", in: cloud)
            #expect(onServer?.fields["title"] == .string("Strokkur"))
            #expect(onServer?.fields["rating"] == .int(4))

            // A still sees its rating, and B's title.
            #expect(try await a.syncNow().isComplete)
            let onA = try #require(await a.records(JournalEntryV2.self).value("entry-1"))
            #expect(onA.title == "Strokkur")
            #expect(onA.rating == 4)
            #expect(onA.tags == ["water", "heat"])
            #expect(onA.favourite)

            // B upgrades to v2: the same directory, opened with the v2 type. No fetch needed.
            try await b.close()
            let upgradedB = try await account.open("B", JournalEntryV2.self)
            let onUpgradedB = try #require(await upgradedB.records(JournalEntryV2.self).value("entry-1"))
            #expect(onUpgradedB.rating == 4)
            #expect(onUpgradedB.title == "Strokkur")
            #expect(onUpgradedB == onA)

            try await a.close()
            try await upgradedB.close()
        }
    }

    /// The same, but the two edits cross: A changes the rating while B (v1, offline) changes the title, and
    /// B's push meets A's newer version, so B's v1 merge runs over a record with a field it does not know.
    /// A v1 save that removes a field (a thumbnail set to nil) is a `replace`, which sets every field not
    /// sent to null: it must send the rating it does not know back with it.
    @Test(.timeLimit(.minutes(1)))
    func aV1SaveThatRemovesAFieldKeepsTheRatingItDoesNotKnow() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV1.self)
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(
                JournalEntryV2(
                    id: "entry-1", albumID: "album-1", title: "Geysir", thumbnail: Data([1, 2, 3]), rating: 4))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            let entriesOnB = b.records(JournalEntryV1.self)
            var onB = try #require(await entriesOnB.value("entry-1"))
            onB.thumbnail = nil
            #expect(try await entriesOnB.save(onB))
            #expect(try await b.syncNow().isComplete)
            let onServer = await serverRecord("entry-1", in: cloud)
            #expect(onServer?.fields["thumbnail"] == nil)
            #expect(onServer?.fields["rating"] == .int(4))

            #expect(try await a.syncNow().isComplete)
            let onA = try #require(await a.records(JournalEntryV2.self).value("entry-1"))
            #expect(onA.thumbnail == nil)
            #expect(onA.rating == 4)
            try await a.close()
            try await b.close()
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func crossingEditsOnV1AndV2KeepBoth() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV1.self)

            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Geysir", rating: 4))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            // Both edit before either hears of the other.
            var onA = try #require(await a.records(JournalEntryV2.self).value("entry-1"))
            onA.rating = 5
            try await a.records(JournalEntryV2.self).save(onA)
            var onB = try #require(await b.records(JournalEntryV1.self).value("entry-1"))
            onB.title = "Strokkur"
            onB.tags = ["water"]
            try await b.records(JournalEntryV1.self).save(onB)

            #expect(try await a.syncNow().isComplete)  // the rating goes first
            #expect(try await b.syncNow().isComplete)  // B's title meets A's newer version and merges

            let onServer = await serverRecord("entry-1", in: cloud)
            #expect(onServer?.fields["rating"] == .int(5))
            #expect(onServer?.fields["title"] == .string("Strokkur"))
            #expect(await b.records(JournalEntryV1.self).record("entry-1")?.fields["rating"] == .int(5))

            #expect(try await a.syncNow().isComplete)
            let merged = try #require(await a.records(JournalEntryV2.self).value("entry-1"))
            #expect(merged.rating == 5)
            #expect(merged.title == "Strokkur")
            #expect(merged.tags == ["water"])

            try await b.close()
            let upgradedB = try await account.open("B", JournalEntryV2.self)
            #expect(await upgradedB.records(JournalEntryV2.self).value("entry-1") == merged)
            try await a.close()
            try await upgradedB.close()
        }
    }

    /// B (v1) deletes the entry and saves it again before syncing (an app's Undo of a delete). A delete
    /// forgets the fields B's type does not know: the save after it makes a new record of the fields B's value
    /// holds, as it would had the delete reached the server first (SyncingYourOwnRecords: "A delete forgets
    /// them"). The newcomer expected the rating to survive; coalescing a delete and a save must not give
    /// another result than sending them one after the other.
    @Test(.timeLimit(.minutes(1)))
    func aV1DeleteThenSaveMakesANewRecordWithoutTheRatingV2Wrote() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV1.self)
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Geysir", rating: 4))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            let entriesOnB = b.records(JournalEntryV1.self)
            let deleted = try #require(await entriesOnB.value("entry-1"))
            #expect(try await entriesOnB.delete("entry-1"))
            #expect(try await entriesOnB.save(deleted))  // Undo, before B synced
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)

            #expect(await a.records(JournalEntryV2.self).value("entry-1")?.title == "Geysir")
            let ratingOnServer = await serverRecord("entry-1", in: cloud)?.fields["rating"]
            let ratingOnA = await a.records(JournalEntryV2.self).value("entry-1")?.rating
            #expect(ratingOnServer == nil)
            #expect(ratingOnA == nil)
            try await a.close()
            try await b.close()
        }
    }

    // 2. A thumbnail too large for one CloudKit record.

    @Test(.timeLimit(.minutes(1)))
    func oversizedThumbnailThrowsRecordTooLargeAtSaveAndWritesNothing() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let entries = a.records(JournalEntryV2.self)
            try await a.records(JournalAlbum.self).save(JournalAlbum(id: "album-1", title: "Iceland"))
            try await entries.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Small"))
            #expect(try await a.syncNow().isComplete)
            let requestsBefore = await cloud.counters()

            let huge = Data(repeating: 0xAB, count: 1_200_000)

            // A new entry: thrown synchronously by save(), before anything is durable.
            let created = JournalEntryV2(id: "entry-2", albumID: "album-1", title: "Panorama", thumbnail: huge)
            let createError = await #expect(throws: FlatSyncError.self) { try await entries.save(created) }
            #expect(createError?.code == .recordTooLarge)
            #expect(await entries.value("entry-2") == nil)

            // An edit of an existing entry: thrown too, and the stored value is untouched.
            var edited = try #require(await entries.value("entry-1"))
            edited.title = "Panorama"
            edited.thumbnail = huge
            let editError = await #expect(throws: FlatSyncError.self) { try await entries.save(edited) }
            #expect(editError?.code == .recordTooLarge)
            #expect(await entries.value("entry-1")?.title == "Small")
            #expect(await entries.value("entry-1")?.thumbnail == nil)

            // In a batch with a new album: all or nothing, so the album is not written either.
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-2", title: "Faroe"))
            let batchError = #expect(throws: FlatSyncError.self) {
                try batch.save(JournalEntryV2(id: "entry-3", albumID: "album-2", title: "Cliffs", thumbnail: huge))
            }
            if batchError == nil {
                // The batch took it: the error must come from apply, and write nothing.
                let applyError = await #expect(throws: FlatSyncError.self) { try await a.apply(batch) }
                #expect(applyError?.code == .recordTooLarge)
            } else {
                #expect(batchError?.code == .recordTooLarge)
            }
            #expect(await a.records(JournalAlbum.self).value("album-2") == nil)

            // Nothing is pending and nothing reaches the server.
            #expect(await a.status().pendingRecords == 0)
            let summary = try await a.syncNow()
            #expect(summary.isComplete)
            #expect(summary.sent == 0)
            #expect(await cloud.counters().recordsSaved == requestsBefore.recordsSaved)
            #expect(await cloud.records(in: journalZone).map(\.id.name).sorted() == ["album-1", "entry-1"])
            try await a.close()
        }
    }

    /// Where the limit is: a 900 kB thumbnail is fine and reaches the other device intact.
    @Test(.timeLimit(.minutes(1)))
    func largeButAllowedThumbnailSyncsIntact() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV2.self)
            let thumbnail = Data((0..<900_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Big", thumbnail: thumbnail))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(JournalEntryV2.self).value("entry-1")?.thumbnail == thumbnail)
            try await a.close()
            try await b.close()
        }
    }

    /// The local check sees only what this device holds: two devices' edits that each fit can merge into a
    /// record over the limit. Then the server refuses it at push time (limitExceeded), the change is parked,
    /// and the app's fix (a smaller value) goes through.
    @Test(.timeLimit(.minutes(1)))
    func editsThatFitAloneButNotMergedAreRefusedAtPush() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV2.self)
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Geysir"))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            var onA = try #require(await a.records(JournalEntryV2.self).value("entry-1"))
            onA.thumbnail = Data(repeating: 1, count: 600_000)
            try await a.records(JournalEntryV2.self).save(onA)
            #expect(try await a.syncNow().isComplete)

            var onB = try #require(await b.records(JournalEntryV2.self).value("entry-1"))
            onB.body = String(repeating: "x", count: 600_000)  // fits with what B knows
            try await b.records(JournalEntryV2.self).save(onB)
            let summary = try await b.syncNow()
            #expect(summary.refused.map(\.recordID.name) == ["entry-1"])
            #expect(summary.refused.first?.code == .limitExceeded)
            let merged = try #require(await b.records(JournalEntryV2.self).value("entry-1"))
            #expect(merged.thumbnail?.count == 600_000)  // the device now holds a record CloudKit will not take

            var fixed = merged
            fixed.body = "Shorter"
            try await b.records(JournalEntryV2.self).save(fixed)
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)
            #expect(await a.records(JournalEntryV2.self).value("entry-1") == fixed)
            try await a.close()
            try await b.close()
        }
    }

    // 3. Deleting an album deletes its entries on both devices.

    @Test(.timeLimit(.minutes(1)))
    func deletingAnAlbumDeletesItsEntriesEverywhere() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV2.self)

            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalAlbum(id: "album-2", title: "Faroe"))
            try batch.save((1...3).map { JournalEntryV2(id: "entry-\($0)", albumID: "album-1", title: "E\($0)") })
            try batch.save(JournalEntryV2(id: "entry-9", albumID: "album-2", title: "Other album"))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(JournalEntryV2.self).count() == 4)

            let bChanges = b.records(JournalEntryV2.self).changes()
            #expect(try await a.records(JournalAlbum.self).delete("album-1"))
            #expect(await a.records(JournalEntryV2.self).values().map(\.id) == ["entry-9"])  // at once, here
            #expect(try await a.syncNow().isComplete)
            #expect(await cloud.records(in: journalZone).map(\.id.name) == ["album-2", "entry-9"])

            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(JournalAlbum.self).value("album-1") == nil)
            #expect(await b.records(JournalEntryV2.self).values().map(\.id) == ["entry-9"])
            try await b.close()  // ends the stream
            var changed: Set<String> = []
            for await ids in bChanges { changed.formUnion(ids) }
            #expect(changed == ["entry-1", "entry-2", "entry-3"])
            try await a.close()
        }
    }

    /// B, offline, edits one entry and adds another to the album A deletes. The docs say such orphans are
    /// deleted by the device that fetches the album's delete, "so none is left anywhere".
    @Test(.timeLimit(.minutes(1)))
    func entriesEditedOrAddedOfflineInADeletedAlbumDoNotSurvive() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV2.self)

            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save((1...2).map { JournalEntryV2(id: "entry-\($0)", albumID: "album-1", title: "E\($0)") })
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            // B offline: edits entry-1, adds entry-3.
            var edited = try #require(await b.records(JournalEntryV2.self).value("entry-1"))
            edited.title = "Edited offline"
            try await b.records(JournalEntryV2.self).save(edited)
            try await b.records(JournalEntryV2.self).save(
                JournalEntryV2(id: "entry-3", albumID: "album-1", title: "Added offline"))

            // A deletes the album.
            try await a.records(JournalAlbum.self).delete("album-1")
            #expect(try await a.syncNow().isComplete)

            // One sync: B's edit recreates entry-1 (an edit beats a delete it did not see), entry-3 goes up,
            // then B fetches the album's delete and deletes both, here and on the server.
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.syncNow().isComplete)

            #expect(await cloud.records(in: journalZone).map(\.id.name) == [])
            #expect(await b.records(JournalEntryV2.self).count() == 0)
            #expect(await a.records(JournalEntryV2.self).count() == 0)
            #expect(await b.records(JournalAlbum.self).count() == 0)
            try await a.close()
            try await b.close()
        }
    }

    // 4. A change the server refuses.

    @Test(.timeLimit(.minutes(1)))
    func refusedEditIsParkedThenRetriedOrDiscarded() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV2.self)
            let events = a.events()
            let entries = a.records(JournalEntryV2.self)

            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Original"))
            try batch.save(JournalEntryV2(id: "entry-2", albumID: "album-1", title: "Other"))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)

            // The server refuses the edit of entry-1 (once), and takes entry-2's.
            await cloud.setFaultPlan(.failRecord(named: "entry-1", with: .invalidArguments))
            var one = try #require(await entries.value("entry-1"))
            one.title = "Refused edit"
            try await entries.save(one)
            var two = try #require(await entries.value("entry-2"))
            two.title = "Accepted edit"
            try await entries.save(two)

            // How the app finds out: the summary, refusedChanges(), status(), and a changeRefused event.
            let summary = try await a.syncNow()
            #expect(summary.refused.map(\.recordID) == [JournalEntryV2.recordID("entry-1")])
            #expect(summary.refused.first?.code == .invalidArguments)
            #expect(!summary.isComplete)
            #expect(await a.refusedChanges().map(\.recordID.name) == ["entry-1"])
            #expect(await a.status().refusedRecords == 1)
            #expect(await entries.value("entry-1")?.title == "Refused edit")  // kept here
            #expect(await serverRecord("entry-1", in: cloud)?.fields["title"] == .string("Original"))
            #expect(await serverRecord("entry-2", in: cloud)?.fields["title"] == .string("Accepted edit"))

            // What it can do, 1: try again (the fault is used up: as if the cause was fixed).
            let retried = try await a.syncNow()
            #expect(retried.isComplete)
            #expect(await a.refusedChanges().isEmpty)
            #expect(await serverRecord("entry-1", in: cloud)?.fields["title"] == .string("Refused edit"))

            // What it can do, 2: give up, and get the server's version back.
            await cloud.setFaultPlan(.failRecord(named: "entry-1", with: .invalidArguments))
            one = try #require(await entries.value("entry-1"))
            one.title = "Refused again"
            try await entries.save(one)
            #expect(try await a.syncNow().refused.count == 1)
            let dropped = try await a.discardRefusedChanges([JournalEntryV2.recordID("entry-1")])
            #expect(dropped == [JournalEntryV2.recordID("entry-1")])
            #expect(await entries.value("entry-1")?.title == "Refused edit")
            #expect(await a.refusedChanges().isEmpty)
            #expect(try await a.syncNow().isComplete)

            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(JournalEntryV2.self).value("entry-1")?.title == "Refused edit")

            try await a.close()
            try await b.close()
            var refusals: [RefusedChange] = []
            for await event in events {
                if case .changeRefused(let refusal) = event { refusals.append(refusal) }
            }
            #expect(refusals.map(\.recordID.name) == ["entry-1", "entry-1"])
        }
    }

    /// The realistic refusal: v2 ships before its schema (with `rating`) is deployed to production.
    @Test(.timeLimit(.minutes(1)))
    func ratingRefusedByProductionSchemaUntilV2SchemaIsDeployed() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            await cloud.setProductionSchema(CloudSchema.flatSync(adding: [JournalAlbum.self, JournalEntryV1.self]))
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV1.self)

            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Unrated"))
            try batch.save(JournalEntryV2(id: "entry-2", albumID: "album-1", title: "Rated", rating: 3))
            try await a.apply(batch)

            let summary = try await a.syncNow()
            #expect(summary.refused.map(\.recordID.name) == ["entry-2"])
            #expect(await cloud.records(in: journalZone).map(\.id.name) == ["album-1", "entry-1"])
            #expect(await a.records(JournalEntryV2.self).value("entry-2")?.rating == 3)

            // Deploy v2's schema; the next syncNow sends the parked change again.
            await cloud.setProductionSchema(CloudSchema.flatSync(adding: [JournalAlbum.self, JournalEntryV2.self]))
            #expect(try await a.syncNow().isComplete)
            #expect(await a.refusedChanges().isEmpty)
            #expect(await serverRecord("entry-2", in: cloud)?.fields["rating"] == .int(3))

            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(JournalEntryV1.self).value("entry-2")?.title == "Rated")
            try await a.close()
            try await b.close()
        }
    }

    /// A refused album delete: the album and its entries stay deleted on this device while the delete is
    /// parked, and come back as the server has them when the host discards it.
    @Test(.timeLimit(.minutes(1)))
    func refusedAlbumDeleteKeepsEntriesHiddenUntilDiscarded() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let cloud = account.cloud
            let a = try await account.open("A", JournalEntryV2.self)
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Geysir"))
            try await a.apply(batch)
            #expect(try await a.syncNow().isComplete)

            await cloud.setFaultPlan(.failRecord(named: "album-1", with: .invalidArguments))
            try await a.records(JournalAlbum.self).delete("album-1")
            let summary = try await a.syncNow()
            #expect(summary.refused.map(\.isDelete) == [true])
            #expect(await a.records(JournalEntryV2.self).count() == 0)  // still hidden here
            #expect(await cloud.records(in: journalZone).map(\.id.name) == ["album-1", "entry-1"])

            #expect(try await a.discardRefusedChanges() == [JournalAlbum.recordID("album-1")])
            #expect(await a.records(JournalAlbum.self).value("album-1")?.title == "Iceland")
            #expect(await a.records(JournalEntryV2.self).value("entry-1")?.title == "Geysir")
            #expect(try await a.syncNow().isComplete)
            try await a.close()
        }
    }

    // 5. Observation: a view model on B stays current across a sync from A.

    @Test(.timeLimit(.minutes(1)))
    func viewModelFollowsChangesFromTheOtherDevice() async throws {
        try await withTemporaryDirectory { directory in
            let account = JournalAccount(directory: directory)
            let a = try await account.open("A", JournalEntryV2.self)
            let b = try await account.open("B", JournalEntryV2.self)
            try await a.start()
            try await b.start()
            await a.waitUntilIdle()
            await b.waitUntilIdle()

            let viewModel = await JournalViewModel(entries: b.records(JournalEntryV2.self))
            #expect(viewModel.snapshot.isEmpty)

            // A writes and sends at once (started, no debounce); B is told as by a push.
            var batch = RecordBatch()
            try batch.save(JournalAlbum(id: "album-1", title: "Iceland"))
            try batch.save(JournalEntryV2(id: "entry-1", albumID: "album-1", title: "Geysir"))
            try batch.save(JournalEntryV2(id: "entry-2", albumID: "album-1", title: "Gullfoss"))
            try await a.apply(batch)
            await a.waitUntilIdle()
            await b.handleRemoteNotification(zones: [journalZone])
            await b.waitUntilIdle()
            try await yieldUntil { viewModel.snapshot == ["entry-1": "Geysir", "entry-2": "Gullfoss"] }

            // An edit on A.
            var edited = try #require(await a.records(JournalEntryV2.self).value("entry-2"))
            edited.title = "Gullfoss at dusk"
            try await a.records(JournalEntryV2.self).save(edited)
            await a.waitUntilIdle()
            await b.handleRemoteNotification(zones: [journalZone])
            await b.waitUntilIdle()
            try await yieldUntil { viewModel.snapshot["entry-2"] == "Gullfoss at dusk" }

            // A local edit on B shows at once.
            try await b.records(JournalEntryV2.self).save(
                JournalEntryV2(id: "entry-3", albumID: "album-1", title: "From B"))
            try await yieldUntil { viewModel.snapshot["entry-3"] == "From B" }

            // A deletes the album: B's view model empties after B fetches.
            await a.waitUntilIdle()
            await b.waitUntilIdle()
            _ = try await a.syncNow()
            try await a.records(JournalAlbum.self).delete("album-1")
            await a.waitUntilIdle()
            await b.handleRemoteNotification(zones: [journalZone])
            await b.waitUntilIdle()
            try await yieldUntil { viewModel.snapshot.isEmpty }

            try await b.close()
            await viewModel.finished()  // the stream ends with the context
            #expect(viewModel.snapshot.isEmpty)
            try await a.close()
        }
    }
}

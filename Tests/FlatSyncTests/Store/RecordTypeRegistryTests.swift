import Foundation
import Testing

@testable import FlatSync

/// The built-in stores are entries of the registry like a host's types: the engine finds any record's store,
/// and its merge rule, in one place.
@Suite struct RecordTypeRegistryTests {
    private static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    @Test func aBuiltInRecordFindsItsStoreAndMergesByItsRule() throws {
        let registry = try RecordTypeRegistry([ArticleNote.self])
        let older = ReadingListEntry(articleID: "a", dateAdded: Self.date, origin: 1, title: "old")
        let newer = ReadingListEntry(articleID: "a", dateAdded: Self.date + 60, origin: 2)
        let store = try #require(registry.store(of: older.record))
        #expect(store.zone == .readingList && store.recordType == ReadingListEntry.recordType)
        #expect(store.fieldTypes == CloudSchema.flatSync.recordTypes[ReadingListEntry.recordType])
        // The later save wins, whichever side holds it: the reading list's rule, not field by field.
        #expect(store.merge(older.record, newer.record, nil, ["title"]) == newer.merged(with: older).record)
        #expect(store.merge(newer.record, older.record, nil, []) == newer.merged(with: older).record)
        // The fields other clients wrote are not the store's.
        var widened = newer.record
        widened.fields["color"] = .string("red")
        #expect(store.known(widened) == newer.record)
        var broken = newer.record
        broken.fields["dateAdded"] = .string("yesterday")
        #expect(store.known(broken) == nil && store.merge(older.record, broken, nil, []) == nil)
        #expect(throws: FlatSyncError.self) { try store.check(broken) }

        let item = ReadingHistoryItem(articleID: "h", lastVisited: Self.date, readCount: 1)
        #expect(registry.store(of: item.record)?.recordType == ReadingHistoryItem.recordType)
    }

    @Test func aHostRecordFindsItsOwnTypeEvenInABuiltInZone() throws {
        let registry = try RecordTypeRegistry([ArticleNote.self])
        let note = ArticleNote(id: "n1", articleID: "a", text: "hi", created: Self.date)
        let record = Record(id: ArticleNote.recordID("n1"), type: ArticleNote.recordType, fields: note.fields)
        let store = try #require(registry.store(of: record))
        #expect(store.recordType == "Note" && store.known(record) == nil)
        // Field by field: the text this device changed stays, the rest is the server's.
        var mine = note
        mine.text = "mine"
        var theirs = note
        theirs.pinned = true
        let merged = store.merge(
            Record(id: record.id, type: "Note", fields: mine.fields),
            Record(id: record.id, type: "Note", fields: theirs.fields), nil, ["text"])
        #expect(merged?.fields["text"] == .string("mine") && merged?.fields["pinned"] == .int(1))
        // A built-in type in another zone, or a type nobody registered, has no store.
        #expect(
            RecordTypeRegistry.isBuiltIn(ReadingListEntry.recordID(for: "a"))
                && !RecordTypeRegistry.isBuiltIn(record.id))
        #expect(RecordTypeRegistry.isBuiltIn(RecordID(zone: .readingHistory, name: "rh-x")))
        let stray = Record(id: RecordID(zone: ZoneID("Elsewhere"), name: "rl-a"), type: ReadingListEntry.recordType)
        #expect(!RecordTypeRegistry.isBuiltIn(stray.id))
        #expect(registry.store(of: stray) == nil)
        #expect(registry.store(of: Record(id: record.id, type: "Unknown")) == nil)
    }

    /// CloudKit's documented rule for record type and field names: a letter, then letters, digits and _.
    @Test func recordTypeAndFieldNamesAreCloudKitNames() {
        for good in ["Note", "n", "Recipe_2", "a_b_c", "X9"] {
            #expect(RecordTypeRegistry.isCloudKitName(good), "\(good)")
        }
        for bad in ["", "_Note", "9lives", "two words", "dash-ed", "crème", "Note.", "tab\t"] {
            #expect(!RecordTypeRegistry.isCloudKitName(bad), "\(bad)")
        }
        #expect(throws: FlatSyncError.self) { try RecordTypeRegistry([BadlyNamedField.self]) }
        #expect(throws: FlatSyncError.self) { try RecordTypeRegistry([BadlyNamedType.self]) }
        for name in CloudSchema.flatSync.recordTypes.keys { #expect(RecordTypeRegistry.isCloudKitName(name)) }
        for fields in CloudSchema.flatSync.recordTypes.values {
            for key in fields.keys { #expect(RecordTypeRegistry.isCloudKitName(key), "\(key)") }
        }
    }
}

private struct BadlyNamedField: SyncableRecord {
    static let zone = ZoneID("Names")
    static let recordType = "Named"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["ok": .string, "not ok": .string]
    var id: String
    var fields: [String: FieldValue] { [:] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) { self.id = id }
}

private struct BadlyNamedType: SyncableRecord {
    static let zone = ZoneID("Names")
    static let recordType = "Bad-Type"
    static let fieldTypes: [String: CloudSchema.FieldType] = ["ok": .string]
    var id: String
    var fields: [String: FieldValue] { [:] }
    init(id: String, fields: RecordFields) throws(FlatSyncError) { self.id = id }
}

import Foundation
import Testing

@testable import FlatSync

@Suite struct RecordMappingTests {
    static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    @Test func readingListEntryMapsToTheDesignedRecord() throws {
        let entry = ReadingListEntry(articleID: "A1", dateAdded: Self.date, origin: 2, title: "Tides")
        let record = entry.record
        #expect(record.id == RecordID(zone: .readingList, name: "rl-A1"))
        #expect(record.type == "ReadingListEntry")
        #expect(
            record.fields == [
                "articleID": .string("A1"), "dateAdded": .date(Self.date), "origin": .int(2), "title": .string("Tides"),
            ])
        #expect(try ReadingListEntry(record: record) == entry)
    }

    /// A reading-list entry's record holds the entry, not a dictionary (`Record.Content`); it stands for the
    /// same fields, so it equals, hashes and maps back as the record of those fields does.
    @Test(arguments: [
        ReadingListEntry(articleID: "A1", dateAdded: date, origin: 2, title: "Tides"),
        ReadingListEntry(articleID: "a ✓ ü \u{212A}", dateAdded: .distantPast, origin: .min),
        ReadingListEntry(
            articleID: String(repeating: "é", count: 128), dateAdded: .distantFuture, origin: .max, title: ""),
        ReadingListEntry(articleID: "K", dateAdded: Date(timeIntervalSinceReferenceDate: -0.0), title: "née"),
    ])
    func aReadingListRecordHoldsItsEntryAndStandsForItsFields(entry: ReadingListEntry) throws {
        let record = entry.record
        guard let held = record.content.stored(as: ReadingListEntry.self) else {
            Issue.record("the record holds \(record.content), not the entry")
            return
        }
        #expect(held == entry)
        var expected: [String: FieldValue] = [
            "articleID": .string(entry.articleID), "dateAdded": .date(entry.dateAdded), "origin": .int(entry.origin),
        ]
        if let title = entry.title { expected["title"] = .string(title) }
        #expect(record.fields == expected)
        for key in ["articleID", "dateAdded", "origin", "title", "other"] { #expect(record[key] == expected[key]) }

        let plain = Record(id: record.id, type: record.type, fields: expected)
        #expect(record == plain && plain == record)
        #expect(record.hasSameContent(as: plain))
        #expect(Set([record, plain]).count == 1, "equal records hash alike")
        #expect(try ReadingListEntry(record: record) == entry)
        #expect(try ReadingListEntry(record: plain) == entry)

        // One field different: unequal in either form.
        var other = entry
        other.origin = entry.origin == 0 ? 1 : 0
        #expect(other.record != record && other.record != plain)
        other = entry
        other.title = entry.title == nil ? "t" : nil
        #expect(other.record != record && other.record != plain)
    }

    /// Both forms compare article IDs as `String` does, canonically equivalent ones alike (U+212A KELVIN SIGN
    /// and "K"): a record holding an entry equals the fields of the other spelling, as the fields did.
    @Test func bothFormsCompareArticleIDsAsStringDoes() {
        let kelvin = ReadingListEntry(articleID: "\u{212A}", dateAdded: Self.date)
        let latin = ReadingListEntry(articleID: "K", dateAdded: Self.date)
        let latinFields = Record(id: latin.record.id, type: latin.record.type, fields: latin.record.fields)
        #expect(kelvin.record == latin.record)
        #expect(kelvin.record == latinFields)
        #expect(Set([kelvin.record, latinFields]).count == 1)
    }

    /// The checks of the fields' path hold for a record that holds its entry too.
    @Test func aRecordHoldingAnEntryIsCheckedLikeItsFields() {
        let entry = ReadingListEntry(articleID: "A1", dateAdded: Self.date)
        let renamed = Record(
            id: RecordID(zone: .readingList, name: "rl-other"), type: ReadingListEntry.recordType,
            content: .stored(entry))
        let retyped = Record(id: entry.recordID, type: "Something", content: .stored(entry))
        let invalid = ReadingListEntry(articleID: "tab\there", dateAdded: Self.date).record
        for record in [renamed, retyped, invalid] {
            expectError(.malformedRecord) { try ReadingListEntry(record: record) }
        }
    }

    @Test func historyItemMapsToTheDesignedRecordWithFlagsOnlyWhenSet() throws {
        let item = ReadingHistoryItem(
            articleID: "A2", lastVisited: Self.date, firstSeen: Self.date.addingTimeInterval(-60), maxVersionSeen: 4,
            readCount: 3, deviceID: "phone", liking: .disliked, likingChangedAt: Self.date,
            flags: [.read, .pruningDisabled]
        )
        let record = item.record
        #expect(record.id == RecordID(zone: .readingHistory, name: "rh-A2"))
        #expect(record.type == "ReadingHistoryItem")
        #expect(record["articleRead"] == .int(1))
        #expect(record["pruningDisabled"] == .int(1))
        #expect(record["articleSeen"] == nil && record["offensive"] == nil && record["articleConsumed"] == nil)
        #expect(record["likingStatus"] == .int(2))
        #expect(record["maxVersionSeen"] == .int(4))
        #expect(record["deviceID"] == .string("phone"))
        #expect(try ReadingHistoryItem(record: record) == item)
        let bare = ReadingHistoryItem(articleID: "A3")
        #expect(bare.record.fields.keys.sorted() == ["articleID", "likingStatus", "maxVersionSeen", "readCount"])
        #expect(try ReadingHistoryItem(record: bare.record) == bare)
    }

    @Test func malformedRecordsGiveATypedError() {
        let good = ReadingListEntry(articleID: "A1", dateAdded: Self.date).record
        var missingDate = good
        missingDate.fields["dateAdded"] = nil
        var wrongType = good
        wrongType.fields["dateAdded"] = .string("yesterday")
        var wrongName = good
        wrongName.id.name = "rl-other"
        var wrongRecordType = good
        wrongRecordType.type = "Something"
        var badID = good
        badID.fields["articleID"] = .string("")
        badID.id.name = "rl-"
        for record in [missingDate, wrongType, wrongName, wrongRecordType, badID] {
            expectError(.malformedRecord) { try ReadingListEntry(record: record) }
        }
        var badLiking = ReadingHistoryItem(articleID: "x").record
        badLiking["likingStatus"] = .int(9)
        expectError(.malformedRecord) { try ReadingHistoryItem(record: badLiking) }
    }

    @Test func articleIDRulesAreEnforced() {
        #expect(ArticleID.isValid("a"))
        #expect(ArticleID.isValid(String(repeating: "é", count: 128)))  // 256 bytes
        #expect(!ArticleID.isValid(""))
        #expect(!ArticleID.isValid(String(repeating: "é", count: 129)))  // 258 bytes
        #expect(!ArticleID.isValid("tab\there"))
        #expect(!ArticleID.isValid("line\nbreak"))
        #expect(!ArticleID.isValid("nul\u{0}"))
        #expect(!ArticleID.isValid("del\u{7F}"))
    }
}

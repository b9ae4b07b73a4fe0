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

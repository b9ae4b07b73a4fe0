import Foundation
import Testing

@testable import FlatSync

/// The history's change tags, kept beside its items (``HistoryTable``): they behave as a dictionary of
/// tags by record name, whatever happens to the items, and survive a snapshot in any order.
@Suite struct HistoryChangeTagTests {
    static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// Tags that pack in a word (CloudKit's: up to 8 ASCII characters) and tags that do not.
    static let tags: [ChangeTag] = [
        ChangeTag("1a2b3c4d"), ChangeTag("z"), ChangeTag("12345678"), ChangeTag(""), ChangeTag("123456789"),
        ChangeTag("étiquette"), ChangeTag("a\u{0}b"), ChangeTag(String(repeating: "t", count: 40)),
    ]

    /// A table and a plain dictionary of tags through thousands of random steps: adding, changing and
    /// removing items (which moves them, in the table and when its order is restored) and setting and
    /// forgetting tags of records with an item, without one, and of names that are no history record.
    @Test func tagsBehaveAsADictionaryWhateverHappensToTheItems() throws {
        var random = SeededRandomNumberGenerator(seed: 23)
        var table = HistoryTable()
        var items: [String: ReadingHistoryItem] = [:]
        var tags: [String: ChangeTag] = [:]
        let articles = (0..<120).map { "article-\($0)" } + ["é", "e\u{301}x", "日本語", String(repeating: "w", count: 30)]
        let names = articles.map { "rh-" + $0 } + ["rl-article-1", "other", "rh-", ""]
        for step in 0..<8_000 {
            switch Int.random(in: 0..<12, using: &random) {
            case 0..<4:
                let id = articles.randomElement(using: &random)!
                let item = ReadingHistoryItem(
                    articleID: id,
                    lastVisited: Self.date.addingTimeInterval(Double(Int.random(in: 0..<40, using: &random))),
                    readCount: Int64(step))
                table[id] = item
                items[id] = item
            case 4..<6:
                let id = articles.randomElement(using: &random)!
                table[id] = nil
                items[id] = nil
            case 6..<10:
                let name = names.randomElement(using: &random)!
                let tag = Bool.random(using: &random) ? Self.tags.randomElement(using: &random)! : nil
                table.setChangeTag(tag, of: name)
                tags[name] = tag
            case 10:
                _ = table.orderedItems()
            default:
                // Modified in place: the item keeps its tag.
                let id = articles.randomElement(using: &random)!
                let model = items[id].map { item -> ReadingHistoryItem in
                    var item = item
                    item.readCount += 1
                    return item
                }
                table.modify(id) { item in item?.readCount += 1 }
                items[id] = model
            }
            let name = names.randomElement(using: &random)!
            #expect(table.changeTag(of: name) == tags[name], "step \(step): \(name)")
            if step % 500 == 0 || step == 7_999 {
                try Self.expect(table, holds: tags, items: items, step: step)
            }
        }
    }

    /// Checks every tag, the count and the names, what a snapshot writes, and that a snapshot of the
    /// table reads back the same.
    static func expect(
        _ table: HistoryTable, holds tags: [String: ChangeTag], items: [String: ReadingHistoryItem], step: Int
    ) throws {
        for (name, tag) in tags { #expect(table.changeTag(of: name) == tag, "step \(step): \(name)") }
        #expect(table.changeTagCount == tags.count, "step \(step)")
        #expect(Set(table.changeTagNames) == Set(tags.keys), "step \(step)")
        var written: [String: ChangeTag] = [:]
        table.forEachChangeTag { prefix, rest, tag in
            written[String(decoding: prefix, as: UTF8.self) + String(decoding: rest, as: UTF8.self)] = tag
        }
        #expect(written == tags, "step \(step)")
        // Tags of items that pack sit beside them, not apart.
        let apart = tags.filter { name, tag in
            guard name.hasPrefix("rh-"), items[String(name.dropFirst(3))] != nil else { return true }
            return ChangeTagTable.packedWord(tag) == nil
        }
        #expect(table.detachedChangeTagCount == apart.count, "step \(step)")
        var state = ZoneState<ReadingHistoryItem>()
        state.items = table
        let decoded = try SnapshotFile.decodeState(
            of: ReadingHistoryItem.self, from: try SnapshotFile(state).encoded(), path: "test")
        #expect(decoded.items == table, "step \(step)")
        #expect(decoded.changeTagsByName == tags, "step \(step)")
    }

    /// A snapshot whose tags are not in the items' order (an older one, or a hand-made one) reads the same.
    @Test func tagsInAnyOrderReadBackTheSame() throws {
        var state = ZoneState<ReadingHistoryItem>()
        for index in 0..<300 {
            state.items["a-\(index)"] = ReadingHistoryItem(articleID: "a-\(index)", firstSeen: Self.date)
            if index % 7 != 0 { state.setChangeTag(Self.tags[index % Self.tags.count], of: "rh-a-\(index)") }
        }
        state.setChangeTag(ChangeTag("gone"), of: "rh-removed")
        var file = SnapshotFile(state)
        var pairs: [(String, String)] = state.changeTagsByName.map { ($0.key, $0.value.rawValue) }
        var random = SeededRandomNumberGenerator(seed: 5)
        pairs.shuffle(using: &random)
        file.setChangeTags(pairs)
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: try file.encoded(), path: "test")
        #expect(decoded.items == state.items)
        #expect(decoded.changeTagsByName == state.changeTagsByName)
        #expect(decoded.items.detachedChangeTagCount == state.items.detachedChangeTagCount)
    }

    /// A hand-made snapshot naming an item's record twice, with a tag that packs and one that does not in
    /// either order: the later tag wins, and only one is kept.
    @Test func aNameGivenTwiceKeepsItsLaterTagWhateverItsKind() throws {
        let long = "a-long-change-tag"
        for order in [["short", long], [long, "short"], [long, long + "2"], ["one", "two"]] {
            var state = ZoneState<ReadingHistoryItem>()
            state.items["a"] = ReadingHistoryItem(articleID: "a")
            var file = SnapshotFile(state)
            file.setChangeTags(order.map { ("rh-a", $0) })
            let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: try file.encoded(), path: "t")
            #expect(decoded.changeTagsByName == ["rh-a": ChangeTag(order[1])], "\(order)")
            #expect(decoded.items.changeTagCount == 1, "\(order)")
            var expected = HistoryTable()
            expected["a"] = ReadingHistoryItem(articleID: "a")
            expected.setChangeTag(ChangeTag(order[1]), of: "rh-a")
            #expect(decoded.items == expected, "\(order)")
        }
    }

    /// The index tells records apart that `String` calls equal when one ID is ASCII and the other is not
    /// (the Kelvin sign, U+212A, and "K"): reading a snapshot must keep them apart as well, not hand the
    /// tag of the one with no item to the other's item.
    @Test func aSnapshotKeepsApartWhatTheIndexKeepsApart() throws {
        var state = ZoneState<ReadingHistoryItem>()
        state.items["K"] = ReadingHistoryItem(articleID: "K", firstSeen: Self.date)
        state.setChangeTag(ChangeTag("abc"), of: "rh-\u{212A}")
        let decoded = try SnapshotFile.decodeState(
            of: ReadingHistoryItem.self, from: try SnapshotFile(state).encoded(), path: "test")
        for name in ["rh-K", "rh-\u{212A}"] {
            #expect(decoded.changeTag(of: name) == state.changeTag(of: name), "\(name)")
        }
        #expect(decoded.items == state.items)
    }

    /// An item read from a snapshot one at a time (when its items repeat an ID) takes the tag its record
    /// has apart, as any item added does.
    @Test func anItemAddedFromASnapshotTakesItsTag() {
        var table = HistoryTable()
        table.setChangeTag(ChangeTag("t1"), of: "rh-x")
        table.setChangeTag(ChangeTag("a-long-change-tag"), of: "rh-y")
        #expect(table.detachedChangeTagCount == 2)
        table.appendFromSnapshot(ReadingHistoryItem(articleID: "x"))
        table.appendFromSnapshot(ReadingHistoryItem(articleID: "y"))
        #expect(table.changeTag(of: "rh-x") == ChangeTag("t1"))
        #expect(table.changeTag(of: "rh-y") == ChangeTag("a-long-change-tag"))
        // The packed one moved beside its item; the long one stays apart.
        #expect(table.detachedChangeTagCount == 1)
        #expect(table.changeTagCount == 2)
    }

    /// Two tables with the same items and tags are equal, and a different tag makes them differ.
    @Test func tablesCompareTheirTags() {
        var a = HistoryTable()
        var b = HistoryTable()
        for id in ["x", "y"] {
            a[id] = ReadingHistoryItem(articleID: id)
            b[id] = ReadingHistoryItem(articleID: id)
        }
        a.setChangeTag(ChangeTag("t"), of: "rh-x")
        #expect(a != b)
        // Set before the item existed, then adopted by it.
        b["x"] = nil
        b.setChangeTag(ChangeTag("t"), of: "rh-x")
        b["x"] = ReadingHistoryItem(articleID: "x")
        #expect(a == b)
        #expect(b.detachedChangeTagCount == 0)
        b.setChangeTag(ChangeTag("u"), of: "rh-y")
        #expect(a != b)
    }
}

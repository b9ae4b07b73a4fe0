import Foundation
import Testing

@testable import FlatSync

/// The compact change-tag table must behave exactly like the `[String: ChangeTag]` it replaced.
@Suite struct ChangeTagTableTests {
    /// Names at the edges of the layout: both stored prefixes, no prefix, a bare prefix, a prefix of a
    /// prefix, the inline limit (22 bytes after the prefix) and one past it, non-ASCII, and 256-byte IDs.
    static let names: [String] = [
        "rh-article-1", "rl-article-1", "article-1", "rh-", "rl-", "r", "", "rh-" + String(repeating: "a", count: 22),
        "rh-" + String(repeating: "a", count: 23), "rh-é", "rl-日本語の記事", "rh-" + String(repeating: "w", count: 256),
        "rh-" + String(repeating: "é", count: 128), "other-prefix-" + String(repeating: "x", count: 40), "rh-rh-x",
    ]

    /// Tag shapes on both sides of the 8-byte packed form: short, exactly 8 ASCII bytes with the step's
    /// digits, longer, non-ASCII, with a NUL (each prefix is followed by the step in base 36).
    static let tags: [String] = ["", "k2a3", "ab", "tag-long-enough-to-spill-", "é", "\u{0}", "x"]

    /// Every tag shape, packed or not, comes back exactly; a packed tag can be replaced by one that is not.
    @Test func everyTagShapeComesBackExactly() {
        let shapes = [
            "", "a", "k2a3b4c5", "k2a3b4c5d", "0000zzzz", "é", "caf\u{E9}", "a\u{0}b", "\u{7F}", "tag with spaces",
        ]
        var table = ChangeTagTable()
        for (index, shape) in shapes.enumerated() { table["rh-\(index)"] = ChangeTag(shape) }
        for (index, shape) in shapes.enumerated() {
            #expect(table["rh-\(index)"]?.rawValue == shape, "\(shape.debugDescription)")
        }
        // Overwrite packed with unpacked and back, then remove the first so the last (unpacked) moves.
        table["rh-1"] = ChangeTag("now-much-longer-than-eight")
        table["rh-5"] = ChangeTag("short")
        table["rh-0"] = nil
        #expect(table["rh-1"]?.rawValue == "now-much-longer-than-eight")
        #expect(table["rh-5"]?.rawValue == "short")
        #expect(table["rh-9"]?.rawValue == "tag with spaces")
        #expect(table.count == shapes.count - 1)
    }

    @Test func everyNameKeepsItsTagAndComesBackWhole() {
        var table = ChangeTagTable()
        for (index, name) in Self.names.enumerated() { table[name] = ChangeTag("t\(index)") }
        #expect(table.count == Self.names.count)
        for (index, name) in Self.names.enumerated() { #expect(table[name] == ChangeTag("t\(index)"), "\(name)") }
        #expect(Set(table.names) == Set(Self.names))
        #expect(table["rh-article-2"] == nil && table["rx-article-1"] == nil && table["RH-article-1"] == nil)
    }

    @Test func namesCompareAsStringsDo() {
        // "é" precomposed and as e + combining acute are the same `String`, so the same name.
        let composed = "rh-caf\u{E9}"
        let decomposed = "rh-cafe\u{301}"
        #expect(composed == decomposed)
        var table = ChangeTagTable()
        table[composed] = ChangeTag("one")
        #expect(table[decomposed] == ChangeTag("one"))
        table[decomposed] = ChangeTag("two")
        #expect(table.count == 1 && table[composed] == ChangeTag("two"))
        table[decomposed] = nil
        #expect(table.isEmpty && table[composed] == nil)
    }

    /// Random sets, overwrites and removals (which move the last entry into the hole) against a dictionary.
    @Test(arguments: [1, 2, 3]) func churnMatchesADictionary(seed: UInt64) {
        var random = SeededRandomNumberGenerator(seed: seed)
        var table = ChangeTagTable()
        var model: [String: ChangeTag] = [:]
        let pool = (0..<300).map { index -> String in
            switch index % 4 {
            case 0: "rh-article-\(index)"
            case 1: "rl-article-\(index)"
            case 2: "rh-記事-\(index)-" + String(repeating: "z", count: index % 30)
            default: "plain-\(index)"
            }
        }
        for step in 0..<5_000 {
            let name = pool[Int.random(in: 0..<pool.count, using: &random)]
            if Int.random(in: 0..<3, using: &random) == 0 {
                table[name] = nil
                model[name] = nil
            } else {
                let tag = ChangeTag(Self.tags[step % Self.tags.count] + String(step, radix: 36))
                table[name] = tag
                model[name] = tag
            }
            if step % 500 == 0 {
                #expect(table.count == model.count)
                #expect(pool.allSatisfy { table[$0] == model[$0] })
            }
        }
        #expect(table.count == model.count)
        #expect(pool.allSatisfy { table[$0] == model[$0] })
        #expect(Dictionary(uniqueKeysWithValues: table.map { ($0.name, $0.tag) }) == model)
    }

    @Test func equalityIgnoresOrder() {
        var forward = ChangeTagTable()
        var backward = ChangeTagTable()
        for name in Self.names { forward[name] = ChangeTag(name.isEmpty ? "empty" : name) }
        for name in Self.names.reversed() { backward[name] = ChangeTag(name.isEmpty ? "empty" : name) }
        #expect(forward == backward)
        backward["rh-article-1"] = ChangeTag("changed")
        #expect(forward != backward)
        backward["rh-article-1"] = nil
        #expect(forward != backward)
    }

    /// The snapshot writes each name from its two parts and reads it back without making a `String`.
    @Test func snapshotRoundTripKeepsEveryName() throws {
        var state = ZoneState<ReadingHistoryItem>()
        // Into the item table, whatever the name (the zone state would keep a name without the history's
        // prefix with its host records).
        for (index, name) in Self.names.enumerated() { state.items.setChangeTag(ChangeTag("tag-\(index)"), of: name) }
        let data = try SnapshotFile(state).encoded()
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "test")
        #expect(decoded.changeTagsByName == state.changeTagsByName)
        #expect(decoded.items.changeTagCount == Self.names.count)
    }

    /// A hand-made snapshot naming a record twice: the later tag wins, as it did with a dictionary.
    @Test func aNameTwiceInASnapshotKeepsTheLaterTag() throws {
        var state = ZoneState<ReadingHistoryItem>()
        state.setChangeTag(ChangeTag("b"), of: "rh-b")
        var file = SnapshotFile(state)
        file.setChangeTags([("rh-a", "first"), ("rh-b", "b"), ("rh-a", "second")])
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: try file.encoded(), path: "test")
        #expect(decoded.changeTagsByName == ["rh-a": ChangeTag("second"), "rh-b": ChangeTag("b")])
    }
}

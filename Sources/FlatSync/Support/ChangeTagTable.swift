#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Change tags by record name: a dictionary from `String` to ``ChangeTag`` in about 45 bytes per record
/// instead of about 160. The reading list keeps its records' tags in one; the history keeps its items'
/// tags beside the items, in 8 bytes each, and only the others in one (see ``HistoryTable``).
///
/// A device that synced a News-sized history knows a tag for every record. As a `[String: ChangeTag]`
/// each record cost a heap copy of its name (`rh-` and a 22-byte article ID is too long for a small
/// string), a hash-table bucket of two strings, and a table twice as large as needed after each doubling.
/// Here a name's `rl-` or `rh-` prefix is kept as one byte and the rest as a ``CompactString`` (inline up to 22 bytes), the tags sit in one
/// array beside the names — 8 bytes each when a tag is at most 8 ASCII characters, as CloudKit's are —
/// and a ``SlotIndex`` finds them: no allocation per record.
///
/// Names compare as ``CompactString``s do: as `String`s (canonical equivalence), like the dictionary this
/// replaces, except that a name whose rest is ASCII equals only the same bytes.
package struct ChangeTagTable: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// Prefixes kept as their index instead of their bytes; index 0 is no prefix.
    private static let prefixes: [StaticString] = ["", "rl-", "rh-"]

    /// Each name without its prefix, by position.
    private var rests: [CompactString] = []
    /// Each name's prefix, as an index into ``prefixes``, by position.
    private var prefixIndexes: [UInt8] = []
    /// Each name's tag, by position.
    private var tags = PackedTags()
    private var index = SlotIndex()

    package typealias Key = String
    package typealias Value = ChangeTag

    /// An empty table.
    package init() {}

    /// A table of these names and tags; a later duplicate name wins.
    package init(dictionaryLiteral elements: (String, ChangeTag)...) {
        for (name, tag) in elements { self[name] = tag }
    }

    /// The number of names with a tag.
    package var count: Int { tags.count }

    /// True when no name has a tag.
    package var isEmpty: Bool { tags.isEmpty }

    /// The tag of the record named `name`; setting nil forgets it.
    package subscript(name: String) -> ChangeTag? {
        get {
            var name = name
            return name.withUTF8 { tag(nameUTF8: UnsafeRawBufferPointer($0)) }
        }
        set {
            var name = name
            name.withUTF8 { utf8 in
                let key = SplitName(UnsafeRawBufferPointer(utf8))
                if let newValue {
                    update(newValue, for: key)
                } else if case (let position?, let slot?) = find(key) {
                    remove(at: position, slot: slot)
                }
            }
        }
    }

    /// The tag of the record whose name is these UTF-8 bytes (valid), found without making a `String`.
    package func tag(nameUTF8 utf8: UnsafeRawBufferPointer) -> ChangeTag? {
        find(SplitName(utf8)).position.map { tags[$0] }
    }

    /// Builds a table from a snapshot's names and tags: appends them all, then builds the index in one
    /// pass in slot order (see ``SlotIndex/build(hashes:same:)``) rather than at random.
    package struct SnapshotLoader {
        private var table = ChangeTagTable()
        private var hashes: [UInt32] = []

        /// A loader with room for about `count` names.
        package init(count: Int) {
            table.rests.reserveCapacity(count)
            table.prefixIndexes.reserveCapacity(count)
            table.tags.reserveCapacity(count)
            hashes.reserveCapacity(count)
        }

        /// A tag as a snapshot holds it (its UTF-8 bytes, valid), packed without a `String` when it fits.
        package struct Tag {
            fileprivate let packed: PackedTags.Entry

            package init(utf8: UnsafeRawBufferPointer) { packed = PackedTags.Entry(utf8: utf8) }

            /// The tag packed in a word (see ``ChangeTagTable/packedWord(_:)``), nil when it does not pack.
            package var word: UInt64? {
                if case .packed(let word) = packed, word != 0 { return word }
                return nil
            }

            /// The tag.
            package var tag: ChangeTag {
                switch packed {
                case .packed(let word): return PackedTags.unpack(word)
                case .whole(let tag): return tag
                }
            }
        }

        /// Adds a tag and the name of its record (`utf8`, valid UTF-8; `isASCII` says whether every byte
        /// is), without making a `String` of the name.
        package mutating func append(_ tag: Tag, nameUTF8 utf8: UnsafeRawBufferPointer, isASCII: Bool) {
            let name = SplitName(utf8, isASCII: isASCII)
            hashes.append(name.hash)
            table.rests.append(CompactString(validUTF8: name.rest))
            table.prefixIndexes.append(name.prefixIndex)
            table.tags.append(tag.packed)
        }

        /// The table. A name that came twice (no snapshot this code wrote has one) keeps its later tag.
        package consuming func finish() -> ChangeTagTable {
            var table = self.table
            let (rests, prefixes) = (table.rests, table.prefixIndexes)
            if table.index.build(hashes: hashes, same: { rests[$0] == rests[$1] && prefixes[$0] == prefixes[$1] }) {
                return table
            }
            var deduplicated = ChangeTagTable()
            for position in 0..<table.count { deduplicated[table.name(at: position)] = table.tags[position] }
            return deduplicated
        }
    }

    /// Every name with a tag.
    package var names: [String] { map(\.name) }

    /// A tag as one nonzero word — its bytes, zero-padded, when it has at most 8 ASCII bytes and no NUL, as
    /// CloudKit's tags do — or nil when it does not pack (an empty tag does not either, so that 0 can mean
    /// no tag to a table that keeps words).
    package static func packedWord(_ tag: ChangeTag) -> UInt64? {
        PackedTags.pack(tag).flatMap { $0 == 0 ? nil : $0 }
    }

    /// The word of ``packedWord(_:)`` for the tag whose UTF-8 bytes are `utf8`, without making a `String`.
    package static func packedWord(utf8: UnsafeRawBufferPointer) -> UInt64? {
        PackedTags.pack(utf8).flatMap { $0 == 0 ? nil : $0 }
    }

    /// The tag a word of ``packedWord(_:)`` holds.
    package static func tag(packedIn word: UInt64) -> ChangeTag {
        PackedTags.unpack(word)
    }

    /// Calls `body` with each name, in two parts (prefix and rest, whose bytes follow one another in the
    /// name), and its tag: for writing the names without making a `String` of each.
    package func forEachName(
        _ body: (_ prefix: UnsafeRawBufferPointer, _ rest: UnsafeRawBufferPointer, ChangeTag) -> Void
    ) {
        for position in 0..<count {
            let prefix = Self.prefixes[Int(prefixIndexes[position])]
            let prefixBytes = UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
            rests[position].withUTF8 { body(prefixBytes, $0, tags[position]) }
        }
    }

    // MARK: - Sequence

    /// The names and tags, in no particular order.
    package struct Iterator: IteratorProtocol {
        fileprivate let table: ChangeTagTable
        fileprivate var position = 0

        package mutating func next() -> (name: String, tag: ChangeTag)? {
            guard position < table.count else { return nil }
            defer { position += 1 }
            return (table.name(at: position), table.tags[position])
        }
    }

    package func makeIterator() -> Iterator { Iterator(table: self) }

    package var underestimatedCount: Int { count }

    // MARK: - Equality

    /// Equal when both hold the same names with the same tags, whatever their order.
    package static func == (lhs: ChangeTagTable, rhs: ChangeTagTable) -> Bool {
        lhs.count == rhs.count && lhs.allSatisfy { rhs[$0.name] == $0.tag }
    }

    // MARK: - Storage

    /// A name split into its prefix's index and the rest of its bytes, with the rest's hash.
    private struct SplitName {
        let prefixIndex: UInt8
        let rest: UnsafeRawBufferPointer
        let isASCII: Bool
        let hash: UInt32

        /// `isASCII`, when the caller knows it, saves a scan: the prefixes are ASCII, so the rest is ASCII
        /// exactly when the whole name is.
        init(_ utf8: UnsafeRawBufferPointer, isASCII: Bool? = nil) {
            var prefixIndex: UInt8 = 0
            var rest = utf8
            for candidate in 1..<ChangeTagTable.prefixes.count {
                let prefix = ChangeTagTable.prefixes[candidate]
                let length = prefix.utf8CodeUnitCount
                if utf8.count >= length && memcmp(utf8.baseAddress!, prefix.utf8Start, length) == 0 {
                    prefixIndex = UInt8(candidate)
                    rest = UnsafeRawBufferPointer(rebasing: utf8[length...])
                    break
                }
            }
            self.prefixIndex = prefixIndex
            self.rest = rest
            self.isASCII = isASCII ?? CompactString.isASCII(rest)
            hash = ChangeTagTable.hash(prefixIndex: prefixIndex, rest: rest, isASCII: self.isASCII)
        }
    }

    /// The hash of a name: the history table's hash of the rest (canonical for non-ASCII), mixed with
    /// the prefix.
    private static func hash(prefixIndex: UInt8, rest: UnsafeRawBufferPointer, isASCII: Bool) -> UInt32 {
        HistoryTable.hash(utf8: rest, isASCII: isASCII) ^ (UInt32(prefixIndex) &* 0x9E37_79B9)
    }

    private func hash(at position: Int) -> UInt32 {
        rests[position].withUTF8 {
            Self.hash(prefixIndex: prefixIndexes[position], rest: $0, isASCII: CompactString.isASCII($0))
        }
    }

    private func name(at position: Int) -> String {
        String(describing: Self.prefixes[Int(prefixIndexes[position])]) + rests[position].string
    }

    /// True when the entry at `position` of `prefixIndexes` and `rests` is the name `key` (static, so that
    /// it can be called while the index is being changed).
    @inline(__always)
    private static func holds(
        _ key: SplitName, at position: Int, _ prefixIndexes: [UInt8], _ rests: [CompactString]
    ) -> Bool {
        prefixIndexes[position] == key.prefixIndex
            && rests[position].equals(utf8: key.rest, otherIsASCII: key.isASCII)
    }

    private func find(_ key: SplitName) -> (position: Int?, slot: Int?) {
        index.find(hash: key.hash) { Self.holds(key, at: $0, prefixIndexes, rests) }
    }

    private mutating func update(_ tag: ChangeTag, for key: SplitName) {
        let found = index.findOrInsert(hash: key.hash, position: tags.count) {
            Self.holds(key, at: $0, prefixIndexes, rests)
        }
        if let position = found {
            tags[position] = tag
        } else {
            rests.append(CompactString(validUTF8: key.rest))
            prefixIndexes.append(key.prefixIndex)
            tags.append(tag)
        }
    }

    /// Removes the entry at `position`; the last entry fills its place.
    private mutating func remove(at position: Int, slot: Int) {
        index.remove(slot: slot)
        let last = tags.count - 1
        if position != last {
            index.move(hash: hash(at: last), from: last, to: position)
            rests.swapAt(position, last)
            prefixIndexes.swapAt(position, last)
            tags.moveLast(to: position)
        }
        rests.removeLast()
        prefixIndexes.removeLast()
        tags.removeLast()
    }
}

/// Change tags by position, 8 bytes each: a tag of at most 8 ASCII bytes without a NUL (CloudKit's are
/// 8 letters and digits) is those bytes, zero-padded; any other tag is kept whole in a side table, its
/// word a marker no packed tag can be (packed bytes are all below 0x80).
private struct PackedTags: Sendable {
    private var words: [UInt64] = []
    private var unpacked: [Int: ChangeTag] = [:]
    private static let unpackedMarker = UInt64.max

    var count: Int { words.count }
    var isEmpty: Bool { words.isEmpty }

    mutating func reserveCapacity(_ count: Int) { words.reserveCapacity(count) }

    subscript(position: Int) -> ChangeTag {
        get {
            let word = words[position]
            if word == Self.unpackedMarker { return unpacked[position]! }
            return Self.unpack(word)
        }
        set {
            if let word = Self.pack(newValue) {
                words[position] = word
                unpacked[position] = nil
            } else {
                words[position] = Self.unpackedMarker
                unpacked[position] = newValue
            }
        }
    }

    mutating func append(_ tag: ChangeTag) {
        words.append(0)
        self[words.count - 1] = tag
    }

    /// Puts the last tag at `position`, over the one there; the last place is then left for
    /// ``removeLast()``.
    mutating func moveLast(to position: Int) {
        let last = words.count - 1
        words[position] = words[last]
        unpacked[position] = unpacked.removeValue(forKey: last)
    }

    mutating func removeLast() {
        unpacked[words.count - 1] = nil
        words.removeLast()
    }

    /// A tag packed, or whole when it does not pack.
    enum Entry {
        case packed(UInt64)
        case whole(ChangeTag)

        /// The tag whose UTF-8 bytes are `utf8` (valid UTF-8), without making a `String` when it packs.
        init(utf8: UnsafeRawBufferPointer) {
            if let word = PackedTags.pack(utf8) {
                self = .packed(word)
            } else {
                self = .whole(ChangeTag(rawValue: String(decoding: utf8, as: UTF8.self)))
            }
        }
    }

    mutating func append(_ entry: Entry) {
        switch entry {
        case .packed(let word): words.append(word)
        case .whole(let tag): append(tag)
        }
    }

    /// The tag whose bytes a packed word holds.
    static func unpack(_ word: UInt64) -> ChangeTag {
        var bytes = word.littleEndian
        return withUnsafeBytes(of: &bytes) { raw in
            ChangeTag(rawValue: String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self))
        }
    }

    /// The tag's bytes as a word, or nil when it does not fit.
    static func pack(_ tag: ChangeTag) -> UInt64? {
        var string = tag.rawValue
        return string.withUTF8 { pack(UnsafeRawBufferPointer($0)) }
    }

    @inline(__always)
    fileprivate static func pack(_ utf8: UnsafeRawBufferPointer) -> UInt64? {
        guard utf8.count <= 8 else { return nil }
        var word: UInt64 = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte != 0, byte < 0x80 else { return nil }
            word |= UInt64(byte) << UInt64(index * 8)
        }
        return word
    }
}

/// The reading history's items: one array of compact ``ReadingHistoryItem``s and an open-addressing index
/// over it, kept in the order ``ReadingHistory/items()`` returns (newest first), so that a read hands out
/// the array itself instead of a sorted copy.
///
/// Memory: 72 bytes an item in the array (no allocation per item for article IDs of up to 22 bytes, see
/// ``CompactString``; device IDs shared, see ``DeviceName``), 8 for its record's change tag (see "Change
/// tags" below) and 8 to 10 in the index, a sixth of what a `[String: ReadingHistoryItem]` and a
/// `[String: ChangeTag]` take.
///
/// Order is restored lazily. A mutation that moves an item in the order (a visit makes it the newest) or
/// that appends or removes one only marks the positions it disturbed; the items at unmarked positions stay
/// in order among themselves. ``orderedItems()`` then sorts the marked items and merges them in, moving
/// each item at most once. A read right after opening finds a snapshot written in order and does nothing.
///
/// The index maps a 32-bit hash of the article ID to a position. Article IDs are hashed by their bytes when
/// they are ASCII, and through `String`'s hashing otherwise, so that canonically equivalent IDs that are not
/// ASCII find each other as they do as `String`s; an ASCII ID finds only its own bytes (see
/// ``CompactString``).
package struct HistoryTable: ItemTable {
    package typealias Item = ReadingHistoryItem

    /// The items; newest first at every position not marked in `disordered`.
    private var items: [ReadingHistoryItem] = []
    /// Open addressing with linear probing: 0 is empty, else the article ID's hash in the high 32 bits and
    /// the item's position + 1 in the low 32. Its count is a power of two, at most 80 % full.
    private var index = SlotIndex()
    /// A bit per position whose item may be out of order.
    private var disordered: [UInt64] = []
    private var disorderedCount = 0
    /// The last position known to be in order (for appends in order, as a snapshot's), -1 when there is
    /// none, or nil when unknown.
    private var lastOrderedPosition: Int? = -1
    /// The change tag of each item's record, by position (it moves with the item): 0 for none, the tag
    /// packed in a word (``ChangeTagTable/packedWord(_:)``), or ``longTagMarker`` when the tag does not pack
    /// and `otherTags` holds it. See "Change tags" below.
    private var tagWords: [UInt64] = []
    /// The tags of records with no item here (a removed item's, one fetched before its item), and tags
    /// that do not pack.
    private var otherTags = ChangeTagTable()

    package init() {}

    package var count: Int { items.count }

    package var keys: [String] { items.map(\.articleID) }

    /// Every item, in the table's current order (newest first only after ``orderedItems()``).
    package var values: [ReadingHistoryItem] { items }

    /// True when every item is in order, so ``orderedItems()`` has nothing to do.
    package var isOrdered: Bool { disorderedCount == 0 }

    /// Makes room for `capacity` items, growing by at least half of what there is room for now, so that
    /// batch after batch still grows the array a geometric number of times.
    package mutating func reserveCapacity(_ capacity: Int) {
        if capacity > items.capacity { items.reserveCapacity(max(capacity, items.capacity + items.capacity / 2)) }
        index.grow(toHold: capacity)
    }

    // MARK: - Reading

    package subscript(articleID: String) -> ReadingHistoryItem? {
        get {
            find(articleID).position.map { items[$0] }
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: articleID)
            } else {
                removeValue(forKey: articleID)
            }
        }
    }

    /// Every item, newest first (`lastVisited`, else `firstSeen`; ties by article ID, descending), after
    /// putting the table in that order. The array is the table's own: returning it copies nothing, and the
    /// table copies it only if it changes while the caller still holds it.
    package mutating func orderedItems() -> [ReadingHistoryItem] {
        restoreOrder()
        return items
    }

    // MARK: - Changing

    @discardableResult
    package mutating func updateValue(_ item: ReadingHistoryItem, forKey articleID: String) -> ReadingHistoryItem? {
        assert(item.articleID == articleID, "an item is stored under its own article ID")
        let found = find(articleID)
        if let position = found.position {
            let old = items[position]
            items[position] = item
            if old.recencyTime != item.recencyTime { markDisordered(position) }
            return old
        }
        append(item, hash: found.hash)
        return nil
    }

    package mutating func modify<R>(_ articleID: String, _ body: (inout ReadingHistoryItem?) -> R) -> R {
        let found = find(articleID)
        var item = found.position.map { items[$0] }
        let result = body(&item)
        // The item is moved into the table (`take()`), not copied: a switch over `(position, item)` copied
        // it into the tuple and released it again, for every change of a burst.
        if let position = found.position {
            if let newTime = item?.recencyTime {
                let oldTime = items[position].recencyTime
                items[position] = item.take()!
                if oldTime != newTime { markDisordered(position) }
            } else {
                remove(at: position, slot: found.slot!)
            }
        } else if case .some = item {
            assert(item?.articleID == articleID, "an item is stored under its own article ID")
            append(item.take()!, hash: found.hash)
        }
        return result
    }

    @discardableResult
    package mutating func removeValue(forKey articleID: String) -> ReadingHistoryItem? {
        let found = find(articleID)
        guard let position = found.position, let slot = found.slot else { return nil }
        return remove(at: position, slot: slot)
    }

    /// Removes the item at `position`, whose index entry is `slot`.
    @discardableResult
    private mutating func remove(at position: Int, slot: Int) -> ReadingHistoryItem {
        index.remove(slot: slot)
        let last = items.count - 1
        let removed: ReadingHistoryItem
        if position == last {
            detachTag(at: last)
            removed = items.removeLast()
            tagWords.removeLast()
            clearDisordered(last)
        } else {
            // The last item fills the hole: update its slot, and it is out of order there.
            index.move(hash: Self.hash(of: items[last].compactArticleID), from: last, to: position)
            detachTag(at: position)
            removed = items[position]
            items[position] = items.removeLast()
            tagWords[position] = tagWords.removeLast()
            clearDisordered(last)
            markDisordered(position)
        }
        if lastOrderedPosition.map({ $0 >= items.count }) ?? false { lastOrderedPosition = nil }
        return removed
    }

    /// Builds a table from a snapshot's items, which come newest first: each stays in order when it is older
    /// than the one before. The index is built once all are in, in slot order rather than item by item,
    /// which would miss the cache at nearly every slot.
    /// Should two items have the same article ID, the later replaces the earlier, as one by one.
    package struct SnapshotLoader {
        private var table = HistoryTable()
        private var hashes: [UInt32] = []

        /// A loader for `count` items.
        package init(count: Int) {
            table.items.reserveCapacity(count)
            table.tagWords.reserveCapacity(count)
            hashes.reserveCapacity(count)
        }

        /// Appends the next item of the snapshot.
        package mutating func append(_ item: consuming ReadingHistoryItem) {
            hashes.append(HistoryTable.hash(of: item.compactArticleID))
            table.appendInOrder(item)
        }

        /// The table, indexed.
        package consuming func finish() -> HistoryTable {
            var table = self.table
            if !table.buildIndex(hashes: hashes) {
                // Duplicates: a snapshot this code wrote has none, but take it one item at a time anyway.
                let all = table.items
                table = HistoryTable()
                for item in all { table.appendFromSnapshot(item) }
            }
            return table
        }
    }

    /// Fills an empty index from every item's hash; false on a duplicate ID.
    private mutating func buildIndex(hashes: [UInt32]) -> Bool {
        let items = self.items
        return index.build(hashes: hashes) { items[$0].compactArticleID == items[$1].compactArticleID }
    }

    /// Appends an item read from a snapshot, whose items come newest first: it stays in order when it is
    /// older than the one before. An item whose article is already in the table replaces it.
    package mutating func appendFromSnapshot(_ item: ReadingHistoryItem) {
        let hash = Self.hash(of: item.compactArticleID)
        // One walk along the probe sequence: it ends at the item already there, or at the empty slot the
        // new one takes.
        let found = index.findOrInsert(hash: hash, position: items.count) {
            items[$0].compactArticleID == item.compactArticleID
        }
        if let position = found {
            items[position] = item
            markDisordered(position)
        } else {
            appendInOrder(item)
            adoptTag(at: items.count - 1)
        }
    }

    private mutating func append(_ item: consuming ReadingHistoryItem, hash: UInt32) {
        index.grow(toHold: items.count + 1)
        index.insert(hash: hash, position: items.count)
        appendInOrder(item)
        adoptTag(at: items.count - 1)
    }

    /// Appends an item whose slot is in place, marking it out of order unless it follows the last item
    /// known to be in order.
    private mutating func appendInOrder(_ item: consuming ReadingHistoryItem) {
        let position = items.count
        if lastOrderedPosition == nil && disorderedCount == 0 { lastOrderedPosition = position - 1 }
        let inOrder: Bool
        if let previous = lastOrderedPosition {
            if previous < 0 {
                inOrder = true
            } else {
                // precedes(items[previous], item), reading the stored item in place rather than copying it.
                let (before, time) = (items[previous].recencyTime, item.recencyTime)
                inOrder = before != time ? before > time : item.compactArticleID < items[previous].compactArticleID
            }
        } else {
            inOrder = false
        }
        items.append(item)
        tagWords.append(0)
        if inOrder {
            lastOrderedPosition = position
        } else {
            markDisordered(position)
        }
    }

    // MARK: - Order

    /// True when `a` comes before `b` in ``orderedItems()``: newer first, then the greater article ID.
    @inline(__always)
    static func precedes(_ a: ReadingHistoryItem, _ b: ReadingHistoryItem) -> Bool {
        let (ta, tb) = (a.recencyTime, b.recencyTime)
        if ta != tb { return ta > tb }
        return b.compactArticleID < a.compactArticleID
    }

    private mutating func markDisordered(_ position: Int) {
        let (word, bit) = (position >> 6, UInt64(1) << UInt64(position & 63))
        if word >= disordered.count { disordered += repeatElement(0, count: word + 1 - disordered.count) }
        guard disordered[word] & bit == 0 else { return }
        disordered[word] |= bit
        disorderedCount += 1
        if lastOrderedPosition == position { lastOrderedPosition = nil }
    }

    private mutating func clearDisordered(_ position: Int) {
        let (word, bit) = (position >> 6, UInt64(1) << UInt64(position & 63))
        guard word < disordered.count, disordered[word] & bit != 0 else { return }
        disordered[word] &= ~bit
        disorderedCount -= 1
    }

    private func isDisordered(_ position: Int) -> Bool {
        let word = position >> 6
        return word < disordered.count && disordered[word] & (UInt64(1) << UInt64(position & 63)) != 0
    }

    /// Sorts the marked items and merges them with the unmarked ones, which are in order already; each
    /// item moves at most once, and the index keeps its slots (only their positions change).
    private mutating func restoreOrder() {
        guard disorderedCount > 0 else { return }
        let count = items.count
        let newPosition = items.withUnsafeBufferPointer { items in
            var marked: [Int32] = []
            marked.reserveCapacity(disorderedCount)
            for position in 0..<count where isDisordered(position) { marked.append(Int32(position)) }
            marked.sort { Self.precedes(items[Int($0)], items[Int($1)]) }
            // Merge the unmarked positions (in order already) with the sorted marked ones.
            var newPosition = [Int32](repeating: 0, count: count)
            var next: Int32 = 0
            var nextMarked = 0
            for position in 0..<count where !isDisordered(position) {
                while nextMarked < marked.count && Self.precedes(items[Int(marked[nextMarked])], items[position]) {
                    newPosition[Int(marked[nextMarked])] = next
                    next += 1
                    nextMarked += 1
                }
                newPosition[position] = next
                next += 1
            }
            for marked in marked[nextMarked...] {
                newPosition[Int(marked)] = next
                next += 1
            }
            return newPosition
        }
        Self.permute(&items, to: newPosition)
        Self.permute(&tagWords, to: newPosition)
        index.renumber { Int(newPosition[$0]) }
        disordered = []
        disorderedCount = 0
        lastOrderedPosition = count - 1
    }

    /// Moves each element to `newPosition[oldPosition]`, following the permutation's cycles in place.
    private static func permute<Element>(_ items: inout [Element], to newPosition: [Int32]) {
        var done = [Bool](repeating: false, count: items.count)
        items.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!
            for start in 0..<buffer.count where !done[start] {
                done[start] = true
                var destination = Int(newPosition[start])
                guard destination != start else { continue }
                // Carry the item from `start` along its cycle until the cycle closes at `start`.
                var carried = (base + start).move()
                while true {
                    done[destination] = true
                    if destination == start {
                        (base + start).initialize(to: carried)
                        break
                    }
                    let displaced = (base + destination).move()
                    (base + destination).initialize(to: carried)
                    carried = displaced
                    destination = Int(newPosition[destination])
                }
            }
        }
    }

    // MARK: - Index

    /// The 32-bit hash of an article ID's UTF-8 bytes (see the type's documentation).
    static func hash(utf8: UnsafeRawBufferPointer, isASCII: Bool) -> UInt32 {
        guard isASCII else {
            let hash = String(decoding: utf8, as: UTF8.self).hashValue
            return UInt32(truncatingIfNeeded: hash ^ (hash >> 32))
        }
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 &* UInt64(utf8.count &+ 1)
        var index = 0
        while index + 8 <= utf8.count {
            h = mix(h ^ utf8.loadUnaligned(fromByteOffset: index, as: UInt64.self).littleEndian)
            index += 8
        }
        if index < utf8.count {
            var tail: UInt64 = 0
            var shift: UInt64 = 0
            while index < utf8.count {
                tail |= UInt64(utf8[index]) << shift
                shift += 8
                index += 1
            }
            h = mix(h ^ tail)
        }
        h ^= h >> 33
        h &*= 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        return UInt32(truncatingIfNeeded: h)
    }

    @inline(__always)
    private static func mix(_ value: UInt64) -> UInt64 {
        let product = value &* 0x87C3_7B91_1142_53D5
        return (product << 31 | product >> 33) &* 0x4CF5_AD43_2745_937F
    }

    static func hash(of id: CompactString) -> UInt32 {
        id.withUTF8 { hash(utf8: $0, isASCII: CompactString.isASCII($0)) }
    }

    /// The position of an article's item (and its slot), or nil with the hash to insert it under.
    private func find(_ articleID: String) -> (position: Int?, slot: Int?, hash: UInt32) {
        var key = articleID
        return key.withUTF8 { utf8 in
            let raw = UnsafeRawBufferPointer(utf8)
            return find(utf8: raw, isASCII: CompactString.isASCII(raw))
        }
    }

    /// ``find(_:)`` for an article ID given as its UTF-8 bytes.
    private func find(utf8: UnsafeRawBufferPointer, isASCII: Bool) -> (position: Int?, slot: Int?, hash: UInt32) {
        let hash = Self.hash(utf8: utf8, isASCII: isASCII)
        let (position, slot) = index.find(hash: hash) {
            items[$0].compactArticleID.equals(utf8: utf8, otherIsASCII: isASCII)
        }
        return (position, slot, hash)
    }

    private func find(_ id: CompactString, hash: UInt32) -> (position: Int?, slot: Int?) {
        index.find(hash: hash) { items[$0].compactArticleID == id }
    }
}

extension HistoryTable {
    /// Equal when both hold the same items by article ID, whatever their order, and the same change tags.
    package static func == (lhs: HistoryTable, rhs: HistoryTable) -> Bool {
        // Where a tag is kept follows from the items and the tags alone, so equal tables keep theirs alike.
        lhs.count == rhs.count && lhs.otherTags == rhs.otherTags
            && lhs.items.indices.allSatisfy { position in
                let item = lhs.items[position]
                return rhs.find(item.compactArticleID, hash: hash(of: item.compactArticleID)).position.map {
                    rhs.items[$0] == item && rhs.tagWords[$0] == lhs.tagWords[position]
                }
                    ?? false
            }
    }
}

// MARK: - Change tags

/// The change tags of the history's records: each item's beside it, by position, in 8 bytes, rather than
/// in a ``ChangeTagTable`` of their own (a copy of each record name, an index entry and the tag: about
/// 45 bytes a record).
///
/// Where a tag is kept: a record named for an item here (`rh-` and its article ID) keeps its tag in
/// `tagWords` at the item's position when the tag packs in a word, else in `otherTags` with the marker in
/// its word; a record with no item here keeps its tag in `otherTags`. Removing an item moves its tag to
/// `otherTags`, and an item added for a name that has a tag there takes it back, so a tag is in one place
/// only, and that place follows from the items and the tags alone.
extension HistoryTable {
    /// The word of an item whose tag does not pack (`otherTags` holds it). No packed word has a byte of
    /// 0x80 or more.
    private static let longTagMarker = UInt64.max

    /// The change tag of the record named `name`, with an item here or not.
    package func changeTag(of name: String) -> ChangeTag? {
        guard let position = position(ofRecordName: name) else { return otherTags[name] }
        switch tagWords[position] {
        case 0: return nil
        case Self.longTagMarker: return otherTags[name]
        case let word: return ChangeTagTable.tag(packedIn: word)
        }
    }

    /// Sets the change tag of the record named `name`, or forgets it (nil).
    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) {
        guard let position = position(ofRecordName: name) else {
            otherTags[name] = tag
            return
        }
        if tagWords[position] == Self.longTagMarker { otherTags[name] = nil }
        guard let tag else {
            tagWords[position] = 0
            return
        }
        if let word = ChangeTagTable.packedWord(tag) {
            tagWords[position] = word
        } else {
            tagWords[position] = Self.longTagMarker
            otherTags[name] = tag
        }
    }

    /// How many tags are kept apart from the items' words: records with no item here, and tags that do not
    /// pack (tests check where tags are kept).
    package var detachedChangeTagCount: Int { otherTags.count }

    /// How many records have a tag.
    package var changeTagCount: Int {
        tagWords.reduce(0) { $0 + ($1 != 0 && $1 != Self.longTagMarker ? 1 : 0) } + otherTags.count
    }

    /// The name of every record with a tag.
    package var changeTagNames: [String] {
        var names: [String] = []
        forEachChangeTag { prefix, rest, _ in
            names.append(String(decoding: prefix, as: UTF8.self) + String(decoding: rest, as: UTF8.self))
        }
        return names
    }

    /// Calls `body` with each record name, in two parts (prefix and rest), and its tag: first the items'
    /// tags in the items' order, as a snapshot writes them (``loadChangeTags(expectedCount:_:)`` then finds
    /// each tag's item at the next position), then the others.
    package func forEachChangeTag(
        _ body: (_ prefix: UnsafeRawBufferPointer, _ rest: UnsafeRawBufferPointer, ChangeTag) -> Void
    ) {
        var prefix = ReadingHistoryItem.recordNamePrefix
        prefix.withUTF8 { prefix in
            let prefix = UnsafeRawBufferPointer(prefix)
            for position in items.indices {
                let word = tagWords[position]
                guard word != 0, word != Self.longTagMarker else { continue }
                items[position].compactArticleID.withUTF8 { body(prefix, $0, ChangeTagTable.tag(packedIn: word)) }
            }
        }
        otherTags.forEachName(body)
    }

    /// Takes the tags of a snapshot into a table that has its items and no tags yet: `read` calls `add`
    /// with each tag and its record name (valid UTF-8 bytes, and whether they are all ASCII), in the order
    /// ``forEachChangeTag(_:)`` gave them. A name given twice keeps its later tag.
    package mutating func loadChangeTags(
        expectedCount: Int,
        _ read: (_ add: (ChangeTagTable.SnapshotLoader.Tag, UnsafeRawBufferPointer, Bool) -> Void) throws(FlatSyncError)
            -> Void
    ) throws(FlatSyncError) {
        precondition(otherTags.isEmpty && !tagWords.contains { $0 != 0 }, "a table takes a snapshot's tags once")
        var others = ChangeTagTable.SnapshotLoader(count: 0)
        // Where the next tag's item usually is: right after the last one's, as the snapshot was written.
        var next = 0
        // Items whose long tag a later packed one replaced: `others` still holds the long one.
        var replacedLongTags: [Int] = []
        // The words are filled in a local array and the items read through a copy of the table: reaching
        // either through `self` from the closure copied the whole table (retaining each of its arrays)
        // for every tag.
        var words: [UInt64] = []
        swap(&words, &tagWords)
        // Back in place even when `read` throws, so that the table never has fewer words than items.
        defer { tagWords = words }
        let table = self
        try read { tag, name, isASCII in
            guard let rest = ReadingHistoryItem.articleBytes(ofRecordName: name),
                let position = table.locate(rest, isASCII, near: next)
            else {
                others.append(tag, nameUTF8: name, isASCII: isASCII)
                return
            }
            next = position + 1
            if let word = tag.word {
                if words[position] == Self.longTagMarker { replacedLongTags.append(position) }
                words[position] = word
            } else {
                words[position] = Self.longTagMarker
                others.append(tag, nameUTF8: name, isASCII: isASCII)
            }
        }
        otherTags = others.finish()
        for position in replacedLongTags where words[position] != Self.longTagMarker {
            otherTags[recordName(at: position)] = nil
        }
    }

    /// The position of the item whose article ID is `utf8`: one of the few after `next`, as a snapshot
    /// written in the items' order has it, or else found through the index.
    ///
    /// Near `next` only the same bytes count (a snapshot this code wrote names each item by its own bytes);
    /// another spelling of an ID, canonically equivalent, is found through the index. (Compared as `String`
    /// compares, a tag named with U+212A KELVIN SIGN went to the item "K", which the index keeps apart from
    /// it: see ``CompactString``.)
    private func locate(_ utf8: UnsafeRawBufferPointer, _ isASCII: Bool, near next: Int) -> Int? {
        for position in next..<min(next + 4, items.count)
        where items[position].compactArticleID.hasBytes(utf8) {
            return position
        }
        return find(utf8: utf8, isASCII: isASCII).position
    }

    /// The position of the item the record named `name` is for, nil when there is none here.
    private func position(ofRecordName name: String) -> Int? {
        var name = name
        return name.withUTF8 { utf8 in
            guard let rest = ReadingHistoryItem.articleBytes(ofRecordName: UnsafeRawBufferPointer(utf8)) else {
                return nil
            }
            return find(utf8: rest, isASCII: CompactString.isASCII(rest)).position
        }
    }

    /// The record name of the item at `position`.
    private func recordName(at position: Int) -> String {
        items[position].compactArticleID.withUTF8 { ReadingHistoryItem.recordName(articleUTF8: $0) }
    }

    /// Moves the tag of the item at `position`, which is being removed, to `otherTags`.
    private mutating func detachTag(at position: Int) {
        let word = tagWords[position]
        // 0: no tag; the marker: `otherTags` has it already.
        guard word != 0, word != Self.longTagMarker else { return }
        otherTags[recordName(at: position)] = ChangeTagTable.tag(packedIn: word)
        tagWords[position] = 0
    }

    /// Gives the item just added at `position` the tag its record has in `otherTags`, if any. Looked up by
    /// the name's bytes: a `String` of it cost an allocation for every item added while any tag was kept
    /// apart, as one is from a local delete until the server confirms it.
    private mutating func adoptTag(at position: Int) {
        guard !otherTags.isEmpty else { return }
        let tag = items[position].compactArticleID.withUTF8 { id in
            ReadingHistoryItem.withRecordName(articleUTF8: id) { otherTags.tag(nameUTF8: $0) }
        }
        guard let tag else { return }
        if let word = ChangeTagTable.packedWord(tag) {
            tagWords[position] = word
            otherTags[recordName(at: position)] = nil
        } else {
            tagWords[position] = Self.longTagMarker
        }
    }
}

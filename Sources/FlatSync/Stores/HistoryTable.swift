/// The reading history's items: one array of compact ``ReadingHistoryItem``s and an open-addressing index
/// over it, kept in the order ``ReadingHistory/items()`` returns (newest first), so that a read hands out
/// the array itself instead of a sorted copy.
///
/// Memory: 72 bytes an item in the array (no allocation per item for article IDs of up to 22 bytes, see
/// ``CompactString``; device IDs shared, see ``DeviceName``) and 8 to 10 bytes in the index: about 8.2 MB
/// for 100,000 items, where a `[String: ReadingHistoryItem]` of the earlier layout took 40 MB.
///
/// Order is restored lazily. A mutation that moves an item in the order (a visit makes it the newest) or
/// that appends or removes one only marks the positions it disturbed; the items at unmarked positions stay
/// in order among themselves. ``orderedItems()`` then sorts the marked items and merges them in, moving
/// each item at most once. A read right after opening finds a snapshot written in order and does nothing.
///
/// The index maps a 32-bit hash of the article ID to a position. Article IDs are hashed by their bytes when
/// they are ASCII, and through `String`'s hashing otherwise, so that canonically equivalent IDs find each
/// other as they do as `String`s (see ``CompactString``).
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
            removed = items.removeLast()
            clearDisordered(last)
        } else {
            // The last item fills the hole: update its slot, and it is out of order there.
            index.move(hash: Self.hash(of: items[last].compactArticleID), from: last, to: position)
            removed = items[position]
            items[position] = items.removeLast()
            clearDisordered(last)
            markDisordered(position)
        }
        if lastOrderedPosition.map({ $0 >= items.count }) ?? false { lastOrderedPosition = nil }
        return removed
    }

    /// Builds a table from a snapshot's items, which come newest first: each stays in order when it is older
    /// than the one before. The index is built once all are in, in slot order rather than item by item:
    /// inserting 100,000 items one by one missed the cache at nearly every slot (5 ms of a cold start).
    /// Should two items have the same article ID, the later replaces the earlier, as one by one.
    package struct SnapshotLoader {
        private var table = HistoryTable()
        private var hashes: [UInt32] = []

        /// A loader for `count` items.
        package init(count: Int) {
            table.items.reserveCapacity(count)
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
        }
    }

    private mutating func append(_ item: consuming ReadingHistoryItem, hash: UInt32) {
        index.grow(toHold: items.count + 1)
        index.insert(hash: hash, position: items.count)
        appendInOrder(item)
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
        index.renumber { Int(newPosition[$0]) }
        disordered = []
        disorderedCount = 0
        lastOrderedPosition = count - 1
    }

    /// Moves each element to `newPosition[oldPosition]`, following the permutation's cycles in place.
    private static func permute(_ items: inout [ReadingHistoryItem], to newPosition: [Int32]) {
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
            let isASCII = CompactString.isASCII(raw)
            let hash = Self.hash(utf8: raw, isASCII: isASCII)
            let (position, slot) = index.find(hash: hash) {
                items[$0].compactArticleID.equals(utf8: raw, otherIsASCII: isASCII)
            }
            return (position, slot, hash)
        }
    }

    private func find(_ id: CompactString, hash: UInt32) -> (position: Int?, slot: Int?) {
        index.find(hash: hash) { items[$0].compactArticleID == id }
    }
}

extension HistoryTable {
    /// Equal when both hold the same items by article ID, whatever their order.
    package static func == (lhs: HistoryTable, rhs: HistoryTable) -> Bool {
        lhs.count == rhs.count
            && lhs.items.allSatisfy { item in
                rhs.find(item.compactArticleID, hash: hash(of: item.compactArticleID)).position.map {
                    rhs.items[$0] == item
                }
                    ?? false
            }
    }
}

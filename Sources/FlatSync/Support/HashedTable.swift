/// A dictionary that keeps its entries densely in arrays and finds them through a ``SlotIndex``, which
/// stores a 32-bit hash of each key beside its position: the reading list's items by article ID, and the
/// command queue's index of where each record's change lives.
///
/// With `Dictionary`, a lookup compares the key it looks for with every key on its probe path (comparing two
/// record names reads both strings' bytes), and growing rehashes every key. Here a probe compares stored
/// hashes, eight to a cache line, and only an equal hash compares keys; growing moves the stored hashes and
/// hashes nothing. With 16 concurrent writers, whose store held 150,000 queued records, the two
/// dictionaries' growth and probes were a third of the store's work per add.
///
/// Keys are found by `hashValue` and `==`, as a `Dictionary` finds them. Entries are in no particular
/// order; removing one moves the last into its place.
package struct HashedTable<Key: Hashable, Value> {
    private var keys: [Key] = []
    private var storedValues: [Value] = []
    /// Each entry's hash, to move it in the index when it fills a removed entry's place.
    private var hashes: [UInt32] = []
    private var index = SlotIndex()

    /// An empty table.
    package init() {}

    /// The number of entries.
    package var count: Int { keys.count }

    /// True when the table holds nothing.
    package var isEmpty: Bool { keys.isEmpty }

    /// Every key, in the table's order.
    package var allKeys: [Key] { keys }

    /// Every value, in the table's order (that of ``allKeys``).
    package var values: [Value] { storedValues }

    private static func hash(_ key: Key) -> UInt32 {
        UInt32(truncatingIfNeeded: key.hashValue)
    }

    private func find(_ key: Key, hash: UInt32) -> (position: Int?, slot: Int?) {
        index.find(hash: hash) { keys[$0] == key }
    }

    /// The value of a key, or nil; setting nil removes it.
    package subscript(key: Key) -> Value? {
        get {
            guard let position = find(key, hash: Self.hash(key)).position else { return nil }
            return storedValues[position]
        }
        set {
            if let newValue {
                updateValue(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Stores `value` for `key`, returning the value it replaced, in one walk along the probe sequence.
    @discardableResult
    package mutating func updateValue(_ value: Value, forKey key: Key) -> Value? {
        let hash = Self.hash(key)
        guard let position = index.findOrInsert(hash: hash, position: keys.count, matches: { keys[$0] == key })
        else {
            append(key, value, hash: hash)
            return nil
        }
        var replaced = value
        swap(&replaced, &storedValues[position])
        return replaced
    }

    /// Removes a key's entry, returning its value.
    @discardableResult
    package mutating func removeValue(forKey key: Key) -> Value? {
        let (position, slot) = find(key, hash: Self.hash(key))
        guard let position, let slot else { return nil }
        return remove(at: position, slot: slot)
    }

    /// Runs `body` with the value of a key (nil for none) and stores what it leaves (nil removes it),
    /// finding the key once.
    package mutating func modify<R>(_ key: Key, _ body: (inout Value?) -> R) -> R {
        let hash = Self.hash(key)
        let (position, slot) = find(key, hash: hash)
        guard let position, let slot else {
            var added: Value?
            let result = body(&added)
            if let added {
                index.grow(toHold: keys.count + 1)
                index.insert(hash: hash, position: keys.count)
                append(key, added, hash: hash)
            }
            return result
        }
        // A copy, written back: moving the value out would leave a hole that a removal could not give back
        // to the array. The reading list, which keeps its items here, is small and seldom modifies an item.
        var current: Value? = storedValues[position]
        let result = body(&current)
        if let current {
            storedValues[position] = current
        } else {
            remove(at: position, slot: slot)
        }
        return result
    }

    /// Makes room for `capacity` entries.
    package mutating func reserveCapacity(_ capacity: Int) {
        keys.reserveCapacity(capacity)
        storedValues.reserveCapacity(capacity)
        hashes.reserveCapacity(capacity)
        index.grow(toHold: capacity)
    }

    /// Adds an entry at the end of the arrays; the index already holds its position.
    private mutating func append(_ key: Key, _ value: Value, hash: UInt32) {
        keys.append(key)
        storedValues.append(value)
        hashes.append(hash)
    }

    /// Removes the entry at `position`, whose index slot is `slot`, and returns its value; the last entry
    /// takes its place.
    @discardableResult
    private mutating func remove(at position: Int, slot: Int) -> Value {
        index.remove(slot: slot)
        let last = keys.count - 1
        if position != last {
            index.move(hash: hashes[last], from: last, to: position)
            keys.swapAt(position, last)
            storedValues.swapAt(position, last)
            hashes.swapAt(position, last)
        }
        keys.removeLast()
        hashes.removeLast()
        return storedValues.removeLast()
    }
}

extension HashedTable: Sendable where Key: Sendable, Value: Sendable {}

extension HashedTable: Equatable where Value: Equatable {
    /// Equal when they hold the same keys with equal values, in whatever order.
    package static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (key, value) in zip(lhs.keys, lhs.storedValues) where rhs[key] != value { return false }
        return true
    }
}

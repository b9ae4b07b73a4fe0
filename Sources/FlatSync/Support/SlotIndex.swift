/// An open-addressing hash index over positions in an array that the owner keeps: the part of a hash
/// table that finds things, without the things. ``HistoryTable``, ``ChangeTagTable`` and ``HashedTable`` keep
/// their entries densely in arrays (no per-entry allocation, no buckets of empty entries) and find them
/// through this.
///
/// Each slot is one `UInt64`: the entry's 32-bit hash in the high half, its position + 1 in the low half,
/// 0 for an empty slot. Linear probing, at most 80 % full, so a lookup compares a handful of hashes and
/// usually one entry. Removal shifts the following entries back (no tombstones), so a table that churns
/// never degrades. The owner says what its hash is and how to compare an entry at a position.
package struct SlotIndex: Sendable, Equatable {
    private var slots: [UInt64] = []

    package init() {}

    /// The slot of the entry with `hash` for which `matches(position)` is true, and its position; nils
    /// when there is none.
    @inline(__always)
    package func find(hash: UInt32, matches: (Int) -> Bool) -> (position: Int?, slot: Int?) {
        guard !slots.isEmpty else { return (nil, nil) }
        let mask = slots.count - 1
        let tag = UInt64(hash) << 32
        var index = Int(hash) & mask
        while true {
            let slot = slots[index]
            if slot == 0 { return (nil, nil) }
            if slot & 0xFFFF_FFFF_0000_0000 == tag {
                let position = Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1
                if matches(position) { return (position, index) }
            }
            index = (index + 1) & mask
        }
    }

    /// Finds the entry with `hash` for which `matches(position)` is true, or else records `position` for
    /// `hash`, in one walk along the probe sequence. Returns the position found, nil when it inserted.
    @inline(__always)
    package mutating func findOrInsert(hash: UInt32, position: Int, matches: (Int) -> Bool) -> Int? {
        grow(toHold: position + 1)
        let mask = slots.count - 1
        let tag = UInt64(hash) << 32
        var index = Int(hash) & mask
        while slots[index] != 0 {
            if slots[index] & 0xFFFF_FFFF_0000_0000 == tag {
                let found = Int(truncatingIfNeeded: slots[index] & 0xFFFF_FFFF) - 1
                if matches(found) { return found }
            }
            index = (index + 1) & mask
        }
        slots[index] = tag | UInt64(position + 1)
        return nil
    }

    /// Records `position` for `hash`; the caller knows no entry there matches. The index must have room
    /// (see ``grow(toHold:)``).
    package mutating func insert(hash: UInt32, position: Int) {
        let mask = slots.count - 1
        var index = Int(hash) & mask
        while slots[index] != 0 { index = (index + 1) & mask }
        slots[index] = UInt64(hash) << 32 | UInt64(position + 1)
    }

    /// Empties a slot that ``find(hash:matches:)`` returned, moving back the entries after it that would
    /// otherwise no longer be found.
    package mutating func remove(slot: Int) {
        let mask = slots.count - 1
        var hole = slot
        var index = slot
        while true {
            index = (index + 1) & mask
            let entry = slots[index]
            if entry == 0 { break }
            let home = Int(entry >> 32) & mask
            // The entry may move into the hole unless its home lies cyclically in (hole, index].
            let stays = hole <= index ? (hole < home && home <= index) : (hole < home || home <= index)
            if !stays {
                slots[hole] = entry
                hole = index
            }
        }
        slots[hole] = 0
    }

    /// Notes that the entry with `hash` at `position` moved to `newPosition` (the owner filled a hole
    /// with its last entry).
    package mutating func move(hash: UInt32, from position: Int, to newPosition: Int) {
        let mask = slots.count - 1
        var index = Int(hash) & mask
        while Int(truncatingIfNeeded: slots[index] & 0xFFFF_FFFF) - 1 != position { index = (index + 1) & mask }
        slots[index] = (slots[index] & 0xFFFF_FFFF_0000_0000) | UInt64(newPosition + 1)
    }

    /// Renumbers every position after the owner reordered its entries.
    package mutating func renumber(_ newPosition: (Int) -> Int) {
        for index in slots.indices where slots[index] != 0 {
            let old = Int(truncatingIfNeeded: slots[index] & 0xFFFF_FFFF) - 1
            slots[index] = (slots[index] & 0xFFFF_FFFF_0000_0000) | UInt64(newPosition(old) + 1)
        }
    }

    /// Makes room for `count` entries, doubling (and rehashing) as needed to stay at most 80 % full.
    package mutating func grow(toHold count: Int) {
        guard count * 5 > slots.count * 4 else { return }
        var capacity = max(16, slots.count)
        while count * 5 > capacity * 4 { capacity *= 2 }
        let old = slots
        slots = [UInt64](repeating: 0, count: capacity)
        let mask = capacity - 1
        for entry in old where entry != 0 {
            var index = Int(entry >> 32) & mask
            while slots[index] != 0 { index = (index + 1) & mask }
            slots[index] = entry
        }
    }

    /// Fills an empty index with positions `0..<hashes.count`, `hashes[position]` being each one's hash,
    /// visiting the slots from first to last (a counting sort by home slot first, so that a large index
    /// is written in order rather than at random). Returns false, with the index unusable, when
    /// `same(position, otherPosition)` finds two equal entries.
    package mutating func build(hashes: [UInt32], same: (Int, Int) -> Bool) -> Bool {
        assert(slots.allSatisfy { $0 == 0 }, "building an index that is not empty")
        grow(toHold: hashes.count)
        guard !slots.isEmpty else { return true }
        let mask = slots.count - 1
        let slotBits = mask.nonzeroBitCount
        let bucketBits = min(slotBits, 10)
        let shift = slotBits - bucketBits
        var starts = [Int](repeating: 0, count: (1 << bucketBits) + 1)
        for hash in hashes { starts[(Int(hash) & mask) >> shift + 1] += 1 }
        for bucket in 1..<starts.count { starts[bucket] += starts[bucket - 1] }
        var byBucket = [Int32](repeating: 0, count: hashes.count)
        for (position, hash) in hashes.enumerated() {
            let bucket = (Int(hash) & mask) >> shift
            byBucket[starts[bucket]] = Int32(position)
            starts[bucket] += 1
        }
        for position in byBucket {
            let hash = hashes[Int(position)]
            let tag = UInt64(hash) << 32
            var index = Int(hash) & mask
            while slots[index] != 0 {
                if slots[index] & 0xFFFF_FFFF_0000_0000 == tag {
                    let other = Int(truncatingIfNeeded: slots[index] & 0xFFFF_FFFF) - 1
                    if same(other, Int(position)) { return false }
                }
                index = (index + 1) & mask
            }
            slots[index] = tag | UInt64(Int(position) + 1)
        }
        return true
    }

    /// The number of slots.
    package var capacity: Int { slots.count }
}

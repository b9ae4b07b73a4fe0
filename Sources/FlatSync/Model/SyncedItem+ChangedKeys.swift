import Synchronization

/// An item that tells which fields of its record differ from another version's by comparing its own
/// properties, without building either record.
///
/// Building the old and the new record and comparing their dictionaries, then inserting every changed key
/// into a new set, cost more than the rest of a mutation's bookkeeping in
/// ``ZoneState/replace(_:with:sequence:)``. The result must equal
/// ``SyncedItem/recordKeysChanged(since:)``, the record-based definition (tests check both agree).
package protocol RecordDiffable: TableItem {
    /// The keys whose values differ between ``SyncedItem/record`` and `old?.record`, including keys only
    /// one of them has (every key of the record when `old` is nil).
    func changedRecordKeys(since old: Self?) -> Set<String>

    /// The save of this item's record, changed from `old`'s; `articleID` is the item's.
    consuming func saveChange(since old: Self?, articleID: String, sequence: UInt64) -> RecordChange
}

extension RecordDiffable {
    package consuming func saveChange(since old: Self?, articleID: String, sequence: UInt64) -> RecordChange {
        .save(record, changedKeys: changedRecordKeys(since: old), sequence: sequence)
    }
}

extension SyncedItem {
    /// The keys whose values differ between the item's record and `old`'s, found by comparing the records.
    package func recordKeysChanged(since old: Self?) -> Set<String> {
        let newFields = record.fields
        let oldFields = old?.record.fields ?? [:]
        var keys = Set<String>()
        for (key, value) in newFields where oldFields[key] != value { keys.insert(key) }
        for key in oldFields.keys where newFields[key] == nil { keys.insert(key) }
        return keys
    }
}

/// The sets of record keys named by bitmasks over a fixed list of keys, each built the first time it is
/// asked for: a mutation's changed keys are then an array lookup and a retain instead of a hash per key.
package final class RecordKeySets: Sendable {
    private let keys: [String]
    private let sets: Mutex<[Int: Set<String>]> = Mutex([:])

    /// At most 15 keys; bit `i` of a mask stands for `keys[i]` (the log keeps bit 15 of a history save's
    /// mask for ``RecordChange/replacesRecord``).
    package init(_ keys: [String]) {
        precondition(keys.count <= 15, "a key mask has 15 bits")
        self.keys = keys
    }

    /// The keys whose bits are set in `mask`.
    package subscript(mask: Int) -> Set<String> {
        sets.withLock { sets in
            if let set = sets[mask] { return set }
            var set = Set<String>(minimumCapacity: mask.nonzeroBitCount)
            for (bit, key) in keys.enumerated() where mask & (1 << bit) != 0 { set.insert(key) }
            sets[mask] = set
            return set
        }
    }
}

extension ReadingHistoryItem: RecordDiffable {
    /// The record's keys, in the order of the mask bits below.
    package static let recordKeys =
        [
            "articleID", "maxVersionSeen", "readCount", "likingStatus", "lastVisited", "firstSeen", "deviceID",
            "likingChangedAt",
        ] + Flags.fields.map(\.1)

    /// The sets of keys by mask: bit `i` stands for `recordKeys[i]`.
    package static let keySets = RecordKeySets(recordKeys)

    /// The mask of a set of record keys, or nil if one is not a key of this record type.
    package static func keyMask(_ keys: Set<String>) -> Int? {
        var mask = 0
        for key in keys {
            guard let bit = keyBits[key] else { return nil }
            mask |= 1 << bit
        }
        return mask
    }

    private static let keyBits = Dictionary(uniqueKeysWithValues: recordKeys.enumerated().map { ($1, $0) })

    package func changedRecordKeys(since old: ReadingHistoryItem?) -> Set<String> {
        Self.keySets[changedRecordKeyMask(since: old)]
    }

    /// The save of this item's record with its changed keys as a mask (which the log writes as is), and
    /// its record ID made from the caller's article ID rather than from the compact one.
    package consuming func saveChange(
        since old: ReadingHistoryItem?, articleID: String, sequence: UInt64
    ) -> RecordChange {
        let mask = changedRecordKeyMask(since: old)
        // Taken over from the caller (a draft of a batch hands its item over): no copy of its strings.
        var canonical = consume self
        canonical.flags.formIntersection(Flags.recorded)
        // Moved along (`consume`), not copied: each copy of the item or the record retained and released
        // their strings, for every change of a batch.
        return .save(
            content: consume canonical, type: Self.recordType, id: Self.recordID(for: articleID), keyMask: mask,
            sequence: sequence)
    }

    /// ``changedRecordKeys(since:)`` as a mask over ``recordKeys``.
    ///
    /// It compares the stored representations (an article ID's bytes before its string, the device's shared
    /// name before its value): building two `String`s per item to compare IDs cost more than the rest.
    package func changedRecordKeyMask(since old: ReadingHistoryItem?) -> Int {
        guard let old else {
            // Against no item, every key the record holds is new: four are always written, the others when set.
            var mask = 0b1111
            if !lastVisitedTime.isNaN { mask |= 1 << 4 }
            if !firstSeenTime.isNaN { mask |= 1 << 5 }
            if hasDevice { mask |= 1 << 6 }
            if !likingChangedAtTime.isNaN { mask |= 1 << 7 }
            for (index, (flag, _)) in Flags.fields.enumerated() where flags.contains(flag) { mask |= 1 << (8 + index) }
            return mask
        }
        var mask = 0
        if compactArticleID != old.compactArticleID { mask |= 1 << 0 }
        if maxVersionSeen != old.maxVersionSeen { mask |= 1 << 1 }
        if readCount != old.readCount { mask |= 1 << 2 }
        if liking != old.liking { mask |= 1 << 3 }
        // Optional fields are written only when set, so nil on both sides is no change.
        if lastVisited != old.lastVisited { mask |= 1 << 4 }
        if firstSeen != old.firstSeen { mask |= 1 << 5 }
        if !hasSameDevice(as: old) { mask |= 1 << 6 }
        if likingChangedAt != old.likingChangedAt { mask |= 1 << 7 }
        for (index, (flag, _)) in Flags.fields.enumerated() where flags.contains(flag) != old.flags.contains(flag) {
            mask |= 1 << (8 + index)
        }
        return mask
    }
}

extension ReadingListEntry: RecordDiffable {
    private static let keySets = RecordKeySets(["articleID", "dateAdded", "origin", "title"])

    package func changedRecordKeys(since old: ReadingListEntry?) -> Set<String> {
        var mask = 0
        if articleID != old?.articleID { mask |= 1 << 0 }
        if dateAdded != old?.dateAdded { mask |= 1 << 1 }
        if origin != old?.origin { mask |= 1 << 2 }
        if title != old?.title { mask |= 1 << 3 }
        return Self.keySets[mask]
    }
}

import FlatSync
import Foundation

// The state behind CloudDatabase: zones, record slots and their histories. Positions are sequence
// numbers: a zone's sequence counts its record changes, the database's counts zone events. "Exists at
// position P" means created at a step <= P and not yet deleted at step P.

/// One interval in which a record (or a zone) existed: created at step `start`, deleted at step `end`.
struct Life: Sendable, Hashable, Codable {
    var start: UInt64
    var end: UInt64

    /// True when the record existed at some position from `low` through `high`.
    func overlaps(_ low: UInt64, _ high: UInt64) -> Bool {
        start <= high && end > low
    }
}

/// Everything the server remembers about one record name in a zone.
struct RecordSlot: Sendable, Hashable {
    /// The record as the server holds it now, with its change tag; `nil` once deleted (a tombstone).
    var record: Record?
    /// The step that created the current record.
    var createdSequence: UInt64
    /// The step of the last save or delete.
    var modifiedSequence: UInt64
    /// Earlier lives of the name (deleted, possibly re-created), newest last, kept until compaction
    /// makes them irrelevant, so that "did the record exist at the token?" has an exact answer.
    var pastLives: [Life] = []

    /// True when the record existed at some position from `low` through `high`.
    func existed(from low: UInt64, through high: UInt64) -> Bool {
        if record != nil, createdSequence <= high { return true }
        return pastLives.contains { $0.overlaps(low, high) }
    }
}

/// A zone deletion in the database's history.
struct ZoneDeletionEvent: Sendable, Hashable, Codable {
    /// The database step that created the life that was deleted.
    var createdAt: UInt64
    /// The database step of the deletion.
    var deletedAt: UInt64
    /// True when the user deleted it, false when an app did.
    var byUser: Bool
}

/// Every record change of a zone as (step, name), in step order, so a fetch finds the changes after
/// a token without scanning and sorting the whole zone. Derived from the slots: an entry counts only
/// while its slot's `modifiedSequence` equals its step (later changes leave older entries stale), it
/// is rebuilt when decoded, and it never makes two states differ.
struct ChangeOrder: Sendable, Equatable {
    private(set) var entries: [(step: UInt64, name: String)] = []

    static func == (lhs: ChangeOrder, rhs: ChangeOrder) -> Bool { true }

    init() {}

    init(_ slots: [String: RecordSlot]) {
        entries = slots.map { ($0.value.modifiedSequence, $0.key) }.sorted { $0.step < $1.step }
    }

    /// Notes a change; steps only grow, so the entries stay sorted.
    mutating func append(step: UInt64, name: String) {
        entries.append((step, name))
    }

    /// The index of the first entry after `step`.
    func firstIndex(after step: UInt64) -> Int {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].step <= step { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// True when stale entries outnumber live ones enough that rebuilding pays.
    func isBloated(liveCount: Int) -> Bool {
        entries.count > 2 * liveCount + 64
    }
}

/// One zone, existing or deleted.
struct ZoneState: Sendable, Equatable {
    let id: ZoneID
    /// False once deleted (until created again).
    var exists = true
    /// True when the last deletion was the user's; requests then fail with userDeletedZone.
    var deletedByUser = false
    /// Bumped when the zone is created again after a deletion; tokens carry it.
    var generation: UInt64 = 1
    /// Bumped when an administrator expires the zone's tokens; tokens carry it.
    var epoch: UInt64 = 0
    /// The last record change's step.
    var sequence: UInt64 = 0
    /// The oldest position still served: tokens whose window starts before it have expired.
    var horizon: UInt64 = 0
    /// Records and tombstones by record name.
    var slots: [String: RecordSlot] = [:]
    /// The slots' changes in step order.
    var changeOrder = ChangeOrder()
    /// The database step that created the zone's current (or last) life.
    var createdAt: UInt64
    /// The database step of the last creation of the zone or change to its records.
    var changedAt: UInt64
    /// Every deletion of the zone, oldest first.
    var deletions: [ZoneDeletionEvent] = []

    init(id: ZoneID, createdAt: UInt64) {
        self.id = id
        self.createdAt = createdAt
        self.changedAt = createdAt
    }

    /// Brings a deleted zone back, empty and in a new generation.
    mutating func recreate(at step: UInt64) {
        exists = true
        deletedByUser = false
        generation += 1
        sequence = 0
        horizon = 0
        slots = [:]
        changeOrder = ChangeOrder()
        createdAt = step
        changedAt = step
    }

    /// Deletes the zone and all its records.
    mutating func delete(at step: UInt64, byUser: Bool) {
        exists = false
        deletedByUser = byUser
        slots = [:]
        changeOrder = ChangeOrder()
        deletions.append(ZoneDeletionEvent(createdAt: createdAt, deletedAt: step, byUser: byUser))
    }

    /// Notes that record `name` changed at `step`.
    mutating func noteChange(_ name: String, at step: UInt64) {
        changeOrder.append(step: step, name: name)
    }

    /// Drops stale entries of ``changeOrder`` once they pile up.
    mutating func trimChangeOrder() {
        if changeOrder.isBloated(liveCount: slots.count) {
            changeOrder = ChangeOrder(slots)
        }
    }

    /// Forgets history older than the last `limit` changes; tokens from before then expire.
    mutating func compact(keeping limit: Int?) {
        guard let limit else { return }
        let newHorizon = sequence > UInt64(limit) ? sequence - UInt64(limit) : 0
        guard newHorizon > horizon else { return }
        horizon = newHorizon
        // A valid token's window starts at or after the horizon, so tombstones and lives that ended by
        // then can never be reported again.
        for (name, slot) in slots {
            if slot.record == nil && slot.modifiedSequence <= horizon {
                slots[name] = nil
            } else if slot.pastLives.contains(where: { $0.end <= horizon }) {
                slots[name]!.pastLives.removeAll { $0.end <= horizon }
            }
        }
    }
}

// MARK: - Coding

extension ZoneState: Codable {
    private enum CodingKeys: String, CodingKey {
        case id, exists, deletedByUser, generation, epoch, sequence, horizon, slots, createdAt, changedAt, deletions
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(ZoneID.self, forKey: .id)
        exists = try container.decode(Bool.self, forKey: .exists)
        deletedByUser = try container.decode(Bool.self, forKey: .deletedByUser)
        generation = try container.decode(UInt64.self, forKey: .generation)
        epoch = try container.decode(UInt64.self, forKey: .epoch)
        sequence = try container.decode(UInt64.self, forKey: .sequence)
        horizon = try container.decode(UInt64.self, forKey: .horizon)
        createdAt = try container.decode(UInt64.self, forKey: .createdAt)
        changedAt = try container.decode(UInt64.self, forKey: .changedAt)
        deletions = try container.decode([ZoneDeletionEvent].self, forKey: .deletions)
        let packed = try container.decode(Data.self, forKey: .slots)
        do {
            slots = try Self.unpackSlots(packed, zone: id)
            changeOrder = ChangeOrder(slots)
        } catch {
            throw DecodingError.dataCorruptedError(
                forKey: .slots, in: container,
                debugDescription: "the records of zone \(id) are malformed: \(error.message)"
            )
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(exists, forKey: .exists)
        try container.encode(deletedByUser, forKey: .deletedByUser)
        try container.encode(generation, forKey: .generation)
        try container.encode(epoch, forKey: .epoch)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(horizon, forKey: .horizon)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(changedAt, forKey: .changedAt)
        try container.encode(deletions, forKey: .deletions)
        try container.encode(Self.packSlots(slots), forKey: .slots)
    }

    // Records are packed into one blob rather than encoded field by field: the property list decoder
    // costs about 4 µs per scalar here, and a DirectoryCloud decodes the whole state on every request.

    static func packSlots(_ slots: [String: RecordSlot]) -> Data {
        var writer = BinaryWriter(capacity: 64 * slots.count)
        writer.write(varint: UInt64(slots.count))
        for name in slots.keys.sorted() {
            let slot = slots[name]!
            writer.write(name)
            writer.write(varint: slot.createdSequence)
            writer.write(varint: slot.modifiedSequence)
            writer.write(varint: UInt64(slot.pastLives.count))
            for life in slot.pastLives {
                writer.write(varint: life.start)
                writer.write(varint: life.end)
            }
            guard let record = slot.record else {
                writer.write(UInt8(0))
                continue
            }
            writer.write(UInt8(1))
            writer.write(record.type)
            writer.write(record.changeTag?.rawValue)
            writer.write(record.lastModifiedBy)
            writer.write(varint: UInt64(record.fields.count))
            for key in record.fields.keys.sorted() {
                writer.write(key)
                writer.write(record.fields[key]!, tags: .cloudState)
            }
        }
        return writer.data
    }

    static func unpackSlots(_ data: Data, zone: ZoneID) throws(FlatSyncError) -> [String: RecordSlot] {
        try data.withBinaryReader { (reader) throws(FlatSyncError) in
            let count = try reader.readCount()
            var slots = [String: RecordSlot](minimumCapacity: count)
            for _ in 0..<count {
                let name = try reader.readString()
                let created = try reader.readVarint()
                var slot = RecordSlot(record: nil, createdSequence: created, modifiedSequence: try reader.readVarint())
                let lives = try reader.readCount()
                slot.pastLives.reserveCapacity(lives)
                for _ in 0..<lives {
                    slot.pastLives.append(Life(start: try reader.readVarint(), end: try reader.readVarint()))
                }
                switch try reader.readByte() {
                case 0:
                    break
                case 1:
                    let type = try reader.readString()
                    let tag = try reader.readOptionalString()
                    let modifiedBy = try reader.readOptionalString()
                    let fieldCount = try reader.readCount()
                    var fields = [String: FieldValue](minimumCapacity: fieldCount)
                    for _ in 0..<fieldCount {
                        let key = try reader.readString()
                        fields[key] = try reader.readFieldValue(tags: .cloudState)
                    }
                    slot.record = Record(
                        id: RecordID(zone: zone, name: name),
                        type: type,
                        fields: fields,
                        changeTag: tag.map { ChangeTag($0) },
                        lastModifiedBy: modifiedBy
                    )
                default:
                    throw malformed("unknown slot marker", at: reader)
                }
                slots[name] = slot
            }
            guard reader.isAtEnd else { throw malformed("trailing bytes", at: reader) }
            return slots
        }
    }

    private static func malformed(_ what: String, at reader: BinaryReader) -> FlatSyncError {
        FlatSyncError(.damagedFile, "Malformed record slots: \(what) at byte \(reader.offset).")
    }
}

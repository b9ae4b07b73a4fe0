#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The records of a zone that belong to host-defined stores (see ``SyncableRecord``), and their change
/// tags: what a ``ZoneState`` keeps beside its built-in items.
///
/// Records are kept as fields, never as the host's values: the engine below the ``RecordStore`` API deals
/// in records, fields and bytes only, and a record of a type no store on this device registered (a later
/// version of the app wrote it) is kept whole rather than dropped.
///
/// Each record is one entry in an array: its name, its type, its keys (sorted, and one array shared by
/// every record read with the same keys) and its values, in place of a dictionary of fields per record,
/// which made reading 100,000 records from a snapshot cost six times SQLite's reading of as many rows.
package struct HostRecordTable: Sendable {
    /// One record. Its name, tag and scalars are inline (a name or tag of up to 15 UTF-8 bytes is a small
    /// string, held without a reference): copying an entry retains only its values.
    package struct Entry: Sendable, Equatable {
        package var name: String
        /// The record type, as its number in ``HostRecordTable/types``.
        package var type: UInt32
        /// The field keys, as their number in ``HostRecordTable/shapes``.
        package var shape: UInt32
        /// The values of the shape's keys, in their order.
        package var values: [FieldValue]
        /// The last change tag seen from the server.
        package var tag: ChangeTag? = nil

    }

    /// The zone of the records (nil until the first is stored).
    private var zone: ZoneID?
    /// Every record, in no set order.
    package private(set) var entries: [Entry] = []
    /// The record types the entries name, each once.
    private var types: [String] = []
    /// The sets of field keys (each sorted) the entries name, each once.
    private var shapes: [[String]] = []
    /// Where each record's entry is, by name.
    private var positions: [String: Int] = [:]
    /// The tags of records this zone no longer has: a record deleted locally keeps its tag until the
    /// server confirms the delete, because the delete is sent with it.
    private var looseTags: [String: ChangeTag] = [:]
    /// The names of the records whose `deleteSelf` reference points at a record of their own zone, by the
    /// target's name: kept as records are set, so that a delete finds what it takes along without reading
    /// every record.
    private var dependentsByTarget: [String: Set<String>] = [:]

    package init() {}

    /// True when the table holds no record and no tag.
    package var isEmpty: Bool { entries.isEmpty && looseTags.isEmpty }

    /// The number of records.
    package var count: Int { entries.count }

    /// The number of `recordType` in ``types``, if an entry ever had that type.
    package func typeNumber(_ recordType: String) -> UInt32? {
        types.firstIndex(of: recordType).map { UInt32($0) }
    }

    /// The record type of an entry.
    package func recordType(of entry: Entry) -> String { types[Int(entry.type)] }

    /// An entry's fields, for a value to read without building a dictionary.
    package func fields(of entry: Entry) -> RecordFields {
        RecordFields(keys: shapes[Int(entry.shape)], values: entry.values, recordName: entry.name)
    }

    /// An entry's record, without its change tag.
    package func record(of entry: Entry) -> Record {
        let keys = shapes[Int(entry.shape)]
        var fields = [String: FieldValue](minimumCapacity: keys.count)
        for (key, value) in zip(keys, entry.values) { fields[key] = value }
        return Record(
            id: RecordID(zone: zone ?? ZoneID(""), name: entry.name), type: recordType(of: entry), fields: fields)
    }

    /// The number of a type, adding it.
    private mutating func number(ofType type: String) -> UInt32 {
        if let known = types.firstIndex(of: type) { return UInt32(known) }
        types.append(type)
        return UInt32(types.count - 1)
    }

    /// The number of a set of keys, adding it.
    private mutating func number(ofShape keys: [String]) -> UInt32 {
        if let known = shapes.lastIndex(of: keys) { return UInt32(known) }
        shapes.append(keys)
        return UInt32(shapes.count - 1)
    }

    /// The record named `name`, without its change tag; setting nil removes it (its tag stays).
    package subscript(name: String) -> Record? {
        get { positions[name].map { record(of: entries[$0]) } }
        set {
            guard let record = newValue else {
                remove(name)
                return
            }
            zone = zone ?? record.id.zone
            let fields = record.fields
            let keys = fields.keys.sorted()
            var entry = Entry(
                name: name, type: number(ofType: record.type), shape: number(ofShape: keys),
                values: keys.map { fields[$0]! })
            if let position = positions[name] {
                entry.tag = entries[position].tag
                unindex(entries[position])
                entries[position] = entry
            } else {
                entry.tag = looseTags.removeValue(forKey: name)
                positions[name] = entries.count
                entries.append(entry)
            }
            index(entry)
        }
    }

    /// The entry of the record named `name`.
    package func entry(_ name: String) -> Entry? {
        positions[name].map { entries[$0] }
    }

    /// Every record, without change tags.
    package var records: [Record] { entries.map { record(of: $0) } }

    private mutating func remove(_ name: String) {
        guard let position = positions.removeValue(forKey: name) else { return }
        let removed = entries[position]
        unindex(removed)
        if let tag = removed.tag { looseTags[name] = tag }
        let last = entries.removeLast()
        if position < entries.count {
            entries[position] = last
            positions[last.name] = position
        }
    }

    /// The change tag of the record named `name`, whether the table has the record or not.
    package func changeTag(of name: String) -> ChangeTag? {
        if let position = positions[name] { return entries[position].tag }
        return looseTags.isEmpty ? nil : looseTags[name]
    }

    /// Sets the change tag of the record named `name`, or forgets it (nil).
    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) {
        if let position = positions[name] {
            entries[position].tag = tag
        } else {
            looseTags[name] = tag
        }
    }

    /// Every change tag, by record name.
    package var changeTagsByName: [String: ChangeTag] {
        var tags = looseTags
        for entry in entries { if let tag = entry.tag { tags[entry.name] = tag } }
        return tags
    }

    /// The name of every record and of every record with a tag.
    package var allNames: Set<String> {
        Set(positions.keys).union(looseTags.keys)
    }

    /// The names of the records whose `deleteSelf` reference points at the record named `target` in their
    /// own zone: the records CloudKit deletes with it.
    package func dependents(of target: String) -> [String] {
        (dependentsByTarget[target] ?? []).filter { $0 != target }.sorted()
    }

    /// True when some record's `deleteSelf` reference points at a record of its zone.
    package var hasDependents: Bool { !dependentsByTarget.isEmpty }

    /// The name of every record a `deleteSelf` reference of the zone points at.
    package var ownerNames: Dictionary<String, Set<String>>.Keys { dependentsByTarget.keys }

    /// The targets of an entry's `deleteSelf` references within its zone.
    private func ownerTargets(of entry: Entry) -> Set<String> {
        guard let zone else { return [] }
        var targets = Set<String>()
        for reference in RecordReference.all(in: entry.values)
        where reference.action == .deleteSelf && !reference.leaves(zone) {
            targets.insert(reference.recordName)
        }
        return targets
    }

    private mutating func index(_ entry: Entry) {
        for target in ownerTargets(of: entry) { dependentsByTarget[target, default: []].insert(entry.name) }
    }

    private mutating func unindex(_ entry: Entry) {
        for target in ownerTargets(of: entry) {
            dependentsByTarget[target]?.remove(entry.name)
            if dependentsByTarget[target]?.isEmpty == true { dependentsByTarget[target] = nil }
        }
    }

    /// The names of `targets` and of every record that a chain of `deleteSelf` references ties to one of
    /// them, each once, targets first: what deleting the targets deletes.
    package func cascade(from targets: [String]) -> [String] {
        guard !dependentsByTarget.isEmpty else { return targets }
        var seen = Set(targets)
        var order = targets
        var next = 0
        while next < order.count {
            for dependent in dependents(of: order[next]) where seen.insert(dependent).inserted {
                order.append(dependent)
            }
            next += 1
        }
        return order
    }
}

extension HostRecordTable: Equatable {
    /// Equal when they hold the same records and tags, in whatever order.
    package static func == (lhs: HostRecordTable, rhs: HostRecordTable) -> Bool {
        guard lhs.entries.count == rhs.entries.count, lhs.looseTags == rhs.looseTags else { return false }
        return lhs.entries.allSatisfy { entry in
            guard let other = rhs.entry(entry.name) else { return false }
            return other.tag == entry.tag && rhs.record(of: other).hasSameContent(as: lhs.record(of: entry))
        }
    }
}

extension HostRecordTable {
    /// The table as a snapshot section: the number of names, then per name (sorted), whether a record
    /// follows, the record's type and fields in the command log's field codec (keys sorted), and its
    /// change tag (empty for none).
    package func encoded() -> Data {
        var writer = BinaryWriter(capacity: entries.count * 48)
        let names = allNames.sorted()
        writer.write(varint: UInt64(names.count))
        for name in names {
            writer.write(name)
            if let entry = entry(name) {
                writer.write(UInt8(1))
                writer.write(recordType(of: entry))
                let keys = shapes[Int(entry.shape)]
                writer.write(varint: UInt64(keys.count))
                for (key, value) in zip(keys, entry.values) {
                    writer.write(key)
                    writer.write(value, tags: .commandLog)
                }
            } else {
                writer.write(UInt8(0))
            }
            writer.write(changeTag(of: name)?.rawValue ?? "")
        }
        return writer.data
    }

    /// Reads what ``encoded()`` wrote for the records of `zone`.
    package static func decode(_ data: Data, zone: ZoneID) throws(FlatSyncError) -> HostRecordTable {
        try data.withBinaryReader { (reader) throws(FlatSyncError) in
            var table = HostRecordTable()
            table.zone = zone
            let count = try reader.readCount()
            let capacity = min(count, data.count / 4)
            table.entries.reserveCapacity(capacity)
            table.positions.reserveCapacity(capacity)
            // Types and keys recur in every record: read once, and the previous record's keys array is
            // shared when the next one has the same keys.
            var recent: [String] = []
            var keys: [String] = []
            var previousShape: UInt32?
            var previousType: (name: String, number: UInt32)?
            for _ in 0..<count {
                let name = try reader.readString()
                let hasRecord = try reader.readByte()
                guard hasRecord <= 1 else {
                    throw FlatSyncError(.damagedFile, "A host record's presence byte is \(hasRecord).")
                }
                var entry: Entry?
                if hasRecord == 1 {
                    let type = try reader.readString(reusing: &recent)
                    let fieldCount = try reader.readCount()
                    keys.removeAll(keepingCapacity: true)
                    var values: [FieldValue] = []
                    values.reserveCapacity(min(fieldCount, 64))
                    for _ in 0..<fieldCount {
                        keys.append(try reader.readString(reusing: &recent))
                        values.append(try reader.readFieldValue(tags: .commandLog))
                    }
                    let shape: UInt32
                    if let previousShape, table.shapes[Int(previousShape)] == keys {
                        shape = previousShape
                    } else {
                        // A new set of keys is checked once: sorted, each key once.
                        guard zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) else {
                            throw FlatSyncError(.damagedFile, "The fields of host record \(name) are out of order.")
                        }
                        shape = table.number(ofShape: keys)
                        previousShape = shape
                    }
                    let typeNumber: UInt32
                    if let previousType, previousType.name == type {
                        typeNumber = previousType.number
                    } else {
                        typeNumber = table.number(ofType: type)
                        previousType = (type, typeNumber)
                    }
                    entry = Entry(name: name, type: typeNumber, shape: shape, values: values)
                }
                let tagText = try reader.readString()
                let tag = tagText.isEmpty ? nil : ChangeTag(rawValue: tagText)
                if var entry {
                    guard table.positions.updateValue(table.entries.count, forKey: name) == nil else {
                        throw FlatSyncError(.damagedFile, "The host record \(name) is listed twice.")
                    }
                    entry.tag = tag
                    table.index(entry)
                    table.entries.append(entry)
                } else if let tag {
                    table.looseTags[name] = tag
                }
            }
            return table
        }
    }
}

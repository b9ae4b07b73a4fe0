#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The records of a zone that belong to host-defined stores (see ``SyncableRecord``), by record name,
/// and their change tags: what a ``ZoneState`` keeps beside its built-in items.
///
/// Records are kept as fields, never as the host's values: the engine below the ``RecordStore`` API deals
/// in records, fields and bytes only, and a record of a type no store on this device registered (a later
/// version of the app wrote it) is kept whole rather than dropped.
package struct HostRecordTable: Sendable, Equatable {
    /// Records by name, without change tags (see ``changeTags``).
    package private(set) var records: [String: Record] = [:]
    /// The last change tag seen from the server, by record name. A record deleted locally keeps its tag
    /// until the server confirms the delete, because the delete is sent with it.
    package private(set) var changeTags: [String: ChangeTag] = [:]
    /// The names of the records whose `deleteSelf` reference points at a record of their own zone, by the
    /// target's name: kept as records are set, so that a delete finds what it takes along without reading
    /// every record.
    private var dependentsByTarget: [String: Set<String>] = [:]

    package init() {}

    package static func == (lhs: HostRecordTable, rhs: HostRecordTable) -> Bool {
        lhs.records == rhs.records && lhs.changeTags == rhs.changeTags
    }

    /// True when the table holds no record and no tag.
    package var isEmpty: Bool { records.isEmpty && changeTags.isEmpty }

    /// The record named `name`, without its change tag.
    package subscript(name: String) -> Record? {
        get { records[name] }
        set {
            guard var record = newValue else {
                if let old = records.removeValue(forKey: name) { unindex(old) }
                return
            }
            // Kept as fields without a tag or a writer: those are the server's, kept in `changeTags`.
            record.changeTag = nil
            record.lastModifiedBy = nil
            if case .fields = record.content {} else { record.fields = record.fields }
            if let old = records.updateValue(record, forKey: name) { unindex(old) }
            for target in Self.ownerTargets(of: record) { dependentsByTarget[target, default: []].insert(name) }
        }
    }

    /// The change tag of the record named `name`, whether the table has the record or not.
    package func changeTag(of name: String) -> ChangeTag? { changeTags[name] }

    /// Sets the change tag of the record named `name`, or forgets it (nil).
    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) { changeTags[name] = tag }

    /// The names of the records whose `deleteSelf` reference points at the record named `target` in their
    /// own zone: the records CloudKit deletes with it.
    package func dependents(of target: String) -> [String] {
        (dependentsByTarget[target] ?? []).filter { $0 != target }.sorted()
    }

    /// True when some record's `deleteSelf` reference points at a record of its zone.
    package var hasDependents: Bool { !dependentsByTarget.isEmpty }

    /// The targets of a record's `deleteSelf` references within its zone.
    private static func ownerTargets(of record: Record) -> Set<String> {
        let references = record.references
        guard !references.isEmpty else { return [] }
        var targets = Set<String>()
        for reference in references where reference.action == .deleteSelf && !reference.leaves(record.id.zone) {
            targets.insert(reference.recordName)
        }
        return targets
    }

    private mutating func unindex(_ record: Record) {
        for target in Self.ownerTargets(of: record) {
            dependentsByTarget[target]?.remove(record.id.name)
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

extension HostRecordTable {
    /// The table as a snapshot section: per name (sorted), whether a record follows, the record's type and
    /// fields in the command log's field codec, and its change tag (empty for none).
    package func encoded() -> Data {
        var writer = BinaryWriter()
        let names = Set(records.keys).union(changeTags.keys).sorted()
        writer.write(varint: UInt64(names.count))
        for name in names {
            writer.write(name)
            if let record = records[name] {
                writer.write(UInt8(1))
                writer.write(record.type)
                let fields = record.fields
                writer.write(varint: UInt64(fields.count))
                for key in fields.keys.sorted() {
                    writer.write(key)
                    writer.write(fields[key]!, tags: .commandLog)
                }
            } else {
                writer.write(UInt8(0))
            }
            writer.write(changeTags[name]?.rawValue ?? "")
        }
        return writer.data
    }

    /// Reads what ``encoded()`` wrote for the records of `zone`.
    package static func decode(_ data: Data, zone: ZoneID) throws(FlatSyncError) -> HostRecordTable {
        try data.withBinaryReader { (reader) throws(FlatSyncError) in
            var table = HostRecordTable()
            let count = try reader.readCount()
            table.records.reserveCapacity(min(count, data.count / 4))
            // Field keys and record types recur in every record: read them once.
            var recent: [String] = []
            for _ in 0..<count {
                let name = try reader.readString()
                let hasRecord = try reader.readByte()
                guard hasRecord <= 1 else {
                    throw FlatSyncError(.damagedFile, "A host record's presence byte is \(hasRecord).")
                }
                if hasRecord == 1 {
                    let type = try reader.readString(reusing: &recent)
                    let fieldCount = try reader.readCount()
                    var fields = [String: FieldValue](minimumCapacity: min(fieldCount, 64))
                    for _ in 0..<fieldCount {
                        let key = try reader.readString(reusing: &recent)
                        fields[key] = try reader.readFieldValue(tags: .commandLog)
                    }
                    let record = Record(id: RecordID(zone: zone, name: name), type: type, fields: fields)
                    table.records[name] = record
                    for target in ownerTargets(of: record) { table.dependentsByTarget[target, default: []].insert(name) }
                }
                let tag = try reader.readString()
                if !tag.isEmpty {
                    if table.changeTags.isEmpty { table.changeTags.reserveCapacity(min(count, data.count / 4)) }
                    table.changeTags[name] = ChangeTag(rawValue: tag)
                }
            }
            return table
        }
    }
}

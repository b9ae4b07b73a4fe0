#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Writes records with their repeated strings (zone names, record types, field keys) as indices into a
/// table that ``BinaryWriter/writeInterned(capacity:_:)`` puts first.
package struct InternedWriter {
    package var writer: BinaryWriter
    private(set) var table: [String] = []
    /// The table's indices by string, built once the table outgrows a linear search. A record's table has a
    /// handful of strings (its zone, type and keys), mostly the same literals, which compare by identity
    /// first: hashing them cost a reading-list add more than the rest of its encoding.
    private var indices: [String: Int] = [:]
    private static let linearSearchLimit = 16
    /// The devices written so far, in the order they were first written (see ``writeNumbered(_:)``).
    private var devices: [DeviceName] = []
    /// How many devices an entry numbers: a user has a handful, and looking one up is a linear search.
    private static let numberedDeviceLimit = 16

    package init(capacity: Int) {
        writer = BinaryWriter(capacity: capacity)
    }

    /// A writer whose table starts as `table`.
    init(capacity: Int, table: [String]) {
        writer = BinaryWriter(capacity: capacity)
        self.table = table
        if table.count > Self.linearSearchLimit {
            indices = Dictionary(uniqueKeysWithValues: table.enumerated().map { ($1, $0) })
        }
    }

    /// A repeated string, as its index in the table.
    package mutating func write(_ string: String) {
        if let index = index(of: string) {
            writer.write(varint: UInt64(index))
            return
        }
        writer.write(varint: UInt64(table.count))
        table.append(string)
        if table.count > Self.linearSearchLimit {
            if indices.isEmpty {
                indices = Dictionary(uniqueKeysWithValues: table.enumerated().map { ($1, $0) })
            } else {
                indices[string] = table.count - 1
            }
        }
    }

    private func index(of string: String) -> Int? {
        if table.count > Self.linearSearchLimit { return indices[string] }
        // Strings of its length first: a length is stored in the string, most of a record's strings differ in
        // length, and comparing two that do read both strings' bytes. Only then all of them, for a string
        // canonically equivalent to one of another length ("é" and "e\u{301}" are one string to `==`, as
        // to `indices` once the table outgrows this search). Most lookups are of a string found at once.
        let length = string.utf8.count
        return table.firstIndex { $0.utf8.count == length && $0 == string } ?? table.firstIndex(of: string)
    }

    package mutating func write(_ id: RecordID) {
        write(id.zone.name)
        writer.write(id.name)
    }

    package mutating func write(_ record: Record) {
        write(record.id)
        write(record.type)
        writer.write(record.changeTag?.rawValue)
        // Through the content, so that a reading-list entry's fields are written without their dictionary.
        writer.write(varint: UInt64(record.content.fieldCount))
        record.content.forEachField { key, value in
            write(key)
            writer.write(value, tags: .commandLog)
        }
    }

    /// A record change; `sequence` says whether its own sequence number is written (a mutation's changes
    /// share the mutation's).
    package mutating func write(_ change: RecordChange, sequence: Bool) {
        withUnsafePointer(to: change) { write(changeAt: $0, sequence: sequence) }
    }

    /// ``write(_:sequence:)`` for a change read where it is stored, through its address: passed as a value,
    /// a batch's change was copied (its strings retained) before it was written and destroyed after.
    mutating func write(changeAt change: UnsafePointer<RecordChange>, sequence: Bool) {
        if sequence { writer.write(varint: change.pointee.sequence) }
        // A store's own form, when its record holds a value with one (see ``StoredRecordContent``).
        if !change.pointee.isDelete, let box = change.pointee.carriedRecord.content.box,
            box.writeLogSave(ofChangeAt: change, to: &self)
        {
            return
        }
        if change.pointee.isDelete {
            // A delete a cascade made is operation 6, followed by its owner (older versions read no 6).
            let owner = change.pointee.cascadeOwner
            writer.write(UInt8(owner == nil ? 2 : 6))
            write(change.pointee.recordID)
            if let owner { write(owner) }
            return
        }
        // The record read in place: binding the operation's payload copied it. A save that replaces its
        // record is operation 5, the same layout (older versions wrote 1 only, and read no 5). A save with
        // the values its keys had before it is operation 7: 1's layout, then those values (older versions
        // read no 7).
        // Operation 8 is 7 for a save made over a merged version (``RecordChange/rebases``).
        let base = change.pointee.replacesRecord ? nil : change.pointee.baseValues
        writer.write(UInt8(change.pointee.replacesRecord ? 5 : base == nil ? 1 : change.pointee.rebases ? 8 : 7))
        write(change.pointee.carriedRecord)
        writer.write(varint: UInt64(change.pointee.changedKeys.count))
        for key in change.pointee.changedKeys { write(key) }
        guard let base else { return }
        writer.write(varint: UInt64(base.count))
        for (key, value) in base.sorted(by: { $0.key < $1.key }) {
            write(key)
            writer.write(value, tags: .commandLog)
        }
    }
}

extension InternedWriter {
    /// Writes a device (or another name that recurs across an entry's records) numbered within the entry,
    /// as ``LogStrings/readNumberedDevice(_:)`` reads it: 0 for none; 2 + n for the entry's device number n;
    /// or 1 followed by the device ID, which then takes the next number. An entry numbers its first 16
    /// devices; any beyond them is written with its ID each time (the reader numbers those too, unused).
    package mutating func writeNumbered(_ device: DeviceName?) {
        guard let device else {
            writer.write(varint: 0)
            return
        }
        if let number = devices.firstIndex(where: { DeviceName.same($0, device) }) {
            writer.write(varint: UInt64(number) + 2)
            return
        }
        if devices.count < Self.numberedDeviceLimit { devices.append(device) }
        writer.write(varint: 1)
        writer.write(device.value)
    }
}

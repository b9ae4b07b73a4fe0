#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One entry of the command log: a transition of ``PendingCommands``, or a record of state that a
/// compaction carried over. Replaying the entries in order rebuilds the queue exactly, including which
/// commands were being sent.
package enum CommandLogEvent: Hashable, Sendable {
    /// A local mutation was accepted.
    case mutation(Mutation)
    /// A sending round of the zone started (``PendingCommands/seal(_:)``).
    case sealed(ZoneID)
    /// A sending round of the zone ended (``PendingCommands/unseal(_:)``).
    case unsealed(ZoneID)
    /// The server acknowledged these records of a command, or they were dropped.
    case acknowledged(CommandID, [RecordID])
    /// The zone's data and commands were wiped (the user deleted the zone) by the mutation numbered
    /// `sequence`. A snapshot covering less than that predates the wipe and is not used.
    case clearedZone(ZoneID, sequence: UInt64)
    /// Every zone's data and commands were wiped (the account changed) by the mutation numbered `sequence`.
    case clearedAll(sequence: UInt64)
    /// Compaction: a live command, exactly as it was.
    case restored(Command)
    /// Compaction: changes already acknowledged but not yet in a snapshot. Reopening lays them over the
    /// snapshot like mutations, without queueing them again.
    case applied(ZoneID, [RecordChange])
    /// Compaction: the counters a fresh queue must continue from.
    case counters(nextSequence: UInt64, nextCommandID: UInt64)
}

// MARK: - Binary form

extension CommandLogEvent {
    private enum Tag: UInt8 {
        case mutation = 1, sealed, unsealed, acknowledged, clearedZone, clearedAll, restored, applied, counters
    }

    /// The event's bytes, as stored in one log frame.
    ///
    /// Events that carry records start with a table of the strings their records repeat (zone names,
    /// record types, field keys), and the records refer to those by index, so that a batch's entry is less
    /// than half as large to encode, checksum, write and flush. A history item is written as its fields in
    /// a fixed order, with its device numbered within the entry (see
    /// `InternedWriter.writeHistoryItem(ofChangeAt:)`).
    package func encoded() -> Data {
        if case .mutation(let mutation) = self, let data = Self.encodedInterningOnlyTheZone(mutation) { return data }
        var writer = BinaryWriter(capacity: 128)
        encode(to: &writer)
        return writer.data
    }

    /// A mutation whose changes intern no string but their zone's name (history saves written as items,
    /// deletes), encoded as ``encode(to:)`` would, but with its one-string table written first and the
    /// changes straight after it: no second buffer to copy a 10,000-change batch's megabyte from. Nil when
    /// a change interns anything else.
    private static func encodedInterningOnlyTheZone(_ mutation: Mutation) -> Data? {
        // Any other save interns its record type and keys (a reading-list add): no use starting.
        if let first = mutation.changes.first, !first.isDelete, !first.carriedRecord.content.isHistoryItem {
            return nil
        }
        let zone = mutation.zone.name
        var interned = InternedWriter(capacity: mutation.changes.count * 64 + 64, table: [zone])
        interned.writer.write(Tag.mutation.rawValue)
        interned.writer.write(varint: 1)
        interned.writer.write(zone)
        interned.writer.write(varint: mutation.sequence)
        interned.write(zone)
        interned.writer.write(varint: UInt64(mutation.changes.count))
        let complete = mutation.changes.withUnsafeBufferPointer { changes in
            for index in changes.indices {
                // Read where it is stored: passed as a value from the array or from its buffer, each change was
                // copied before it was written, and destroyed after.
                let change = changes.baseAddress! + index
                // Any other save interns its record type and keys: give up before writing it, or a
                // reading-list add would be written here and then again by ``encode(to:)``.
                if !change.pointee.isDelete, !change.pointee.carriedRecord.content.isHistoryItem { return false }
                interned.write(changeAt: change, sequence: false)
                if interned.table.count > 1 { return false }
            }
            return true
        }
        guard complete else { return nil }
        return interned.writer.data
    }

    package func encode(to writer: inout BinaryWriter) {
        switch self {
        case .mutation(let mutation):
            writer.write(Tag.mutation.rawValue)
            writer.writeInterned(capacity: mutation.changes.count * 160) { body in
                body.writer.write(varint: mutation.sequence)
                body.write(mutation.zone.name)
                body.writer.write(varint: UInt64(mutation.changes.count))
                for change in mutation.changes { body.write(change, sequence: false) }
            }
        case .sealed(let zone):
            writer.write(Tag.sealed.rawValue)
            writer.write(zone.name)
        case .unsealed(let zone):
            writer.write(Tag.unsealed.rawValue)
            writer.write(zone.name)
        case .acknowledged(let command, let ids):
            writer.write(Tag.acknowledged.rawValue)
            writer.writeInterned(capacity: ids.count * 32) { body in
                body.writer.write(varint: command.rawValue)
                body.writer.write(varint: UInt64(ids.count))
                for id in ids { body.write(id) }
            }
        case .clearedZone(let zone, let sequence):
            writer.write(Tag.clearedZone.rawValue)
            writer.write(zone.name)
            writer.write(varint: sequence)
        case .clearedAll(let sequence):
            writer.write(Tag.clearedAll.rawValue)
            writer.write(varint: sequence)
        case .restored(let command):
            writer.write(Tag.restored.rawValue)
            // Every change the command holds, in its slots' order: read back, the same slots without the gaps.
            writer.writeInterned(capacity: command.recordCount * 160) { body in
                body.writer.write(varint: command.id.rawValue)
                body.write(command.zone.name)
                body.writer.write(command.kind.rawValue)
                body.writer.write(varint: UInt64(command.recordCount))
                for case let change? in command.slots { body.write(change, sequence: true) }
            }
        case .applied(let zone, let changes):
            writer.write(Tag.applied.rawValue)
            writer.writeInterned(capacity: changes.count * 160) { body in
                body.write(zone.name)
                body.writer.write(varint: UInt64(changes.count))
                for change in changes { body.write(change, sequence: true) }
            }
        case .counters(let nextSequence, let nextCommandID):
            writer.write(Tag.counters.rawValue)
            writer.write(varint: nextSequence)
            writer.write(varint: nextCommandID)
        }
    }

    /// Decodes one event, failing with ``FlatSyncError/Code-swift.struct/damagedFile`` on bytes that are not
    /// an event (or ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion`` for an unknown kind).
    package static func decode(_ data: Data) throws(FlatSyncError) -> CommandLogEvent {
        var recent = LogStrings()
        return try decode(data, reusing: &recent)
    }

    /// True when `payload` holds a ``mutation(_:)``, judged by its first byte alone.
    package static func isMutation(_ payload: Data) -> Bool {
        payload.first == Tag.mutation.rawValue
    }

    /// Decodes one event, sharing strings it repeats with the events decoded before (zone names and device
    /// IDs recur in every entry of a log), through `recent` (see ``BinaryReader/readString(reusing:)``).
    package static func decode(_ data: Data, reusing recent: inout LogStrings) throws(FlatSyncError) -> CommandLogEvent
    {
        try data.withBinaryReader { (reader) throws(FlatSyncError) -> CommandLogEvent in
            let event = try decode(from: &reader, reusing: &recent)
            guard reader.isAtEnd else {
                throw FlatSyncError(.damagedFile, "A command log entry has \(reader.remaining) bytes too many.")
            }
            return event
        }
    }

    package static func decode(from reader: inout BinaryReader) throws(FlatSyncError) -> CommandLogEvent {
        var recent = LogStrings()
        return try decode(from: &reader, reusing: &recent)
    }

    package static func decode(from reader: inout BinaryReader, reusing recent: inout LogStrings) throws(FlatSyncError)
        -> CommandLogEvent
    {
        recent.startEntry()
        let rawTag = try reader.readByte()
        guard let tag = Tag(rawValue: rawTag) else {
            throw FlatSyncError(
                .unsupportedFormatVersion,
                "The command log holds an entry of kind \(rawTag), written by a newer FlatSync."
            )
        }
        switch tag {
        case .mutation:
            let strings = try InternedReader(&reader, reusing: &recent)
            let sequence = try reader.readVarint()
            let zone = ZoneID(try strings.readString(&reader))
            let count = try reader.readCount()
            var changes: [RecordChange] = []
            changes.reserveCapacity(count)
            for _ in 0..<count {
                changes.append(try strings.readRecordChange(&reader, sequence: sequence, reusing: &recent))
            }
            return .mutation(Mutation(sequence: sequence, zone: zone, changes: changes))
        case .sealed:
            return .sealed(ZoneID(try reader.readString()))
        case .unsealed:
            return .unsealed(ZoneID(try reader.readString()))
        case .acknowledged:
            let strings = try InternedReader(&reader)
            let command = CommandID(try reader.readVarint())
            let count = try reader.readCount()
            var ids: [RecordID] = []
            ids.reserveCapacity(count)
            for _ in 0..<count { ids.append(try strings.readRecordID(&reader)) }
            return .acknowledged(command, ids)
        case .clearedZone:
            return .clearedZone(ZoneID(try reader.readString()), sequence: try reader.readVarint())
        case .clearedAll:
            return .clearedAll(sequence: try reader.readVarint())
        case .restored:
            let strings = try InternedReader(&reader)
            let id = CommandID(try reader.readVarint())
            let zone = ZoneID(try strings.readString(&reader))
            guard let kind = Command.Kind(rawValue: try reader.readByte()) else {
                throw FlatSyncError(.damagedFile, "A restored command has an unknown kind.")
            }
            let count = try reader.readCount()
            // In the order written; the queue drops a record's earlier change if a damaged log holds two.
            var slots: [RecordChange?] = []
            slots.reserveCapacity(count)
            for _ in 0..<count {
                slots.append(try strings.readRecordChange(&reader, sequence: nil, reusing: &recent))
            }
            return .restored(Command(id: id, zone: zone, kind: kind, slots: slots))
        case .applied:
            let strings = try InternedReader(&reader)
            let zone = ZoneID(try strings.readString(&reader))
            let count = try reader.readCount()
            var changes: [RecordChange] = []
            changes.reserveCapacity(count)
            for _ in 0..<count {
                changes.append(try strings.readRecordChange(&reader, sequence: nil, reusing: &recent))
            }
            return .applied(zone, changes)
        case .counters:
            return .counters(nextSequence: try reader.readVarint(), nextCommandID: try reader.readVarint())
        }
    }
}

// MARK: - Records in binary, with a table of repeated strings

extension BinaryWriter {
    /// Writes a table of the strings `body` interned, then what `body` wrote.
    fileprivate mutating func writeInterned(capacity: Int, _ body: (inout InternedWriter) -> Void) {
        var interned = InternedWriter(capacity: capacity)
        body(&interned)
        write(varint: UInt64(interned.table.count))
        for string in interned.table { write(string) }
        append(interned.writer)
    }
}

/// Writes records with their repeated strings (zone names, record types, field keys) as indices into a
/// table that ``BinaryWriter/writeInterned(capacity:_:)`` puts first.
package struct InternedWriter {
    package var writer: BinaryWriter
    fileprivate private(set) var table: [String] = []
    /// The table's indices by string, built once the table outgrows a linear search. A record's table has a
    /// handful of strings (its zone, type and keys), mostly the same literals, which compare by identity
    /// first: hashing them cost a reading-list add more than the rest of its encoding.
    private var indices: [String: Int] = [:]
    private static let linearSearchLimit = 16
    /// The devices of the history items written so far, in the order they were first written (see
    /// ``writeDevice(of:)``).
    private var devices: [DeviceName] = []
    /// How many devices an entry numbers: a user has a handful, and looking one up is a linear search.
    private static let numberedDeviceLimit = 16

    package init(capacity: Int) {
        writer = BinaryWriter(capacity: capacity)
    }

    /// A writer whose table starts as `table`.
    fileprivate init(capacity: Int, table: [String]) {
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
    fileprivate mutating func write(changeAt change: UnsafePointer<RecordChange>, sequence: Bool) {
        if sequence { writer.write(varint: change.pointee.sequence) }
        if !change.pointee.isDelete, writeHistoryItem(ofChangeAt: change) { return }
        if change.pointee.isDelete {
            writer.write(UInt8(2))
            write(change.pointee.recordID)
            return
        }
        // The record read in place: binding the operation's payload copied it. A save that replaces its
        // record is operation 5, the same layout (older versions wrote 1 only, and read no 5).
        writer.write(UInt8(change.pointee.replacesRecord ? 5 : 1))
        write(change.pointee.carriedRecord)
        writer.write(varint: UInt64(change.pointee.changedKeys.count))
        for key in change.pointee.changedKeys { write(key) }
    }
}

extension InternedWriter {
    /// Writes a save of a record made from a history item as the item's fields in a fixed order (operation
    /// 4), if it is one, with the changed keys as a mask: no table lookups, and reading it back builds no
    /// dictionary. False, having written nothing, for any other record.
    ///
    /// Operation 3, which older versions wrote and ``InternedReader`` still reads, held the device ID itself
    /// in every item: 37 of a burst's 93 bytes per change. Operation 4 numbers the devices of an entry (see
    /// ``writeDevice(of:)``).
    fileprivate mutating func writeHistoryItem(ofChangeAt change: UnsafePointer<RecordChange>) -> Bool {
        // Read where it is stored: no copy of the record.
        guard !change.pointee.isDelete,
            let item = change.pointee.carriedRecord.content.historyItem,
            change.pointee.carriedRecord.type == ReadingHistoryItem.recordType,
            change.pointee.carriedRecord.id.zone == ReadingHistoryItem.zone,
            ReadingHistoryItem.isRecordName(change.pointee.carriedRecord.id.name, of: item.compactArticleID),
            // The mask as the change holds it; the set of keys is built only for a change that has no mask.
            let mask = change.pointee.historyKeyMask ?? ReadingHistoryItem.keyMask(change.pointee.changedKeys)
        else { return false }
        writer.write(UInt8(4))
        item.compactArticleID.withUTF8 { utf8 in
            writer.write(varint: UInt64(utf8.count))
            writer.write(raw: utf8)
        }
        writer.write(change.pointee.carriedRecord.changeTag?.rawValue)
        writer.write(item.lastVisitedTime)
        writer.write(item.firstSeenTime)
        writer.write(item.likingChangedAtTime)
        writer.write(signed: item.maxVersionSeen)
        writer.write(signed: item.readCount)
        writeDevice(of: item)
        writer.write(UInt8(item.liking.rawValue))
        writer.write(signed: item.flags.rawValue)
        // A save that replaces its record sets a bit above the keys' (older versions never set it).
        writer.write(varint: UInt64(mask) | (change.pointee.replacesRecord ? Self.replacesRecordBit : 0))
        return true
    }

    /// The bit of a history save's key mask that says the save replaces its record: above any key's.
    static let replacesRecordBit: UInt64 = 1 << 15

    /// Writes an item's device as operation 4 holds it: 0 for none; 2 + n for the entry's device number n;
    /// or 1 followed by the device ID, which then takes the next number. An entry numbers its first 16
    /// devices; any beyond them is written with its ID each time (the reader numbers those too, unused).
    private mutating func writeDevice(of item: ReadingHistoryItem) {
        guard let device = item.device else {
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

/// Reads what ``InternedWriter`` wrote: the table first, then records that refer to it.
package struct InternedReader {
    private var table: [String] = []

    /// Reads the table at the reader's position.
    package init(_ reader: inout BinaryReader) throws(FlatSyncError) {
        var recent = LogStrings()
        try self.init(&reader, reusing: &recent)
    }

    /// Reads the table at the reader's position, sharing strings through `recent`.
    package init(_ reader: inout BinaryReader, reusing recent: inout LogStrings) throws(FlatSyncError) {
        let count = try reader.readCount()
        table.reserveCapacity(count)
        for _ in 0..<count { table.append(try reader.readString(reusing: &recent.strings)) }
    }

    package func readString(_ reader: inout BinaryReader) throws(FlatSyncError) -> String {
        let index = try reader.readVarint()
        guard index < UInt64(table.count) else {
            throw FlatSyncError(.damagedFile, "A command log entry refers to string \(index) of \(table.count).")
        }
        return table[Int(index)]
    }

    package func readRecordID(_ reader: inout BinaryReader) throws(FlatSyncError) -> RecordID {
        RecordID(zone: ZoneID(try readString(&reader)), name: try reader.readString())
    }

    package func readRecord(_ reader: inout BinaryReader) throws(FlatSyncError) -> Record {
        let id = try readRecordID(&reader)
        let type = try readString(&reader)
        let tag = try reader.readOptionalString().map(ChangeTag.init(rawValue:))
        let count = try reader.readCount()
        var fields = [String: FieldValue](minimumCapacity: count)
        for _ in 0..<count {
            let key = try readString(&reader)
            fields[key] = try reader.readFieldValue(tags: .commandLog)
        }
        return Record(id: id, type: type, fields: fields, changeTag: tag)
    }

    /// A record change; with `sequence` nil, its own sequence number is read from the bytes. `recent` shares
    /// device IDs across entries and holds the devices the entry has numbered (see
    /// ``LogStrings/startEntry()``): read an entry's changes through one.
    package func readRecordChange(
        _ reader: inout BinaryReader, sequence given: UInt64?, reusing recent: inout LogStrings
    ) throws(FlatSyncError) -> RecordChange {
        let sequence: UInt64
        if let given { sequence = given } else { sequence = try reader.readVarint() }
        switch try reader.readByte() {
        case let operation where operation == 1 || operation == 5:
            let record = try readRecord(&reader)
            let count = try reader.readCount()
            var keys = Set<String>(minimumCapacity: count)
            for _ in 0..<count { keys.insert(try readString(&reader)) }
            var change = RecordChange.save(record, changedKeys: keys, sequence: sequence)
            change.replacesRecord = operation == 5
            return change
        case 2:
            return .delete(try readRecordID(&reader), sequence: sequence)
        case 3:
            return try Self.readHistoryItemSave(&reader, sequence: sequence, numberedDevices: false, reusing: &recent)
        case 4:
            return try Self.readHistoryItemSave(&reader, sequence: sequence, numberedDevices: true, reusing: &recent)
        case let other:
            throw FlatSyncError(.damagedFile, "A record change has the unknown operation \(other).")
        }
    }

    /// A save written by ``InternedWriter/writeHistoryItem(ofChangeAt:)``: operation 4 when
    /// `numberedDevices`, else operation 3, whose items hold their device IDs.
    private static func readHistoryItemSave(
        _ reader: inout BinaryReader, sequence: UInt64, numberedDevices: Bool, reusing recent: inout LogStrings
    ) throws(FlatSyncError) -> RecordChange {
        // The article ID straight into its compact form and the record name, without a String of its own.
        let (articleID, name) = try reader.withStringBytes { utf8 in
            (CompactString(validUTF8: utf8), ReadingHistoryItem.recordName(articleUTF8: utf8))
        }
        let tag = try reader.readOptionalString().map(ChangeTag.init(rawValue:))
        let lastVisited = try reader.readDouble()
        let firstSeen = try reader.readDouble()
        let likingChangedAt = try reader.readDouble()
        let maxVersionSeen = try reader.readSigned()
        let readCount = try reader.readSigned()
        let device =
            numberedDevices
            ? try recent.readNumberedDevice(&reader)
            : try reader.readOptionalString(reusing: &recent.strings).map { recent.device($0) }
        guard let liking = ReadingHistoryItem.Liking(rawValue: Int64(try reader.readByte())) else {
            throw FlatSyncError(.damagedFile, "A history record has an unknown liking status.")
        }
        let flags = ReadingHistoryItem.Flags(rawValue: try reader.readSigned())
        let written = try reader.readVarint()
        let mask = written & ~InternedWriter.replacesRecordBit
        guard mask < 1 << ReadingHistoryItem.recordKeys.count else {
            throw FlatSyncError(.damagedFile, "A history record names changed keys that do not exist.")
        }
        let item = ReadingHistoryItem(
            compactArticleID: articleID, lastVisitedTime: lastVisited, firstSeenTime: firstSeen,
            maxVersionSeen: maxVersionSeen, readCount: readCount, device: device, liking: liking,
            likingChangedAtTime: likingChangedAt, flags: flags
        )
        let record = Record(
            id: RecordID(zone: ReadingHistoryItem.zone, name: name), type: ReadingHistoryItem.recordType,
            content: .historyItem(item), changeTag: tag)
        var change = RecordChange.save(record, historyKeyMask: Int(mask), sequence: sequence)
        change.replacesRecord = written & InternedWriter.replacesRecordBit != 0
        return change
    }
}

/// Strings that recur from one log entry to the next, shared instead of read again: zone names and device
/// IDs (see ``BinaryReader/readString(reusing:)``), and the device IDs' ``DeviceName``s.
package struct LogStrings {
    var strings: [String] = []
    private var devices: [DeviceName] = []
    /// The devices the entry being read has numbered so far (see ``InternedWriter/writeDevice(of:)``).
    private var entryDevices: [DeviceName] = []

    package init() {}

    /// Forgets the numbered devices of the entry read before: each entry numbers its own.
    mutating func startEntry() {
        entryDevices.removeAll(keepingCapacity: true)
    }

    /// Reads a device as operation 4 writes it.
    mutating func readNumberedDevice(_ reader: inout BinaryReader) throws(FlatSyncError) -> DeviceName? {
        switch try reader.readVarint() {
        case 0:
            return nil
        case 1:
            let name = device(try reader.readString(reusing: &strings))
            entryDevices.append(name)
            return name
        case let reference:
            let number = reference - 2
            guard number < UInt64(entryDevices.count) else {
                throw FlatSyncError(
                    .damagedFile, "A history record names device \(number) of the \(entryDevices.count) its entry has.")
            }
            return entryDevices[Int(number)]
        }
    }

    /// The shared name of a device ID read from the log.
    mutating func device(_ id: String) -> DeviceName {
        if let name = devices.first(where: { $0.value == id }) { return name }
        let name = DeviceName.named(id)
        devices.insert(name, at: 0)
        if devices.count > 4 { devices.removeLast() }
        return name
    }
}

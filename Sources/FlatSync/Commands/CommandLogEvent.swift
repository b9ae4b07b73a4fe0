import Foundation

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
    package func encoded() -> Data {
        // A batch is sized up front (a history change takes about 360 bytes), so its buffer is not copied
        // again at every doubling.
        var capacity = 128
        if case .mutation(let mutation) = self { capacity += mutation.changes.count * 384 }
        var writer = BinaryWriter(capacity: capacity)
        encode(to: &writer)
        return writer.data
    }

    package func encode(to writer: inout BinaryWriter) {
        switch self {
        case .mutation(let mutation):
            writer.write(Tag.mutation.rawValue)
            writer.write(varint: mutation.sequence)
            writer.write(mutation.zone.name)
            writer.write(varint: UInt64(mutation.changes.count))
            for change in mutation.changes { writer.write(change, sequence: false) }
        case .sealed(let zone):
            writer.write(Tag.sealed.rawValue)
            writer.write(zone.name)
        case .unsealed(let zone):
            writer.write(Tag.unsealed.rawValue)
            writer.write(zone.name)
        case .acknowledged(let command, let ids):
            writer.write(Tag.acknowledged.rawValue)
            writer.write(varint: command.rawValue)
            writer.write(varint: UInt64(ids.count))
            for id in ids { writer.write(id) }
        case .clearedZone(let zone, let sequence):
            writer.write(Tag.clearedZone.rawValue)
            writer.write(zone.name)
            writer.write(varint: sequence)
        case .clearedAll(let sequence):
            writer.write(Tag.clearedAll.rawValue)
            writer.write(varint: sequence)
        case .restored(let command):
            writer.write(Tag.restored.rawValue)
            writer.write(varint: command.id.rawValue)
            writer.write(command.zone.name)
            writer.write(command.kind.rawValue)
            writer.write(varint: UInt64(command.changes.count))
            for change in command.orderedChanges { writer.write(change, sequence: true) }
        case .applied(let zone, let changes):
            writer.write(Tag.applied.rawValue)
            writer.write(zone.name)
            writer.write(varint: UInt64(changes.count))
            for change in changes { writer.write(change, sequence: true) }
        case .counters(let nextSequence, let nextCommandID):
            writer.write(Tag.counters.rawValue)
            writer.write(varint: nextSequence)
            writer.write(varint: nextCommandID)
        }
    }

    /// Decodes one event, failing with ``FlatSyncError/Code-swift.struct/damagedFile`` on bytes that are not
    /// an event (or ``FlatSyncError/Code-swift.struct/unsupportedFormatVersion`` for an unknown kind).
    package static func decode(_ data: Data) throws(FlatSyncError) -> CommandLogEvent {
        try data.withBinaryReader { (reader) throws(FlatSyncError) -> CommandLogEvent in
            let event = try decode(from: &reader)
            guard reader.isAtEnd else {
                throw FlatSyncError(.damagedFile, "A command log entry has \(reader.remaining) bytes too many.")
            }
            return event
        }
    }

    package static func decode(from reader: inout BinaryReader) throws(FlatSyncError) -> CommandLogEvent {
        let rawTag = try reader.readByte()
        guard let tag = Tag(rawValue: rawTag) else {
            throw FlatSyncError(
                .unsupportedFormatVersion,
                "The command log holds an entry of kind \(rawTag), written by a newer FlatSync."
            )
        }
        switch tag {
        case .mutation:
            let sequence = try reader.readVarint()
            let zone = ZoneID(try reader.readString())
            let count = try reader.readCount()
            var changes: [RecordChange] = []
            changes.reserveCapacity(count)
            for _ in 0..<count { changes.append(try reader.readRecordChange(sequence: sequence)) }
            return .mutation(Mutation(sequence: sequence, zone: zone, changes: changes))
        case .sealed:
            return .sealed(ZoneID(try reader.readString()))
        case .unsealed:
            return .unsealed(ZoneID(try reader.readString()))
        case .acknowledged:
            let command = CommandID(try reader.readVarint())
            let count = try reader.readCount()
            var ids: [RecordID] = []
            ids.reserveCapacity(count)
            for _ in 0..<count { ids.append(try reader.readRecordID()) }
            return .acknowledged(command, ids)
        case .clearedZone:
            return .clearedZone(ZoneID(try reader.readString()), sequence: try reader.readVarint())
        case .clearedAll:
            return .clearedAll(sequence: try reader.readVarint())
        case .restored:
            let id = CommandID(try reader.readVarint())
            let zone = ZoneID(try reader.readString())
            guard let kind = Command.Kind(rawValue: try reader.readByte()) else {
                throw FlatSyncError(.damagedFile, "A restored command has an unknown kind.")
            }
            let count = try reader.readCount()
            var changes: [RecordID: RecordChange] = [:]
            changes.reserveCapacity(count)
            for _ in 0..<count {
                let change = try reader.readRecordChange(sequence: nil)
                changes[change.recordID] = change
            }
            return .restored(Command(id: id, zone: zone, kind: kind, changes: changes))
        case .applied:
            let zone = ZoneID(try reader.readString())
            let count = try reader.readCount()
            var changes: [RecordChange] = []
            changes.reserveCapacity(count)
            for _ in 0..<count { changes.append(try reader.readRecordChange(sequence: nil)) }
            return .applied(zone, changes)
        case .counters:
            return .counters(nextSequence: try reader.readVarint(), nextCommandID: try reader.readVarint())
        }
    }
}

// MARK: - Records in binary

extension BinaryWriter {
    private enum FieldTag: UInt8 { case string = 1, int, date }

    package mutating func write(_ id: RecordID) {
        write(id.zone.name)
        write(id.name)
    }

    package mutating func write(_ record: Record) {
        write(record.id)
        write(record.type)
        write(record.changeTag?.rawValue)
        write(varint: UInt64(record.fields.count))
        // Sorted keys make equal records encode to equal bytes. The pairs are sorted in a buffer on the stack:
        // a sorted array on the heap, then a lookup per key, cost about as much as writing the record.
        withUnsafeTemporaryAllocation(of: (key: String, value: FieldValue).self, capacity: record.fields.count) { buffer in
            var pairs = UnsafeMutableBufferPointer(rebasing: buffer[..<buffer.initialize(fromContentsOf: record.fields)])
            defer { pairs.deinitialize() }
            pairs.sort { $0.key < $1.key }
            for (key, value) in pairs {
                write(key)
                switch value {
                case .string(let value):
                    write(FieldTag.string.rawValue)
                    write(value)
                case .int(let value):
                    write(FieldTag.int.rawValue)
                    write(signed: value)
                case .date(let value):
                    write(FieldTag.date.rawValue)
                    write(value)
                }
            }
        }
    }

    /// Strings in sorted order, sorted in a buffer on the stack.
    private mutating func writeSorted(_ strings: Set<String>) {
        write(varint: UInt64(strings.count))
        withUnsafeTemporaryAllocation(of: String.self, capacity: strings.count) { buffer in
            var sorted = UnsafeMutableBufferPointer(rebasing: buffer[..<buffer.initialize(fromContentsOf: strings)])
            defer { sorted.deinitialize() }
            sorted.sort()
            for string in sorted { write(string) }
        }
    }

    /// A record change; `sequence` says whether its own sequence number is written (a mutation's changes
    /// share the mutation's).
    package mutating func write(_ change: RecordChange, sequence: Bool) {
        if sequence { write(varint: change.sequence) }
        switch change.operation {
        case .save(let record):
            write(UInt8(1))
            write(record)
            writeSorted(change.changedKeys)
        case .delete:
            write(UInt8(2))
            write(change.recordID)
        }
    }
}

extension BinaryReader {
    package mutating func readRecordID() throws(FlatSyncError) -> RecordID {
        RecordID(zone: ZoneID(try readString()), name: try readString())
    }

    package mutating func readRecord() throws(FlatSyncError) -> Record {
        let id = try readRecordID()
        let type = try readString()
        let tag = try readOptionalString().map(ChangeTag.init(rawValue:))
        let count = try readCount()
        var fields: [String: FieldValue] = [:]
        fields.reserveCapacity(count)
        for _ in 0..<count {
            let key = try readString()
            switch try readByte() {
            case 1: fields[key] = .string(try readString())
            case 2: fields[key] = .int(try readSigned())
            case 3: fields[key] = .date(try readDate())
            case let other:
                throw FlatSyncError(.damagedFile, "A record field has the unknown type \(other).")
            }
        }
        return Record(id: id, type: type, fields: fields, changeTag: tag)
    }

    /// A record change; with `sequence` nil, its own sequence number is read from the bytes.
    package mutating func readRecordChange(sequence given: UInt64?) throws(FlatSyncError) -> RecordChange {
        let sequence: UInt64
        if let given { sequence = given } else { sequence = try readVarint() }
        switch try readByte() {
        case 1:
            let record = try readRecord()
            let count = try readCount()
            var keys = Set<String>(minimumCapacity: count)
            for _ in 0..<count { keys.insert(try readString()) }
            return .save(record, changedKeys: keys, sequence: sequence)
        case 2:
            return .delete(try readRecordID(), sequence: sequence)
        case let other:
            throw FlatSyncError(.damagedFile, "A record change has the unknown operation \(other).")
        }
    }
}

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
    /// than half as large to encode, checksum, write and flush. A save whose record holds a store's value
    /// with a log form of its own (a history item) is written in that form (see ``StoredRecordContent``).
    package func encoded() -> Data {
        if case .mutation(let mutation) = self, let data = Self.encodedInterningOnlyTheZone(mutation) { return data }
        var writer = BinaryWriter(capacity: 128)
        encode(to: &writer)
        return writer.data
    }

    /// A mutation whose changes intern no string but their zone's name (saves in a store's own form,
    /// deletes), encoded as ``encode(to:)`` would, but with its one-string table written first and the
    /// changes straight after it: no second buffer to copy a 10,000-change batch's megabyte from. Nil when
    /// a change interns anything else.
    private static func encodedInterningOnlyTheZone(_ mutation: Mutation) -> Data? {
        // A save written as fields interns its record type and keys (a reading-list add): no use starting.
        if let first = mutation.changes.first, !first.isDelete, !first.carriedRecord.content.hasOwnLogForm {
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
                // A save written as fields interns its record type and keys: give up before writing it, or a
                // reading-list add would be written here and then again by ``encode(to:)``.
                if !change.pointee.isDelete, !change.pointee.carriedRecord.content.hasOwnLogForm { return false }
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

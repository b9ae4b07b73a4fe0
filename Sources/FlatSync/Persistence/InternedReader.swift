#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
        case let operation where operation == 1 || operation == 5 || operation == 7 || operation == 8:
            let record = try readRecord(&reader)
            let count = try reader.readCount()
            var keys = Set<String>(minimumCapacity: count)
            for _ in 0..<count { keys.insert(try readString(&reader)) }
            guard operation >= 7 else {
                var change = RecordChange.save(record, changedKeys: keys, sequence: sequence)
                change.replacesRecord = operation == 5
                return change
            }
            let baseCount = try reader.readCount()
            var base = [String: FieldValue](minimumCapacity: baseCount)
            for _ in 0..<baseCount {
                let key = try readString(&reader)
                guard keys.contains(key) else {
                    throw FlatSyncError(
                        .damagedFile, "A record change has a value before it for a key it did not change.")
                }
                base[key] = try reader.readFieldValue(tags: .commandLog)
            }
            return .save(record, changedKeys: keys, baseValues: base, rebases: operation == 8, sequence: sequence)
        case 2:
            return .delete(try readRecordID(&reader), sequence: sequence)
        case 6:
            let id = try readRecordID(&reader)
            return .cascadedDelete(id, owner: try readString(&reader), sequence: sequence)
        case let other:
            // A store's own form (see ``StoredRecordContent/logOperations``).
            guard let content = StoredRecordContentTypes.readingLogOperation(other) else {
                throw FlatSyncError(.damagedFile, "A record change has the unknown operation \(other).")
            }
            return try content.readLogSave(operation: other, &reader, sequence: sequence, reusing: &recent)
        }
    }
}

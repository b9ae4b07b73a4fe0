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

/// The history's own form of its saves in the command log: the item's fields in a fixed order, with its
/// device numbered within the entry and its changed keys as a mask. A burst writes thousands of these, and
/// every open reads them back: no table lookups, and reading one builds no dictionary.
///
/// Operation 4. Operation 3, which older versions wrote and this still reads, held the device ID itself in
/// every item: 37 of a burst's 93 bytes per change.
extension ReadingHistoryItem: StoredRecordContent {
    package static var recordKeySets: RecordKeySets? { keySets }

    package static var hasOwnLogForm: Bool { true }

    package static let logOperations: [UInt8] = [3, 4]

    /// The bit of a save's key mask that says the save replaces its record: above any key's.
    private static let replacesRecordBit: UInt64 = 1 << 15

    package static func writeLogSave(
        _ item: ReadingHistoryItem, ofChangeAt change: UnsafePointer<RecordChange>, to interned: inout InternedWriter
    ) -> Bool {
        // Read where it is stored: no copy of the record.
        guard !change.pointee.isDelete,
            change.pointee.carriedRecord.type == recordType,
            change.pointee.carriedRecord.id.zone == zone,
            isRecordName(change.pointee.carriedRecord.id.name, of: item.compactArticleID),
            // The mask as the change holds it; the set of keys is built only for a change that has no mask.
            let mask = change.pointee.keyMask ?? keyMask(change.pointee.changedKeys)
        else { return false }
        interned.writer.write(UInt8(4))
        item.compactArticleID.withUTF8 { utf8 in
            interned.writer.write(varint: UInt64(utf8.count))
            interned.writer.write(raw: utf8)
        }
        interned.writer.write(change.pointee.carriedRecord.changeTag?.rawValue)
        interned.writer.write(item.lastVisitedTime)
        interned.writer.write(item.firstSeenTime)
        interned.writer.write(item.likingChangedAtTime)
        interned.writer.write(signed: item.maxVersionSeen)
        interned.writer.write(signed: item.readCount)
        interned.writeNumbered(item.device)
        interned.writer.write(UInt8(item.liking.rawValue))
        interned.writer.write(signed: item.flags.rawValue)
        // A save that replaces its record sets a bit above the keys' (older versions never set it).
        interned.writer.write(varint: UInt64(mask) | (change.pointee.replacesRecord ? replacesRecordBit : 0))
        return true
    }

    package static func readLogSave(
        operation: UInt8, _ reader: inout BinaryReader, sequence: UInt64, reusing recent: inout LogStrings
    ) throws(FlatSyncError) -> RecordChange {
        // The article ID straight into its compact form and the record name, without a String of its own.
        let (articleID, name) = try reader.withStringBytes { utf8 in
            (CompactString(validUTF8: utf8), recordName(articleUTF8: utf8))
        }
        let tag = try reader.readOptionalString().map(ChangeTag.init(rawValue:))
        let lastVisited = try reader.readDouble()
        let firstSeen = try reader.readDouble()
        let likingChangedAt = try reader.readDouble()
        let maxVersionSeen = try reader.readSigned()
        let readCount = try reader.readSigned()
        let device =
            operation == 4
            ? try recent.readNumberedDevice(&reader)
            : try reader.readOptionalString(reusing: &recent.strings).map { recent.device($0) }
        guard let liking = Liking(rawValue: Int64(try reader.readByte())) else {
            throw FlatSyncError(.damagedFile, "A history record has an unknown liking status.")
        }
        let flags = Flags(rawValue: try reader.readSigned())
        let written = try reader.readVarint()
        let mask = written & ~replacesRecordBit
        guard mask < 1 << recordKeys.count else {
            throw FlatSyncError(.damagedFile, "A history record names changed keys that do not exist.")
        }
        let item = ReadingHistoryItem(
            compactArticleID: articleID, lastVisitedTime: lastVisited, firstSeenTime: firstSeen,
            maxVersionSeen: maxVersionSeen, readCount: readCount, device: device, liking: liking,
            likingChangedAtTime: likingChangedAt, flags: flags
        )
        var change = RecordChange.save(
            content: item, type: recordType, id: RecordID(zone: zone, name: name), changeTag: tag,
            keyMask: Int(mask), sequence: sequence)
        change.replacesRecord = written & replacesRecordBit != 0
        return change
    }
}

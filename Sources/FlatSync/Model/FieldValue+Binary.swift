#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The byte that precedes each ``FieldValue`` in one binary file format, by kind.
///
/// The command log and the test cloud's state file numbered their kinds before they shared this codec,
/// so each keeps its numbering; kinds added later get the next free numbers in both.
package struct FieldValueTags: Sendable {
    var string: UInt8
    var int: UInt8
    var date: UInt8
    var double: UInt8
    var bytes: UInt8
    var list: UInt8
    var reference: UInt8
    var opaque: UInt8
    /// Dates as plain doubles, keeping every bit pattern (a server keeps whatever it was sent), rather
    /// than as dates that must be finite.
    var rawDates: Bool

    /// The command log's numbering.
    package static let commandLog = FieldValueTags(
        string: 1, int: 2, date: 3, double: 4, bytes: 5, list: 6, reference: 7, opaque: 8, rawDates: false)
    /// The `DirectoryCloud` state file's numbering.
    package static let cloudState = FieldValueTags(
        string: 0, int: 1, date: 2, double: 3, bytes: 4, list: 5, reference: 6, opaque: 7, rawDates: true)
}

extension BinaryWriter {
    /// Writes `value` as its kind's tag followed by its payload.
    package mutating func write(_ value: FieldValue, tags: FieldValueTags) {
        switch value {
        case .string(let value):
            write(tags.string)
            write(value)
        case .int(let value):
            write(tags.int)
            write(signed: value)
        case .date(let value):
            write(tags.date)
            write(value.timeIntervalSinceReferenceDate)
        case .double(let value):
            write(tags.double)
            write(value)
        case .bytes(let value):
            write(tags.bytes)
            write(value)
        case .list(let values):
            write(tags.list)
            write(varint: UInt64(values.count))
            for element in values { write(element, tags: tags) }
        case .reference(let value):
            write(tags.reference)
            write(value.recordName)
            write(value.zoneName)
            write(value.action.rawValue)
        case .opaque(let value):
            write(tags.opaque)
            write(value.type)
            write(value.json)
        }
    }
}

extension BinaryReader {
    /// Lists nest at most this deep, so damaged bytes cannot recurse without bound.
    private static let maximumListDepth = 8

    /// Reads a value written by ``BinaryWriter/write(_:tags:)`` with the same tags.
    package mutating func readFieldValue(tags: FieldValueTags) throws(FlatSyncError) -> FieldValue {
        try readFieldValue(tags: tags, depth: 0)
    }

    /// Checks the value written by ``BinaryWriter/write(_:tags:)`` at the offset and steps over it, making
    /// no value of a string, a number or bytes (each is checked as ``readFieldValue(tags:)`` would check
    /// it); the references in a reference or a list are added to `references`.
    package mutating func checkFieldValue(
        tags: FieldValueTags, references: inout [RecordReference]
    ) throws(FlatSyncError) {
        let tag = try peekByte()
        guard tag != tags.list, tag != tags.reference else {
            references += RecordReference.all(in: [try readFieldValue(tags: tags)])
            return
        }
        switch try readByte() {
        case tags.string: try withStringBytes { _ in }
        case tags.int: _ = try readSigned()
        case tags.date:
            if tags.rawDates { _ = try readDouble() } else { _ = try readDate() }
        case tags.double: _ = try readDouble()
        case tags.bytes: try skip(byteCount: try readCount())
        case tags.opaque:
            try withStringBytes { _ in }
            try withStringBytes { _ in }
        case let other:
            throw FlatSyncError(.damagedFile, "A record field has the unknown type \(other).")
        }
    }

    private mutating func readFieldValue(tags: FieldValueTags, depth: Int) throws(FlatSyncError) -> FieldValue {
        switch try readByte() {
        case tags.string: return .string(try readString())
        case tags.int: return .int(try readSigned())
        case tags.date:
            if tags.rawDates { return .date(Date(timeIntervalSinceReferenceDate: try readDouble())) }
            return .date(try readDate())
        case tags.double: return .double(try readDouble())
        case tags.bytes: return .bytes(try readData())
        case tags.list:
            guard depth < Self.maximumListDepth else {
                throw FlatSyncError(.damagedFile, "A record field nests lists deeper than \(Self.maximumListDepth).")
            }
            let count = try readCount()
            var values: [FieldValue] = []
            values.reserveCapacity(min(count, remaining))
            for _ in 0..<count { values.append(try readFieldValue(tags: tags, depth: depth + 1)) }
            return .list(values)
        case tags.reference:
            let name = try readString()
            let zone = try readOptionalString()
            let actionName = try readString()
            guard let action = RecordReference.Action(rawValue: actionName) else {
                throw FlatSyncError(.damagedFile, "A record reference has the unknown action \(actionName).")
            }
            return .reference(RecordReference(recordName: name, zoneName: zone, action: action))
        case tags.opaque:
            return .opaque(OpaqueFieldValue(type: try readString(), json: try readString()))
        case let other:
            throw FlatSyncError(.damagedFile, "A record field has the unknown type \(other).")
        }
    }
}

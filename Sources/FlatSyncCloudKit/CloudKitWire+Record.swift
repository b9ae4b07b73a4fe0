import FlatSync
import Foundation

extension CloudKitWire {
    /// The reserved field that carries `Record.lastModifiedBy`.
    ///
    /// CKWS reports the writer of a version as `modified.deviceID`, but a web client cannot say what to
    /// put there (who sets it for a web client is not documented), so FlatSync sends its device ID as
    /// an ordinary STRING field under this name and reads it back from there first, then from
    /// `modified.deviceID`. In a production container it must be part of each record type's schema.
    static let lastModifiedByField = "fsLastModifiedBy"

    /// The fields to send for `record`, with `lastModifiedBy` as the reserved field; refuses what CKWS
    /// cannot carry.
    static func outgoingFields(of record: Record) throws(FieldProblem) -> [String: FieldValue] {
        var fields = record.fields
        for (key, value) in fields {
            guard key != lastModifiedByField else {
                throw FieldProblem("the field name \(lastModifiedByField) is reserved for the writer's device ID")
            }
            do {
                try check(value)
            } catch {
                throw FieldProblem("field \(key) of \(record.id): \(error.description)")
            }
        }
        if let writer = record.lastModifiedBy { fields[lastModifiedByField] = .string(writer) }
        return fields
    }

    private static func check(_ value: FieldValue) throws(FieldProblem) {
        _ = try Field.typeName(of: value)
        switch value {
        case .double(let double) where !double.isFinite:
            throw FieldProblem("\(double) is a number JSON cannot carry")
        case .date(let date): _ = try Field.milliseconds(date)
        case .list(let elements): for element in elements { try check(element) }
        default: break
        }
    }

    /// The record in a response entry, in `zone`. Throws ``FieldProblem`` when the entry lacks the name
    /// or type a record needs.
    static func record(from entry: RecordEntry, in zone: FlatSync.ZoneID) throws(FieldProblem) -> Record {
        guard let name = entry.recordName, !name.isEmpty else { throw FieldProblem("a record has no recordName") }
        guard let type = entry.recordType, !type.isEmpty else {
            throw FieldProblem("the record \(name) has no recordType")
        }
        var fields = entry.fields
        var writer = fields.removeValue(forKey: lastModifiedByField)?.stringValue
        if writer == nil, let deviceID = entry.modifiedBy, !deviceID.isEmpty {
            writer = deviceID
        }
        return Record(
            id: RecordID(zone: zone, name: name), type: type, fields: fields,
            changeTag: entry.recordChangeTag.map(ChangeTag.init(rawValue:)), lastModifiedBy: writer)
    }
}

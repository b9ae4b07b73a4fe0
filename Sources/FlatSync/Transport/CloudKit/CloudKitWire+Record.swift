import Foundation

extension CloudKitWire {
    /// The reserved field that carries ``Record/lastModifiedBy``.
    ///
    /// CKWS reports the writer of a version as `modified.deviceID`, but a web client cannot say what to
    /// put there (who sets it for a web client is not documented), so FlatSync sends its device ID as
    /// an ordinary STRING field under this name and reads it back from there first, then from
    /// `modified.deviceID`. In a production container it must be part of each record type's schema.
    static let lastModifiedByField = "fsLastModifiedBy"

    /// A record to send: its name, type, tag and fields, with `lastModifiedBy` as the reserved field.
    static func outgoing(_ record: Record, tag: ChangeTag?) throws -> OutgoingRecord {
        var fields: [String: Field] = [:]
        fields.reserveCapacity(record.fields.count + 1)
        for (key, value) in record.fields {
            guard key != lastModifiedByField else {
                throw FieldProblem("the field name \(lastModifiedByField) is reserved for the writer's device ID")
            }
            do {
                _ = try Field.typeName(of: value)
            } catch let problem as FieldProblem {
                throw FieldProblem("field \(key) of \(record.id): \(problem.description)")
            }
            if case .double(let double) = value, !double.isFinite {
                throw FieldProblem("field \(key) of \(record.id) is \(double), which JSON cannot carry")
            }
            if case .date(let date) = value {
                _ = try Field.milliseconds(date)
            }
            fields[key] = Field(value)
        }
        if let writer = record.lastModifiedBy {
            fields[lastModifiedByField] = Field(.string(writer))
        }
        return OutgoingRecord(
            recordName: record.id.name, recordType: record.type, recordChangeTag: tag?.rawValue, fields: fields)
    }

    /// The record in a response entry, in `zone`. Throws ``FieldProblem`` when the entry lacks the name
    /// or type a record needs.
    static func record(from entry: RecordEntry, in zone: FlatSync.ZoneID) throws -> Record {
        guard let name = entry.recordName, !name.isEmpty else { throw FieldProblem("a record has no recordName") }
        guard let type = entry.recordType, !type.isEmpty else {
            throw FieldProblem("the record \(name) has no recordType")
        }
        var fields: [String: FieldValue] = [:]
        var writer: String?
        for (key, field) in entry.fields ?? [:] {
            guard let value = field.value else { continue }
            if key == lastModifiedByField {
                writer = value.stringValue
            } else {
                fields[key] = value
            }
        }
        if writer == nil, let deviceID = entry.modified?.deviceID, !deviceID.isEmpty {
            writer = deviceID
        }
        return Record(
            id: RecordID(zone: zone, name: name), type: type, fields: fields,
            changeTag: entry.recordChangeTag.map(ChangeTag.init(rawValue:)), lastModifiedBy: writer)
    }
}

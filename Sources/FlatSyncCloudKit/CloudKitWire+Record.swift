import FlatSync
import Foundation

extension CloudKitWire {
    /// The reserved field that carries `Record.lastModifiedBy`.
    ///
    /// CKWS reports the writer of a version as `modified.deviceID`, but a web client cannot say what to
    /// put there (who sets it for a web client is not documented), so FlatSync sends its device ID as
    /// an ordinary STRING field under this name and reads it back from there only: `modified.deviceID` is
    /// whatever the server calls the device, never a FlatSync ID, so a version without the field (written
    /// only by native apps) has no `lastModifiedBy`. It is part of every record type of
    /// `CloudSchema.flatSync`: a production container needs it deployed.
    ///
    /// A client that does not know the field (a native app on the same container) leaves it as it was when
    /// it saves only its changed keys, so after such a save it still names the last FlatSync device that
    /// wrote: a known limit of telling one's own writes by it (the engine's checks for a lost response).
    static let lastModifiedByField = CloudSchema.lastModifiedByField

    /// The fields to send for `record`, with `lastModifiedBy` as the reserved field, and the type each is
    /// declared with in `schema`. Refuses what CKWS cannot carry and, with a schema, any record type it does
    /// not declare or a value of another type than its field's: the engine never writes outside its schema.
    ///
    /// A field the schema does not declare is one the record brought from the server (a store writes only
    /// declared fields: another client, a later version of the app, wrote it), so it is in the container's
    /// schema. It is left out where the server keeps it anyway (`keepsUnsentFields`: an update), and sent
    /// back as it came otherwise (a create or a replace, which would drop it); refusing it parked the
    /// record for good.
    ///
    /// Without a schema, `declared` (the types contexts declared; no limit) still gives the type of a field
    /// it declares, when the value fits it: an encrypted one goes out marked `isEncrypted` (unmarked, CloudKit
    /// refuses it), and an empty list with its declared element type rather than as a `STRING_LIST`.
    static func outgoingFields(
        of record: Record, schema: CloudSchema?, declared contextTypes: CloudSchema? = nil,
        keepsUnsentFields: Bool = false
    ) throws(FieldProblem) -> (fields: [String: FieldValue], types: [String: CloudSchema.FieldType]) {
        var fields = record.fields
        if fields[lastModifiedByField] != nil {
            throw FieldProblem("the field name \(lastModifiedByField) is reserved for the writer's device ID")
        }
        if let writer = record.lastModifiedBy { fields[lastModifiedByField] = .string(writer) }
        var types: [String: CloudSchema.FieldType] = [:]
        let declared: [String: CloudSchema.FieldType]?
        if let schema {
            guard let recordFields = schema.recordTypes[record.type] else {
                throw FieldProblem("the record type \(record.type) is not in the transport's schema")
            }
            declared = recordFields
        } else {
            declared = nil
        }
        for (key, value) in fields {
            do throws(FieldProblem) {
                if let declared, declared[key] == nil, keepsUnsentFields {
                    fields[key] = nil
                    continue
                }
                try Field.check(value)
                if let type = declared?[key] {
                    _ = try Field.typeName(of: value, declared: type)
                    types[key] = type
                } else if declared == nil, let type = contextTypes?.type(of: key, in: record.type), type.accepts(value)
                {
                    types[key] = type
                }
            } catch {
                throw FieldProblem("field \(key) of \(record.id): \(error.description)")
            }
        }
        return (fields, types)
    }

    /// The record in a response entry, in `zone`. Throws ``FieldProblem`` when the entry lacks the name
    /// or type a record needs.
    static func record(from entry: RecordEntry, in zone: FlatSync.ZoneID) throws(FieldProblem) -> Record {
        guard let name = entry.recordName, !name.isEmpty else { throw FieldProblem("a record has no recordName") }
        guard let type = entry.recordType, !type.isEmpty else {
            throw FieldProblem("the record \(name) has no recordType")
        }
        var fields = entry.fields
        let writer = fields.removeValue(forKey: lastModifiedByField)?.stringValue
        return Record(
            id: RecordID(zone: zone, name: name), type: type, fields: fields,
            changeTag: entry.recordChangeTag.map(ChangeTag.init(rawValue:)), lastModifiedBy: writer)
    }
}

import FlatSync
import FlatSyncCloudKit
import Foundation

/// Records and fields in CKWS JSON, both ways, as the emulator sends and reads them.
///
/// Fields are `{"value": V, "type": "T"}`: STRING a string, INT64 an integer, DOUBLE a number, TIMESTAMP
/// an integer count of milliseconds since 1970 (a floating count is accepted too), BYTES a base64 string,
/// and `<TYPE>_LIST` a JSON array of those (an empty list goes out as `STRING_LIST`: a stored empty list
/// has no element type). The writer's device ID (``Record/lastModifiedBy``) travels as the reserved
/// STRING field `fsLastModifiedBy`, which the emulator stores apart from the fields and sends back both
/// as that field and as `modified.deviceID`.
enum CloudKitRecordJSON {
    /// The reserved field carrying ``Record/lastModifiedBy`` (the contract's, not CloudKit's).
    static let lastModifiedByField = "fsLastModifiedBy"

    // MARK: - Writing

    /// A record as the emulator sends it. CloudDatabase keeps no times, so `created` and `modified` carry
    /// the time of the response (emulator behaviour).
    ///
    /// Its objects are built in key order (the order the emulator writes them in), so that writing them
    /// sorts nothing but the fields.
    static func record(_ record: Record, userRecordName: String, now: Date) -> JSONValue {
        var fields: [(key: String, value: JSONValue)] = []
        fields.reserveCapacity(record.fields.count + 1)
        for (key, value) in record.fields {
            fields.append((key, field(value)))
        }
        if let writer = record.lastModifiedBy {
            fields.append((lastModifiedByField, field(.string(writer))))
        }
        fields.sort { $0.key < $1.key }
        let timestamp = JSONValue.integer(milliseconds(now))
        let user = JSONValue.string(userRecordName)
        var members: [(key: String, value: JSONValue)] = [
            ("created", ["deviceID": "", "timestamp": timestamp, "userRecordName": user]),
            ("deleted", false),
            ("fields", .object(fields)),
            (
                "modified",
                ["deviceID": .string(record.lastModifiedBy ?? ""), "timestamp": timestamp, "userRecordName": user]
            ),
        ]
        if let tag = record.changeTag { members.append(("recordChangeTag", .string(tag.rawValue))) }
        members.append(("recordName", .string(record.id.name)))
        members.append(("recordType", .string(record.type)))
        members.append(("zoneID", CloudKitJSON.zoneID(record.id.zone)))
        return .object(members)
    }

    /// A deleted record: `{"recordName": …, "deleted": true}`.
    static func tombstone(_ name: String) -> JSONValue {
        ["deleted": true, "recordName": .string(name)]
    }

    /// One field.
    static func field(_ value: FieldValue) -> JSONValue {
        ["type": .string(typeName(value)), "value": jsonValue(value)]
    }

    private static func typeName(_ value: FieldValue) -> String {
        switch value {
        case .string: return "STRING"
        case .int: return "INT64"
        case .double: return "DOUBLE"
        case .date: return "TIMESTAMP"
        case .bytes: return "BYTES"
        case .list(let elements): return (elements.first.map(typeName) ?? "STRING") + "_LIST"
        }
    }

    private static func jsonValue(_ value: FieldValue) -> JSONValue {
        switch value {
        case .string(let string): return .string(string)
        case .int(let int): return .integer(int)
        // JSON has no infinity or NaN; such a value (saved by a non-HTTP client) goes out as null.
        case .double(let double): return .double(double)
        case .date(let date): return .integer(milliseconds(date))
        case .bytes(let data): return .string(data.base64EncodedString())
        case .list(let elements): return .array(elements.map(jsonValue))
        }
    }

    /// A date as whole milliseconds since 1970, rounded to the nearest; clamped to the Int64 range
    /// (a date JSON cannot express, saved by a non-HTTP client, is sent as the nearest one it can).
    static func milliseconds(_ date: Date) -> Int64 {
        let milliseconds = (date.timeIntervalSince1970 * 1_000).rounded()
        guard milliseconds.isFinite else { return 0 }
        if milliseconds >= 9.223_372_036_854_775_807e18 { return .max }
        if milliseconds <= -9.223_372_036_854_775_808e18 { return .min }
        return Int64(milliseconds)
    }

    // MARK: - Reading

    /// A record a client sent for `zone`: name, type, tag and fields, with `fsLastModifiedBy` moved into
    /// ``Record/lastModifiedBy``. A missing `recordName` gets a random UUID, as CKWS documents.
    static func record(
        from value: JSONValue?, in zone: ZoneID, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> Record {
        let object = try CloudKitJSON.object(value, what())
        let name = try CloudKitJSON.optionalString(object["recordName"], "\(what()).recordName") ?? UUID().uuidString
        let type = try CloudKitJSON.optionalString(object["recordType"], "\(what()).recordType") ?? ""
        let tag = try CloudKitJSON.optionalString(object["recordChangeTag"], "\(what()).recordChangeTag")
        var fields: [String: FieldValue] = [:]
        var writer: String?
        if let rawFields = object["fields"], rawFields != .null {
            for (key, rawField) in try CloudKitJSON.object(rawFields, "\(what()).fields") {
                let value = try field(from: rawField, "field \(key) of record \(name)")
                if key == lastModifiedByField {
                    guard case .string(let string) = value else {
                        throw CloudKitJSON.Problem("The field \(lastModifiedByField) must be a STRING.")
                    }
                    writer = string
                } else {
                    fields[key] = value
                }
            }
        }
        return Record(
            id: RecordID(zone: zone, name: name), type: type, fields: fields, changeTag: tag.map { ChangeTag($0) },
            lastModifiedBy: writer
        )
    }

    /// One field a client sent. Without `type`, the type is guessed from the JSON as CKWS does (a string
    /// is a STRING, an integer an INT64, another number a DOUBLE, an array a list of those); a type the
    /// emulator cannot store (REFERENCE, ASSET, LOCATION, …) or a `null` value is refused. `what` names the
    /// field in an error and is built only then: a push of 10,000 records made 130,000 such names.
    static func field(
        from value: JSONValue, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> FieldValue {
        // The two members read straight from the object's list (the later of a repeated key, as a dictionary
        // of them would keep): a dictionary per field was most of the time the emulator spent on a push.
        var typeMember: JSONValue?
        var valueMember: JSONValue?
        for member in try CloudKitJSON.members(value, what()) {
            if member.key == "type" {
                typeMember = member.value
            } else if member.key == "value" {
                valueMember = member.value
            }
        }
        let type = try CloudKitJSON.optionalString(typeMember, "\(what()).type")
        guard let raw = valueMember, raw != .null else {
            throw CloudKitJSON.Problem(
                "The \(what()) has no value (removing a field is not supported by the emulator).")
        }
        guard let type else { return try inferredValue(raw, what()) }
        if type.hasSuffix("_LIST") {
            let elementType = String(type.dropLast("_LIST".count))
            guard scalarTypes.contains(elementType) else {
                throw CloudKitJSON.Problem("The \(what()) has the type \(type), which the emulator does not store.")
            }
            let elements = try CloudKitJSON.array(raw, "The value of the \(what())")
            var values: [FieldValue] = []
            values.reserveCapacity(elements.count)
            for element in elements {
                values.append(try scalar(element, type: elementType, "an element of the \(what())"))
            }
            return .list(values)
        }
        guard scalarTypes.contains(type) else {
            throw CloudKitJSON.Problem("The \(what()) has the type \(type), which the emulator does not store.")
        }
        return try scalar(raw, type: type, "the \(what())")
    }

    private static let scalarTypes: Set<String> = ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES"]

    private static func scalar(
        _ raw: JSONValue, type: String, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> FieldValue {
        switch type {
        case "STRING":
            return .string(try CloudKitJSON.string(raw, "The value of \(what()) (STRING)"))
        case "INT64":
            return .int(try CloudKitJSON.int64(raw, "The value of \(what()) (INT64)"))
        case "DOUBLE":
            return .double(try CloudKitJSON.double(raw, "The value of \(what()) (DOUBLE)"))
        case "TIMESTAMP":
            let milliseconds: Double
            if let whole = try? CloudKitJSON.int64(raw, "") {
                milliseconds = Double(whole)
            } else {
                milliseconds = try CloudKitJSON.double(raw, "The value of \(what()) (TIMESTAMP)")
            }
            return .date(Date(timeIntervalSince1970: milliseconds / 1_000))
        default:  // BYTES
            let text = try CloudKitJSON.string(raw, "The value of \(what()) (BYTES, base64)")
            guard let data = Data(base64Encoded: text) else {
                throw CloudKitJSON.Problem("The value of \(what()) (BYTES) is not base64.")
            }
            return .bytes(data)
        }
    }

    private static func inferredValue(
        _ raw: JSONValue, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> FieldValue {
        if case .array(let elements) = raw {
            var values: [FieldValue] = []
            for element in elements {
                let value = try inferredScalar(element, what())
                if let first = values.first, typeName(first) != typeName(value) {
                    throw CloudKitJSON.Problem("The list in the \(what()) mixes types.")
                }
                values.append(value)
            }
            return .list(values)
        }
        return try inferredScalar(raw, what())
    }

    private static func inferredScalar(
        _ raw: JSONValue, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> FieldValue {
        switch raw {
        case .string(let string):
            return .string(string)
        case .number(let text):
            if !CloudKitJSON.isFloatingText(text), let int = Int64(text) { return .int(int) }
            return .double(try CloudKitJSON.double(raw, what()))
        default:
            throw CloudKitJSON.Problem("The value of the \(what()) has no type and is not a string, number or list.")
        }
    }
}

import FlatSync
import FlatSyncCloudKit
import Foundation

/// Records and fields in CKWS JSON, both ways, as the emulator sends and reads them.
///
/// Fields are `{"value": V, "type": "T"}`: STRING a string, INT64 an integer, DOUBLE a number, TIMESTAMP
/// an integer count of milliseconds since 1970 (a floating count is accepted too), BYTES a base64 string,
/// REFERENCE `{"recordName", "zoneID"?, "action"}`, and `<TYPE>_LIST` a JSON array of those (an empty list
/// goes out as `STRING_LIST`, as the live server sends an empty list: a stored empty list has no element
/// type). LOCATION, ASSET and ASSETID values (and lists of them) are stored as they came and sent back the
/// same (`FieldValue.opaque`); any other type is refused, as CloudKit refuses a type it does not have.
///
/// The writer's device ID (`Record.lastModifiedBy`) travels as the reserved STRING field
/// `fsLastModifiedBy`, which the emulator stores apart from the fields and sends back as that field.
/// `created` and `modified` name ``serverDeviceID`` as their `deviceID`, not the writer's FlatSync ID: the
/// server cannot know that ID, and what CloudKit puts there for a web client is not known (ckws-client.md),
/// so a client that took `modified.deviceID` for its own ID would fail here as it would live.
enum CloudKitRecordJSON {
    /// The reserved field carrying `Record.lastModifiedBy` (the contract's, not CloudKit's).
    static let lastModifiedByField = "fsLastModifiedBy"
    /// The `deviceID` of every `created` and `modified` the emulator sends (emulator behaviour).
    static let serverDeviceID = "_emulator-device"

    // MARK: - Writing

    /// Writes a record as the emulator sends it. CloudDatabase keeps no times, so `created` and `modified`
    /// carry the time of the response (emulator behaviour).
    ///
    /// Written straight into the response, members in key order as every object the emulator sends: a
    /// tree of ``JSONValue``s per record, built, sorted, written and freed, was half of the emulator's
    /// time in a sync.
    ///
    /// `assetLink` gives each asset's description a `downloadURL` (the link for its checksum), as a fetch of
    /// the record returns one; nil leaves them without (Types.html: the key is "present only when fetching
    /// the enclosing record").
    static func write(
        _ record: Record, userRecordName: String, now: Date, assetLink: ((String) -> String)? = nil,
        to writer: inout JSONValue.Writer
    ) {
        let timestamp = milliseconds(now)
        func stamp(deviceID: String, _ writer: inout JSONValue.Writer) {
            writer.object {
                $0.member("deviceID") { $0.string(deviceID) }
                $0.member("timestamp") { $0.int(timestamp) }
                $0.member("userRecordName") { $0.string(userRecordName) }
            }
        }
        var fields = record.fields.map { (key: $0.key, value: $0.value) }
        if let device = record.lastModifiedBy { fields.append((lastModifiedByField, .string(device))) }
        fields.sort { $0.key < $1.key }
        writer.object { object in
            object.member("created") { stamp(deviceID: serverDeviceID, &$0) }
            object.member("deleted") { $0.bool(false) }
            object.member("fields") {
                $0.object { object in
                    for field in fields {
                        object.member(field.key) { write(field: field.value, assetLink: assetLink, to: &$0) }
                    }
                }
            }
            object.member("modified") { stamp(deviceID: serverDeviceID, &$0) }
            if let tag = record.changeTag { object.member("recordChangeTag") { $0.string(tag.rawValue) } }
            object.member("recordName") { $0.string(record.id.name) }
            object.member("recordType") { $0.string(record.type) }
            object.member("zoneID") { CloudKitJSON.write(zoneID: record.id.zone, to: &$0) }
        }
    }

    /// Writes a deleted record: `{"deleted": true, "recordName": …}`.
    static func writeTombstone(_ name: String, to writer: inout JSONValue.Writer) {
        writer.object {
            $0.member("deleted") { $0.bool(true) }
            $0.member("recordName") { $0.string(name) }
        }
    }

    /// Writes one field: `{"type": …, "value": …}`.
    static func write(
        field value: FieldValue, assetLink: ((String) -> String)? = nil, to writer: inout JSONValue.Writer
    ) {
        writer.object {
            $0.member("type") { $0.string(typeName(value)) }
            $0.member("value") {
                if let assetLink, CloudAsset.holdsAssets(value), case .opaque(let kept) = value,
                    let json = try? JSONValue.parse(Data(kept.json.utf8))
                {
                    $0.value(linked(json, assetLink), sortingKeys: true)
                } else {
                    writeValue(value, to: &$0)
                }
            }
        }
    }

    /// An asset's description (or a list's) with a `downloadURL` for its checksum.
    private static func linked(_ json: JSONValue, _ link: (String) -> String) -> JSONValue {
        switch json {
        case .array(let elements):
            return .array(elements.map { linked($0, link) })
        case .object(let members):
            guard let checksum = members.first(where: { $0.key == "fileChecksum" }),
                case .string(let name) = checksum.value
            else { return json }
            return .object(members.filter { $0.key != "downloadURL" } + [("downloadURL", .string(link(name)))])
        default:
            return json
        }
    }

    private static func typeName(_ value: FieldValue) -> String {
        switch value {
        case .string: return "STRING"
        case .int: return "INT64"
        case .double: return "DOUBLE"
        case .date: return "TIMESTAMP"
        case .bytes: return "BYTES"
        case .reference: return "REFERENCE"
        case .opaque(let value): return value.type
        case .list(let elements): return (elements.first.map(typeName) ?? "STRING") + "_LIST"
        }
    }

    private static func writeValue(_ value: FieldValue, to writer: inout JSONValue.Writer) {
        switch value {
        case .string(let string): writer.string(string)
        case .int(let int): writer.int(int)
        // JSON has no infinity or NaN; such a value (saved by a non-HTTP client) goes out as null.
        case .double(let double): double.isFinite ? writer.double(double) : writer.null()
        case .date(let date): writer.int(milliseconds(date))
        case .bytes(let data): writer.string(data.base64EncodedString())
        case .list(let elements): writer.array(elements) { writeValue($1, to: &$0) }
        case .reference(let reference):
            writer.object { object in
                object.member("action") { $0.string(reference.action.rawValue) }
                object.member("recordName") { $0.string(reference.recordName) }
                if let zoneName = reference.zoneName {
                    object.member("zoneID") { CloudKitJSON.write(zoneID: ZoneID(zoneName), to: &$0) }
                }
            }
        case .opaque(let value):
            // Stored from JSON the emulator parsed, so it parses again; `null` if it somehow does not.
            if let json = try? JSONValue.parse(Data(value.json.utf8)) { writer.value(json) } else { writer.null() }
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
    /// `Record.lastModifiedBy`. A missing `recordName` gets a random UUID, as CKWS documents.
    static func record(
        from value: JSONValue?, in zone: ZoneID, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> Record {
        var types: [String: String] = [:]
        var encrypted: Set<String> = []
        return try record(from: value, in: zone, wireTypes: &types, encrypted: &encrypted, what())
    }

    /// ``record(from:in:_:)``, also giving the `type` each list field was sent with (a production schema
    /// checks it: an empty list has no element type of its own; another field's value tells its type), and
    /// the fields sent with `"isEncrypted": true` (a production schema checks that too).
    static func record(
        from value: JSONValue?, in zone: ZoneID, wireTypes: inout [String: String], encrypted: inout Set<String>,
        _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> Record {
        let object = try CloudKitJSON.object(value, what())
        let name = try CloudKitJSON.optionalString(object["recordName"], "\(what()).recordName") ?? UUID().uuidString
        let type = try CloudKitJSON.optionalString(object["recordType"], "\(what()).recordType") ?? ""
        let tag = try CloudKitJSON.optionalString(object["recordChangeTag"], "\(what()).recordChangeTag")
        var fields: [String: FieldValue] = [:]
        var writer: String?
        if let rawFields = object["fields"], rawFields != .null {
            for (key, rawField) in try CloudKitJSON.object(rawFields, "\(what()).fields") {
                let (value, wireType, isEncrypted) = try typedField(from: rawField, "field \(key) of record \(name)")
                // Only a list's type says more than its value: an empty one has no element to tell by.
                if let wireType, wireType.hasSuffix("_LIST") { wireTypes[key] = wireType }
                if isEncrypted { encrypted.insert(key) }
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

    /// One field a client sent; see ``typedField(from:_:)``.
    static func field(
        from value: JSONValue, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> FieldValue {
        try typedField(from: value, what()).value
    }

    /// One field a client sent, and the `type` it was sent with. Without `type`, the type is guessed from
    /// the JSON as CKWS does (a string is a STRING, an integer an INT64, another number a DOUBLE, an array
    /// a list of those). LOCATION, ASSET and ASSETID values are kept as sent; a type CloudKit does not have,
    /// or a `null` value, is refused. `what` names the field in an error and is built only then: a push of
    /// 10,000 records made 130,000 such names.
    static func typedField(
        from value: JSONValue, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> (value: FieldValue, type: String?, isEncrypted: Bool) {
        // The two members read straight from the object's list (the later of a repeated key, as a dictionary
        // of them would keep): a dictionary per field was most of the time the emulator spent on a push.
        var typeMember: JSONValue?
        var valueMember: JSONValue?
        var encryptedMember: JSONValue?
        for member in try CloudKitJSON.members(value, what()) {
            if member.key == "type" {
                typeMember = member.value
            } else if member.key == "value" {
                valueMember = member.value
            } else if member.key == "isEncrypted" {
                encryptedMember = member.value
            }
        }
        let type = try CloudKitJSON.optionalString(typeMember, "\(what()).type")
        let isEncrypted = try CloudKitJSON.bool(encryptedMember, default: false, "\(what()).isEncrypted")
        guard let raw = valueMember, raw != .null else {
            throw CloudKitJSON.Problem(
                "The \(what()) has no value (removing a field is not supported by the emulator).")
        }
        guard let type else { return (try inferredValue(raw, what()), nil, isEncrypted) }
        if type.hasSuffix("_LIST") {
            let elementType = String(type.dropLast("_LIST".count))
            let elements = try CloudKitJSON.array(raw, "The value of the \(what())")
            if keptTypes.contains(elementType) {
                return (try kept(raw, type: type, what()), type, isEncrypted)
            }
            guard scalarTypes.contains(elementType) || elementType == "REFERENCE" else {
                throw CloudKitJSON.Problem("The \(what()) has the type \(type), which CloudKit does not have.")
            }
            var values: [FieldValue] = []
            values.reserveCapacity(elements.count)
            for element in elements {
                values.append(try scalar(element, type: elementType, "an element of the \(what())"))
            }
            return (.list(values), type, isEncrypted)
        }
        if keptTypes.contains(type) { return (try kept(raw, type: type, what()), type, isEncrypted) }
        guard scalarTypes.contains(type) || type == "REFERENCE" else {
            throw CloudKitJSON.Problem("The \(what()) has the type \(type), which CloudKit does not have.")
        }
        return (try scalar(raw, type: type, "the \(what())"), type, isEncrypted)
    }

    private static let scalarTypes: Set<String> = ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES"]
    /// CloudKit's types the emulator stores without interpreting them.
    private static let keptTypes: Set<String> = ["LOCATION", "ASSET", "ASSETID"]

    /// A LOCATION, ASSET or ASSETID value (or a list of them), kept as its JSON; it must be an object (an
    /// array of objects, for a list).
    private static func kept(
        _ raw: JSONValue, type: String, _ what: @autoclosure () -> String
    ) throws(CloudKitJSON.Problem) -> FieldValue {
        let elements: [JSONValue] = type.hasSuffix("_LIST") ? (raw.arrayValue ?? []) : [raw]
        for element in elements {
            guard case .object = element else {
                throw CloudKitJSON.Problem("The value of the \(what()) (\(type)) is not a dictionary.")
            }
        }
        var writer = JSONValue.Writer(capacity: 64)
        writer.value(raw)
        return .opaque(OpaqueFieldValue(type: type, json: String(decoding: writer.bytes, as: UTF8.self)))
    }

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
        case "REFERENCE":
            let object = try CloudKitJSON.object(raw, "The value of \(what()) (REFERENCE)")
            let name = try CloudKitJSON.string(object["recordName"], "The recordName of \(what())")
            guard !name.isEmpty else { throw CloudKitJSON.Problem("The reference in \(what()) names no record.") }
            var zoneName: String?
            if let zone = object["zoneID"], zone != .null {
                zoneName = try CloudKitJSON.zoneID(from: zone, "The zoneID of \(what())").name
            }
            let actionName = try CloudKitJSON.optionalString(object["action"], "The action of \(what())") ?? "NONE"
            guard let action = RecordReference.Action(rawValue: actionName) else {
                throw CloudKitJSON.Problem(
                    "The action \(actionName) of \(what()) is not NONE, DELETE_SELF or VALIDATE.")
            }
            return .reference(RecordReference(recordName: name, zoneName: zoneName, action: action))
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
        // An asset's description, untagged as Apple's upload example sends it (and MistKit, live): kept as the
        // `ASSETID` reads return it. A list of them likewise.
        if raw["fileChecksum"] != nil { return try kept(raw, type: "ASSETID", what()) }
        if case .array(let elements) = raw, let first = elements.first, first["fileChecksum"] != nil {
            return try kept(raw, type: "ASSETID_LIST", what())
        }
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

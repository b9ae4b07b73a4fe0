import FlatSync
import Foundation

extension CloudKitWire {
    /// One field's value as CKWS writes it: `{"value": …, "type": "…"}`.
    ///
    /// FlatSync always sends `type` (the server guesses from the JSON shape otherwise, and a timestamp
    /// sent as a bare number is refused). TIMESTAMP is an integer count of milliseconds since 1970, BYTES a
    /// base64 string, REFERENCE `{"recordName", "zoneID"?, "action"}`, lists `<TYPE>_LIST` arrays. A list
    /// goes out with the type its record type declares (see `CloudSchema`), also when it is empty; an
    /// undeclared empty list goes out as a `STRING_LIST`, the type the server reports empty lists with.
    ///
    /// Reading, a missing `type` is inferred from the JSON (a string is always STRING, never BYTES); a type
    /// FlatSync does not interpret (LOCATION, ASSET, ASSETID, a type added later, and lists of them) is
    /// kept as `FieldValue.opaque`, the value's JSON as sent, so nothing another client wrote is lost.
    enum Field {
        /// CKWS's type name for a value going out as a field of type `declared` (nil: undeclared), or why it
        /// cannot go out.
        static func typeName(of value: FieldValue, declared: CloudSchema.FieldType? = nil) throws(FieldProblem)
            -> String
        {
            if let declared {
                guard declared.accepts(value) else {
                    throw FieldProblem(
                        "it holds \(inferredTypeName(value)), not the \(declared.wireName) its schema declares")
                }
                return declared.wireName
            }
            return inferredTypeName(value)
        }

        /// The type name a value's own kind gives it: an empty list is a `STRING_LIST`; a list that mixes
        /// kinds or nests takes its first element's kind (``check(_:)`` refuses it).
        private static func inferredTypeName(_ value: FieldValue) -> String {
            switch value {
            case .string: return "STRING"
            case .int: return "INT64"
            case .double: return "DOUBLE"
            case .date: return "TIMESTAMP"
            case .bytes: return "BYTES"
            case .reference: return "REFERENCE"
            case .opaque(let value): return value.type
            case .list(let elements): return (elements.first.map(inferredTypeName) ?? "STRING") + "_LIST"
            }
        }

        /// Refuses what CKWS cannot carry: a number JSON has no form for, a date outside TIMESTAMP's range,
        /// a list that nests or mixes types, a reference without a name, an opaque value that is not JSON.
        static func check(_ value: FieldValue) throws(FieldProblem) {
            switch value {
            case .double(let double) where !double.isFinite:
                throw FieldProblem("\(double) is a number JSON cannot carry")
            case .date(let date): _ = try milliseconds(date)
            case .reference(let reference) where reference.recordName.isEmpty:
                throw FieldProblem("a reference names no record")
            case .opaque(let opaque) where opaque.type == CloudAsset.localType:
                throw FieldProblem("an asset made on the device was not uploaded")
            case .opaque(let opaque):
                guard (try? JSONValue.parse(Data(opaque.json.utf8))) != nil else {
                    throw FieldProblem("a kept \(opaque.type) value is not JSON")
                }
            case .list(let elements):
                guard let first = elements.first else { return }
                let element = inferredTypeName(first)
                for other in elements {
                    if other.listValue != nil {
                        throw FieldProblem("a list field holds a list; CloudKit lists do not nest")
                    }
                    if case .opaque = other {
                        throw FieldProblem("a list holds a kept value; keep the whole list instead")
                    }
                    let otherType = inferredTypeName(other)
                    if otherType != element { throw FieldProblem("a list field mixes \(element) with \(otherType)") }
                    try check(other)
                }
            default: break
            }
        }

        // MARK: Writing

        /// Writes `{"type": …, "value": …}`, `type` as ``typeName(of:declared:)`` gives it, for a value
        /// ``check(_:)`` accepted, with `"isEncrypted": true` for a field declared encrypted.
        ///
        /// Apple's "Encrypting user data" says to "pass an `isEncrypted` flag along with the payload", and a
        /// live client's requests carry it beside the plain type, lists too (`"type": "INT64_LIST",
        /// "isEncrypted": true`; brightdigit/MistKit #392, #485). Whether a response carries it back is not
        /// documented: reading ignores it.
        static func write(
            _ value: FieldValue, declared: CloudSchema.FieldType? = nil, to writer: inout JSONValue.Writer
        ) throws(FieldProblem) {
            let type = try typeName(of: value, declared: declared)
            var problem: FieldProblem?
            writer.object { field in
                if declared?.isEncrypted == true { field.member("isEncrypted") { $0.bool(true) } }
                // An asset's description goes untagged, as Apple's upload example sends it and MistKit does,
                // live: no source shows the server taking `ASSET` or `ASSETID` on a write.
                if !CloudAsset.holdsAssets(value) { field.member("type") { $0.string(type) } }
                field.member("value") {
                    do throws(FieldProblem) {
                        try writeValue(value, to: &$0)
                    } catch {
                        problem = error
                        $0.bool(false)
                    }
                }
            }
            if let problem { throw problem }
        }

        private static func writeValue(_ value: FieldValue, to writer: inout JSONValue.Writer) throws(FieldProblem) {
            switch value {
            case .string(let string): writer.string(string)
            case .int(let int): writer.int(int)
            case .double(let double):
                guard double.isFinite else { throw FieldProblem("a DOUBLE is \(double); JSON has no such number") }
                writer.double(double)
            case .date(let date): writer.int(try milliseconds(date))
            case .bytes(let data): writer.string(data.base64EncodedString())
            case .reference(let reference):
                writer.object { object in
                    object.member("action") { $0.string(reference.action.rawValue) }
                    object.member("recordName") { $0.string(reference.recordName) }
                    if let zoneName = reference.zoneName {
                        object.member("zoneID") { ZoneID(FlatSync.ZoneID(zoneName)).write(to: &$0) }
                    }
                }
            case .opaque(let opaque):
                guard let json = try? JSONValue.parse(Data(opaque.json.utf8)) else {
                    throw FieldProblem("a kept \(opaque.type) value is not JSON")
                }
                writer.value(json)
            case .list(let elements):
                var problem: FieldProblem?
                writer.array(elements) { writer, element in
                    do throws(FieldProblem) {
                        try writeValue(element, to: &writer)
                    } catch {
                        problem = error
                        writer.bool(false)
                    }
                }
                if let problem { throw problem }
            }
        }

        /// A date as CKWS's TIMESTAMP: whole milliseconds since 1970, rounded to the nearest.
        static func milliseconds(_ date: Date) throws(FieldProblem) -> Int64 {
            let milliseconds = (date.timeIntervalSince1970 * 1_000).rounded()
            // ±2^63 ms is ±292 million years; a date outside that has no TIMESTAMP.
            guard milliseconds.isFinite, abs(milliseconds) < 9.2e18 else {
                throw FieldProblem("the date \(date) is outside the range of a TIMESTAMP")
            }
            return Int64(milliseconds)
        }

        /// The date a TIMESTAMP names, as `Date.roundedToMilliseconds` produces it, so that a date
        /// stamped by FlatSync comes back equal.
        static func date(milliseconds: Double) -> Date {
            Date(timeIntervalSince1970: milliseconds / 1_000)
        }

        // MARK: Reading

        /// Reads a field entry and decodes its value: nil for a field with a null value or one that is no
        /// object. Its `value` is taken whole, as its `type` may come after it. Throws what the reader throws.
        ///
        /// A value its type does not allow (a TIMESTAMP as text, BYTES that are not base64, a REFERENCE with
        /// an action FlatSync does not know) is kept opaque, as it came: one odd field another client wrote
        /// must not make a whole page of changes unreadable, which would stop the zone's fetches for good.
        /// The store then finds the field of no use to it (a host value that needs it does not read, and is
        /// reported), and a save of the record sends it back unchanged.
        static func read(from reader: inout JSONValue.Reader) throws -> FieldValue? {
            var value: JSONValue?
            var type: String?
            try reader.readObject { key, reader in
                switch key {
                case "value": value = try reader.value()
                case "type": type = try reader.string()
                default: try reader.skip()
                }
            }
            guard let value, value != .null else { return nil }
            guard let type else { return infer(value) }
            do throws(FieldProblem) {
                return try decode(value, type: type)
            } catch {
                return opaque(value, type: type)
            }
        }

        private static func decode(_ value: JSONValue, type: String) throws(FieldProblem) -> FieldValue {
            // An encrypted field is written with its plain type and `isEncrypted` (MistKit #392, #485); should
            // an answer name it by CloudKit's schema name instead (`ENCRYPTED_STRING`, as its errors do; not
            // documented either way), it is the same value.
            if type.hasPrefix("ENCRYPTED_") {
                return try decode(value, type: String(type.dropFirst("ENCRYPTED_".count)))
            }
            if type.hasSuffix("_LIST") {
                let elementType = String(type.dropLast("_LIST".count))
                guard interpreted.contains(elementType) else { return opaque(value, type: type) }
                guard let elements = value.arrayValue else { throw FieldProblem("a \(type) holds no list") }
                var result: [FieldValue] = []
                result.reserveCapacity(elements.count)
                for element in elements { result.append(try decode(element, type: elementType)) }
                return .list(result)
            }
            switch type {
            case "STRING":
                guard let string = value.stringValue else { throw FieldProblem("a STRING holds no string") }
                return .string(string)
            case "INT64":
                // A number, or (with `numbersAsStrings`) a string.
                if let int = value.int64Value { return .int(int) }
                if let text = value.stringValue, let int = Int64(text) { return .int(int) }
                throw FieldProblem("an INT64 holds no 64-bit integer")
            case "DOUBLE":
                if let double = value.doubleValue { return .double(double) }
                if let text = value.stringValue, let double = Double(text) { return .double(double) }
                throw FieldProblem("a DOUBLE holds no number")
            case "TIMESTAMP":
                if let whole = value.int64Value { return .date(date(milliseconds: Double(whole))) }
                if let double = value.doubleValue, double.isFinite { return .date(date(milliseconds: double)) }
                throw FieldProblem("a TIMESTAMP holds no number of milliseconds")
            case "BYTES":
                guard let text = value.stringValue, let data = Data(base64Encoded: text) else {
                    throw FieldProblem("a BYTES field holds text that is not base64")
                }
                return .bytes(data)
            case "REFERENCE":
                return .reference(try reference(value))
            default:
                return opaque(value, type: type)
            }
        }

        /// The types read into their own `FieldValue` cases; any other is kept opaque.
        private static let interpreted: Set<String> = ["STRING", "INT64", "DOUBLE", "TIMESTAMP", "BYTES", "REFERENCE"]

        /// A REFERENCE value: `{"recordName", "zoneID"?, "action"?}`; a missing action is `NONE`, an action
        /// FlatSync does not know is refused (it would change what the server does with the record).
        private static func reference(_ value: JSONValue) throws(FieldProblem) -> RecordReference {
            guard let name = value["recordName"]?.stringValue, !name.isEmpty else {
                throw FieldProblem("a REFERENCE holds no recordName")
            }
            var zoneName: String?
            if let zone = value["zoneID"], zone != .null {
                guard let zoneNameValue = zone["zoneName"]?.stringValue else {
                    throw FieldProblem("a REFERENCE's zoneID has no zoneName")
                }
                zoneName = zoneNameValue
            }
            var action = RecordReference.Action.none
            if let text = value["action"]?.stringValue {
                guard let known = RecordReference.Action(rawValue: text) else {
                    throw FieldProblem("a REFERENCE has the unknown action \(text)")
                }
                action = known
            }
            return RecordReference(recordName: name, zoneName: zoneName, action: action)
        }

        /// A value kept as it came: its JSON written back compactly, members in the order sent.
        private static func opaque(_ value: JSONValue, type: String) -> FieldValue {
            var writer = JSONValue.Writer(capacity: 64)
            writer.value(value)
            return .opaque(OpaqueFieldValue(type: type, json: String(decoding: writer.bytes, as: UTF8.self)))
        }

        /// A value sent without `type`: inferred from its JSON shape, never as BYTES or TIMESTAMP; an object
        /// (a reference, a location: there is no telling) is kept opaque with an empty type.
        private static func infer(_ value: JSONValue) -> FieldValue? {
            switch value {
            case .string(let string): return .string(string)
            case .number:
                if let int = value.int64Value, case .number(let text) = value, !text.contains(".") { return .int(int) }
                return value.doubleValue.map(FieldValue.double)
            case .array(let elements):
                var result: [FieldValue] = []
                for element in elements {
                    guard let inferred = infer(element), inferred.listValue == nil, inferred.opaqueValue == nil
                    else { return opaque(value, type: "") }
                    result.append(inferred)
                }
                return .list(result)
            case .object:
                return opaque(value, type: "")
            default:
                return nil
            }
        }
    }
}

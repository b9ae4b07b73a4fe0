import FlatSync
import FlatSyncCloudKit
import Foundation

/// Reading and writing the emulator's JSON: parsed into ``JSONValue`` trees, written with sorted keys,
/// on purpose not through the transport's wire types: the two sides of the wire map records and errors
/// separately, so a misreading of the contract on one side cannot pass silently. Only the JSON grammar
/// (the tokenizer and the byte writer) is shared.
///
/// Numbers keep their decimal text, so INT64 values stay exact up to ±2^63 and DOUBLE values round-trip.
/// (The emulator used `JSONSerialization` and `[String: Any]` before; on Linux the parsing, bridging and
/// dynamic casts made up most of the time of a 10,000-record sync through it.)
enum CloudKitJSON {
    /// A JSON object the emulator reads or builds; keys are unique (a key sent twice means its last value).
    typealias Object = [String: JSONValue]

    /// Why a request body cannot be used: becomes a 400 `BAD_REQUEST` with this sentence.
    struct Problem: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }

        var cloudError: CloudError { CloudError(.invalidArguments, reason) }
    }

    // MARK: - Reading

    /// The body as a JSON object; an empty body reads as `{}`.
    static func object(from body: Data) throws(Problem) -> Object {
        if body.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 10 || $0 == 13 }) { return [:] }
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw Problem("The request body is not valid JSON.")
        }
        guard case .object(let members) = value else { throw Problem("The request body is not a JSON object.") }
        return Object(members, uniquingKeysWith: { $1 })
    }

    /// A string value.
    static func string(_ value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> String {
        guard case .string(let string)? = value else { throw Problem("\(what()) must be a string.") }
        return string
    }

    /// An optional string value: absent and `null` are `nil`.
    static func optionalString(_ value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> String? {
        guard let value, value != .null else { return nil }
        return try string(value, what())
    }

    /// A boolean value, absent and `null` giving `default`.
    static func bool(_ value: JSONValue?, default: Bool, _ what: @autoclosure () -> String) throws(Problem) -> Bool {
        switch value {
        case nil, .null?: return `default`
        case .bool(let bool)?: return bool
        default: throw Problem("\(what()) must be true or false.")
        }
    }

    /// A JSON object value.
    static func object(_ value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> Object {
        Object(try members(value, what()), uniquingKeysWith: { $1 })
    }

    /// A JSON object value's members as sent, in order (a repeated key appears each time): for a reader of
    /// a few keys, which need not build a dictionary.
    static func members(
        _ value: JSONValue?, _ what: @autoclosure () -> String
    ) throws(Problem) -> [(key: String, value: JSONValue)] {
        guard case .object(let members)? = value else { throw Problem("\(what()) must be a JSON object.") }
        return members
    }

    /// A JSON array value.
    static func array(_ value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> [JSONValue] {
        guard case .array(let elements)? = value else { throw Problem("\(what()) must be a JSON array.") }
        return elements
    }

    /// An integer value, exact over the whole Int64 range; an integral floating number (`12.0`, `1.2e1`) is
    /// accepted.
    static func int64(_ value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> Int64 {
        guard case .number(let text)? = value else { throw Problem("\(what()) must be an integer.") }
        if let int = Int64(text) { return int }
        let double = try self.double(value, what())
        guard double.rounded() == double, double >= -9.223_372_036_854_775_808e18, double < 9.223_372_036_854_775_808e18
        else {
            throw Problem("\(what()) must be an integer that fits in 64 bits.")
        }
        return Int64(double)
    }

    /// A floating value, read from its decimal text, so it round-trips.
    static func double(_ value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> Double {
        guard case .number(let text)? = value, let double = Double(text) else {
            throw Problem("\(what()) must be a number.")
        }
        return double
    }

    /// True for a number written with a fraction or an exponent (`1.0`, `1e3`): a DOUBLE when no type is
    /// given, even when its value is whole.
    static func isFloatingText(_ text: String) -> Bool {
        text.utf8.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }
    }

    // MARK: - Writing

    /// `value` as JSON bytes with sorted keys and unescaped slashes (base64 and URLs stay readable).
    static func data(_ value: JSONValue) -> Data {
        var writer = JSONValue.Writer(capacity: 4_096)
        writer.value(value, sortingKeys: true)
        return writer.data
    }

    /// An object as a value.
    static func value(_ object: Object) -> JSONValue {
        .object(object.map { (key: $0.key, value: $0.value) })
    }

    // MARK: - Shared shapes

    /// CKWS's owner of every zone in a private database, as the emulator names it (emulator behaviour: the
    /// live push capture, MistKit #379, gives the zone owner `zoid` as the user's record name, so CloudKit
    /// likely names the user here; the transport sends and reads only `zoneName`, so nothing depends on it).
    static let ownerRecordName = "_defaultOwner"
    /// The zone every CKWS database lists.
    static let defaultZoneName = "_defaultZone"

    /// A zone ID as the emulator sends it.
    static func zoneID(_ zone: ZoneID) -> JSONValue {
        // In key order, as every object the emulator builds often: its writer then need not sort them.
        ["ownerRecordName": .string(ownerRecordName), "zoneName": .string(zone.name)]
    }

    /// Writes a zone ID as the emulator sends it.
    static func write(zoneID zone: ZoneID, to writer: inout JSONValue.Writer) {
        writer.value(zoneID(zone))
    }

    /// A zone ID a client sent: `{"zoneName": …}` (an owner, if given, is ignored).
    static func zoneID(from value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> ZoneID {
        let object = try object(value, what())
        let name = try string(object["zoneName"], "\(what()).zoneName")
        return ZoneID(name)
    }

    /// A change token as a `syncToken`: base64 of its bytes.
    static func syncToken(_ token: ChangeToken) -> JSONValue {
        .string(token.data.base64EncodedString())
    }

    /// A `syncToken` a client sent: absent or `null` is no token; a string that is not base64 becomes
    /// bytes no server minted, so the database refuses it as expired (an empty string is a token too).
    static func changeToken(from value: JSONValue?, _ what: @autoclosure () -> String) throws(Problem) -> ChangeToken? {
        guard let text = try optionalString(value, what()) else { return nil }
        return ChangeToken(data: Data(base64Encoded: text) ?? Data("not base64: \(text)".utf8))
    }
}

import FlatSync
import Foundation

/// Reading the emulator's JSON with `JSONSerialization` (and writing the same kind of dictionaries with
/// ``CloudKitJSONWriter``), on purpose not with the transport's
/// Codable wire types: the two sides of the wire are written separately, so a misreading of the contract
/// on one side cannot pass silently.
///
/// `JSONSerialization` hands numbers back as `NSNumber` (or `NSDecimalNumber` for long ones), booleans
/// as `NSNumber` too, and converts an `NSNumber` 0 or 1 to `Bool` when asked. These helpers tell the kinds
/// apart and read numbers from their decimal text, so INT64 values stay exact up to ±2^63 and DOUBLE
/// values round-trip.
enum CloudKitJSON {
    /// A JSON object, as `JSONSerialization` reads one.
    typealias Object = [String: Any]

    /// Why a request body cannot be used: becomes a 400 `BAD_REQUEST` with this sentence.
    struct Problem: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }

        var cloudError: CloudError { CloudError(.invalidArguments, reason) }
    }

    // MARK: - Reading

    /// The body as a JSON object; an empty body reads as `{}`.
    static func object(from body: Data) throws(Problem) -> Object {
        if body.isEmpty || body.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 10 || $0 == 13 }) { return [:] }
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])
        } catch {
            throw Problem("The request body is not valid JSON.")
        }
        guard let object = value as? Object else { throw Problem("The request body is not a JSON object.") }
        return object
    }

    /// True for a JSON `true` or `false` (which `JSONSerialization` returns as an `NSNumber` of type `c`).
    static func isBoolean(_ value: Any) -> Bool {
        guard let number = value as? NSNumber, !(number is NSDecimalNumber) else { return false }
        return String(cString: number.objCType) == "c"
    }

    /// True for a JSON number (not a boolean).
    static func isNumber(_ value: Any) -> Bool {
        value is NSNumber && !isBoolean(value)
    }

    /// A string value.
    static func string(_ value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> String {
        guard let string = value as? String else { throw Problem("\(what()) must be a string.") }
        return string
    }

    /// An optional string value: absent and `null` are `nil`.
    static func optionalString(_ value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        return try string(value, what())
    }

    /// A boolean value, absent and `null` giving `default`.
    static func bool(_ value: Any?, default: Bool, _ what: @autoclosure () -> String) throws(Problem) -> Bool {
        guard let value, !(value is NSNull) else { return `default` }
        guard isBoolean(value), let bool = value as? Bool else { throw Problem("\(what()) must be true or false.") }
        return bool
    }

    /// A JSON object value.
    static func object(_ value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> Object {
        guard let object = value as? Object else { throw Problem("\(what()) must be a JSON object.") }
        return object
    }

    /// A JSON array value.
    static func array(_ value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> [Any] {
        guard let array = value as? [Any] else { throw Problem("\(what()) must be a JSON array.") }
        return array
    }

    /// The number's decimal text as JSON spelled it (near enough: `NSNumber` keeps its value, and
    /// `NSDecimalNumber` its digits).
    private static func decimalText(_ value: Any) -> String? {
        guard isNumber(value), let number = value as? NSNumber else { return nil }
        if let decimal = number as? NSDecimalNumber { return decimal.description }
        switch String(cString: number.objCType) {
        case "f", "d": return nil
        default: return number.description
        }
    }

    /// An integer value, exact over the whole Int64 range; an integral floating number is accepted.
    static func int64(_ value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> Int64 {
        guard let value, isNumber(value) else { throw Problem("\(what()) must be an integer.") }
        if let text = decimalText(value), let int = Int64(text) { return int }
        let double = try self.double(value, what())
        guard double.rounded() == double, double >= -9.223_372_036_854_775_808e18, double < 9.223_372_036_854_775_808e18
        else {
            throw Problem("\(what()) must be an integer that fits in 64 bits.")
        }
        return Int64(double)
    }

    /// A floating value, read from its decimal text when `JSONSerialization` kept one, so it round-trips.
    static func double(_ value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> Double {
        guard let value, isNumber(value), let number = value as? NSNumber else {
            throw Problem("\(what()) must be a number.")
        }
        if let decimal = number as? NSDecimalNumber, let double = Double(decimal.description) { return double }
        return number.doubleValue
    }

    // MARK: - Writing

    /// `object` as JSON bytes with sorted keys and unescaped slashes (base64 and URLs stay readable);
    /// see ``CloudKitJSONWriter``.
    static func data(_ object: Any) -> Data {
        CloudKitJSONWriter.data(object)
    }

    // MARK: - Shared shapes

    /// CKWS's owner of every zone in a private database, as the emulator names it.
    static let ownerRecordName = "_defaultOwner"
    /// The zone every CKWS database lists.
    static let defaultZoneName = "_defaultZone"

    /// A zone ID as the emulator sends it.
    static func zoneID(_ zone: ZoneID) -> Object {
        ["zoneName": zone.name, "ownerRecordName": ownerRecordName]
    }

    /// A zone ID a client sent: `{"zoneName": …}` (an owner, if given, is ignored).
    static func zoneID(from value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> ZoneID {
        let object = try object(value, what())
        let name = try string(object["zoneName"], "\(what()).zoneName")
        return ZoneID(name)
    }

    /// A change token as a `syncToken`: base64 of its bytes.
    static func syncToken(_ token: ChangeToken) -> String {
        token.data.base64EncodedString()
    }

    /// A `syncToken` a client sent: absent or `null` is no token; a string that is not base64 becomes
    /// bytes no server minted, so the database refuses it as expired (an empty string is a token too).
    static func changeToken(from value: Any?, _ what: @autoclosure () -> String) throws(Problem) -> ChangeToken? {
        guard let text = try optionalString(value, what()) else { return nil }
        return ChangeToken(data: Data(base64Encoded: text) ?? Data("not base64: \(text)".utf8))
    }
}

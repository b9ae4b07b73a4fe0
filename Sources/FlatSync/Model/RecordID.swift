/// Identifies a record: its zone and its name within that zone.
public struct RecordID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The zone the record lives in.
    public var zone: ZoneID
    /// The record's name, unique within its zone (for example `rl-<articleID>`).
    public var name: String

    /// Creates a record ID.
    public init(zone: ZoneID, name: String) {
        self.zone = zone
        self.name = name
    }

    public var description: String { "\(zone.name)/\(name)" }

    /// Hashes the name alone: names already differ between zones by their prefix, and hashing the zone's
    /// name too doubled the cost of every lookup in the command queue's indexes. Equal IDs still hash
    /// equally, which is all `Hashable` asks.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
    }

    public static func < (lhs: RecordID, rhs: RecordID) -> Bool {
        (lhs.zone.name, lhs.name) < (rhs.zone.name, rhs.name)
    }

    /// The longest record name CloudKit takes, in characters (all ASCII, so bytes too).
    package static let maximumCloudKitNameLength = 255

    /// Why CloudKit would not take `name` as a record name, or nil when it would.
    ///
    /// CloudKit documents (`CKRecord.ID.init(recordName:)`) that a name "must contain only ASCII
    /// characters, must not exceed 255 characters, and must not start with an underscore", and that an
    /// empty one is an error; control characters are refused too. What the server answers over CloudKit Web
    /// Services to a name that breaks the rule is not documented.
    package static func cloudKitNameProblem(_ name: String) -> String? {
        let utf8 = name.utf8
        guard !utf8.isEmpty else { return "A record name must not be empty." }
        guard utf8.count <= maximumCloudKitNameLength else {
            return "The record name is \(utf8.count) bytes long; CloudKit takes at most \(maximumCloudKitNameLength)."
        }
        guard utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return "The record name \(name.debugDescription) holds a character CloudKit does not take in a record "
                + "name: only printable ASCII."
        }
        guard utf8.first != UInt8(ascii: "_") else {
            return "The record name \(name) starts with _, which CloudKit does not take."
        }
        return nil
    }
}

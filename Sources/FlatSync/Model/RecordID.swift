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
}

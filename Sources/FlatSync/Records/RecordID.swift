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

    public static func < (lhs: RecordID, rhs: RecordID) -> Bool {
        (lhs.zone.name, lhs.name) < (rhs.zone.name, rhs.name)
    }
}

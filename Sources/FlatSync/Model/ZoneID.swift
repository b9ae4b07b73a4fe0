/// Names a record zone in the user's private database.
///
/// FlatSync's own stores use two zones, named as in Apple News: ``readingList`` and ``readingHistory``; a
/// host-defined record type (``SyncableRecord``) may use one of them or a zone of its own.
public struct ZoneID: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    /// The zone's name, unique within the database.
    public var name: String

    /// Creates a zone ID from its name.
    public init(_ name: String) {
        self.name = name
    }

    /// The zone that holds ``ReadingListEntry`` records.
    public static let readingList = ZoneID("ReadingList")
    /// The zone that holds ``ReadingHistoryItem`` records.
    public static let readingHistory = ZoneID("ReadingHistory")
    /// Both of FlatSync's zones, reading list first.
    public static let all: [ZoneID] = [.readingList, .readingHistory]

    public var description: String { name }

    public static func < (lhs: ZoneID, rhs: ZoneID) -> Bool { lhs.name < rhs.name }

    public init(from decoder: any Decoder) throws {
        name = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

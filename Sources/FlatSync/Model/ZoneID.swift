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
    /// FlatSync's two built-in zones, reading list first. A host's own zones (``SyncableRecord/zone``) are
    /// not among them.
    public static let builtIn: [ZoneID] = [.readingList, .readingHistory]

    /// FlatSync's two built-in zones: not every zone a device syncs once it registers its own record types.
    @available(
        *, deprecated, renamed: "builtIn", message: "Only the two built-in zones; a host's zones are not among them."
    )
    public static var all: [ZoneID] { builtIn }

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

/// The server's version stamp for one record.
///
/// The server assigns a new tag every time it saves a record. Sending the tag you last saw with a save
/// or a delete asks the server to refuse the change if someone else changed the record meanwhile.
public struct ChangeTag: Hashable, Sendable, Codable, RawRepresentable, CustomStringConvertible {
    /// The server's string for this version.
    public var rawValue: String

    /// Creates a change tag from the server's string.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// Creates a change tag from the server's string.
    public init(_ rawValue: String) {
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

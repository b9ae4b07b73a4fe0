#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An opaque position in a server's change history, for a zone or for the whole database.
///
/// Fetching changes "since" a token returns what changed after that position, and a new token to
/// fetch from next time. Only the server that minted a token can read it; a token the server no
/// longer accepts makes the fetch fail with ``CloudError/Code-swift.struct/changeTokenExpired``.
public struct ChangeToken: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The server's bytes, meaningful only to the server.
    public var data: Data

    /// Wraps bytes minted by a server.
    public init(data: Data) {
        self.data = data
    }

    public var description: String {
        let hex = data.prefix(16).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        return "ChangeToken(\(hex)\(data.count > 16 ? "…" : ""))"
    }

    public init(from decoder: any Decoder) throws {
        data = try decoder.singleValueContainer().decode(Data.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(data)
    }
}

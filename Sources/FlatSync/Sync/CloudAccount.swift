#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A signed-in account and the transport that reaches its private database.
public struct CloudAccount: Sendable {
    /// Identifies the account; data of one account is never sent to another.
    public var id: String
    /// The server holding the account's data.
    public var transport: any CloudTransport

    /// An account and the transport that reaches it.
    public init(id: String, transport: any CloudTransport) {
        self.id = id
        self.transport = transport
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The zones that changed since a database change token.
public struct DatabaseChanges: Hashable, Sendable {
    /// Zones with changed or deleted records (or newly created).
    public var changedZones: [ZoneID]
    /// Zones deleted since the token, with who deleted them. A zone deleted and created again since
    /// the token is listed here and in ``changedZones``.
    public var deletedZones: [ZoneDeletion]
    /// The token to fetch from next time.
    public var token: ChangeToken
    /// True when more changes wait: call again with ``token``.
    public var moreComing: Bool

    /// A page of database changes; transports build it.
    public init(changedZones: [ZoneID], deletedZones: [ZoneDeletion], token: ChangeToken, moreComing: Bool) {
        self.changedZones = changedZones
        self.deletedZones = deletedZones
        self.token = token
        self.moreComing = moreComing
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A zone that was deleted, and by whom.
public struct ZoneDeletion: Hashable, Sendable, Codable {
    /// Who deleted a zone.
    ///
    /// Later versions of FlatSync may add cases: switch over a reason with a `default`.
    public enum Reason: String, Hashable, Sendable, Codable {
        /// An app deleted it through the API.
        case deleted
        /// The user deleted it (from Settings, say), or it was purged; its data must not be re-uploaded.
        case deletedByUser
        /// The server did not say who deleted it: CloudKit Web Services reports a deleted zone without a
        /// reason (`"deleted": true`), where the native API says whether it was purged.
        case unknown
    }

    /// The deleted zone.
    public var zone: ZoneID
    /// Who deleted it.
    public var reason: Reason

    /// A zone deletion.
    public init(zone: ZoneID, reason: Reason) {
        self.zone = zone
        self.reason = reason
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why a zone's local data was rebuilt or wiped.
///
/// Later versions of FlatSync may add cases: switch over a reason with a `default`.
public enum ZoneResetReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The server no longer accepted the change token; the zone was fetched again from the start.
    case tokenExpired
    /// The user deleted the zone's data; local data and pending changes were wiped.
    case deletedByUser

    public var description: String { rawValue }
}

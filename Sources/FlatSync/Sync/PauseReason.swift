#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why sending paused.
///
/// Later versions of FlatSync may add cases: switch over a reason with a `default`.
public enum PauseReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The user's iCloud storage is full; sending resumes on ``SyncContext/syncNow()``.
    case quotaExceeded
    /// No account can be used; sending resumes after ``SyncContext/accountDidChange(to:)``.
    case notAuthenticated

    public var description: String { rawValue }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why sending paused, until the host acts.
///
/// Later versions of FlatSync may add cases: switch over a reason with a `default`.
public enum PauseReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The user's iCloud storage is full; sending resumes on ``SyncContext/syncNow()``.
    case quotaExceeded
    /// No account can be used (nobody signed in, or the user's web auth token was refused): fetching stops
    /// too. Sign the user in again, then call ``SyncContext/accountDidChange(to:)`` with the account, which
    /// resumes both (a ``SyncContext/syncNow()`` also tries again). With `CloudKitWebServicesTransport`,
    /// its `currentUser()` throws a ``CloudError`` of this code whose ``CloudError/redirectURL`` is the
    /// sign-in page; the token the page gives back goes to its `signIn(withWebAuthToken:)`.
    case notAuthenticated

    public var description: String { rawValue }
}

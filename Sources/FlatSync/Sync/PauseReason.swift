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
    /// No account can be used (nobody signed in, or the user's web auth token was refused): nothing is sent
    /// or fetched, ``SyncContext/syncNow()`` included, until the host names the account with
    /// ``SyncContext/accountDidChange(to:)``. Whoever signs in next may be another user, so name the one the
    /// server says is signed in: the same account resumes, another switches (wiping this one's data from the
    /// device rather than sending it to them). With `CloudKitWebServicesTransport`, its `currentUser()`
    /// throws a ``CloudError`` of this code whose ``CloudError/redirectURL`` is the sign-in page; the token
    /// the page gives back goes to its `signIn(withWebAuthToken:)`, and `currentUser()` then names the user.
    case notAuthenticated

    public var description: String { rawValue }
}

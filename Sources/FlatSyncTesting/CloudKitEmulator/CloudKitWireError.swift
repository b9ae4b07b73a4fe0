import FlatSync
import FlatSyncCloudKit
import Foundation

/// How the emulator puts a `CloudError` on the wire: the HTTP status and `serverErrorCode` Apple documents
/// for it (ErrorCodes.html), and the error bodies.
///
/// | CloudError code | HTTP | serverErrorCode | guessed codes (an explicit option) |
/// |---|---|---|---|
/// | requestRateLimited | 429 | THROTTLED | |
/// | serviceUnavailable | 503 | TRY_AGAIN_LATER | |
/// | zoneBusy | 503 | TRY_AGAIN_LATER | 503 ZONE_BUSY |
/// | limitExceeded | 400 | BAD_REQUEST | 400 LIMIT_EXCEEDED |
/// | serverRecordChanged | 409 | CONFLICT | |
/// | zoneNotFound | 404 | ZONE_NOT_FOUND | |
/// | userDeletedZone | 404 | ZONE_NOT_FOUND | 404 USER_DELETED_ZONE |
/// | changeTokenExpired | 400 | BAD_REQUEST | 400 CHANGE_TOKEN_EXPIRED |
/// | unknownItem | 404 | NOT_FOUND | |
/// | batchRequestFailed | 400 | ATOMIC_ERROR | |
/// | quotaExceeded | 413 | QUOTA_EXCEEDED | |
/// | notAuthenticated | 421 | AUTHENTICATION_REQUIRED | |
/// | invalidArguments | 400 | BAD_REQUEST | |
/// | anything else | 500 | INTERNAL_ERROR | |
///
/// The four guessed codes appear in no Apple documentation, nor in any capture of the live server: they
/// are what the emulator sent before it imitated only what is known, kept behind
/// `CloudKitWebServicesServer.Options.guessedErrorCodes` to show that a client copes with them too. CloudKit
/// has codes for none of those conditions, so by default each goes out as the documented code a real
/// server most plausibly sends (a zone the user deleted is simply not found, and `changes/database` reports
/// it `deleted`).
///
/// `networkUnavailable` and `networkFailure` have no wire form: the emulator drops the connection.
enum CloudKitWireError {
    /// The status and code for `code`; with `guessedCodes`, the four undocumented codes instead of
    /// documented ones.
    static func wire(_ code: CloudError.Code, guessedCodes: Bool) -> (status: Int, serverErrorCode: String) {
        switch code {
        case .requestRateLimited: return (429, "THROTTLED")
        case .serviceUnavailable: return (503, "TRY_AGAIN_LATER")
        case .zoneBusy: return guessedCodes ? (503, "ZONE_BUSY") : (503, "TRY_AGAIN_LATER")
        case .limitExceeded: return guessedCodes ? (400, "LIMIT_EXCEEDED") : (400, "BAD_REQUEST")
        case .serverRecordChanged: return (409, "CONFLICT")
        case .zoneNotFound: return (404, "ZONE_NOT_FOUND")
        case .userDeletedZone: return guessedCodes ? (404, "USER_DELETED_ZONE") : (404, "ZONE_NOT_FOUND")
        case .changeTokenExpired: return guessedCodes ? (400, "CHANGE_TOKEN_EXPIRED") : (400, "BAD_REQUEST")
        case .unknownItem: return (404, "NOT_FOUND")
        case .batchRequestFailed: return (400, "ATOMIC_ERROR")
        case .quotaExceeded: return (413, "QUOTA_EXCEEDED")
        case .notAuthenticated: return (421, "AUTHENTICATION_REQUIRED")
        case .invalidArguments: return (400, "BAD_REQUEST")
        default: return (500, "INTERNAL_ERROR")
        }
    }

    /// True for the codes that the emulator renders as a dropped connection.
    static func dropsConnection(_ code: CloudError.Code) -> Bool {
        code == .networkFailure || code == .networkUnavailable
    }

    /// `retryAfter` as a JSON number of seconds (fractional when it is). Seconds are an assumption: Apple
    /// does not state the unit (ckws.md §4, uncertain); the transport reads it the same way. A fraction is
    /// kept so that tests can ask for short waits; CloudKit likely sends whole seconds.
    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// A request-level error body: exactly `uuid`, `serverErrorCode`, `reason`, plus `retryAfter` when
    /// known and `redirectURL` for 421.
    static func body(serverErrorCode: String, reason: String, retryAfter: Duration? = nil, redirectURL: URL? = nil)
        -> CloudKitJSON.Object
    {
        var object: CloudKitJSON.Object = [
            "uuid": .string(UUID().uuidString.lowercased()), "serverErrorCode": .string(serverErrorCode),
            "reason": .string(reason),
        ]
        if let retryAfter { object["retryAfter"] = .double(seconds(retryAfter)) }
        if let redirectURL { object["redirectURL"] = .string(redirectURL.absoluteString) }
        return object
    }

    /// The error of one record (or zone, or subscription) inside a 200: `serverErrorCode`, `reason`,
    /// `retryAfter` when known, and for a record a `uuid`, as Apple's record fetch error dictionary lists
    /// them (its zone fetch error dictionary has none). The caller adds `recordName` or `zoneID`. An error
    /// that names its own documented code (a refused field's `BAD_REQUEST`, a reference's
    /// `VALIDATING_REFERENCE_ERROR`) goes out with that code.
    static func itemBody(_ error: CloudError, guessedCodes: Bool, isRecord: Bool = false) -> CloudKitJSON.Object {
        let code = error.serverErrorCode ?? wire(error.code, guessedCodes: guessedCodes).serverErrorCode
        var object: CloudKitJSON.Object = ["serverErrorCode": .string(code), "reason": .string(error.message)]
        if isRecord { object["uuid"] = .string(UUID().uuidString.lowercased()) }
        if let retryAfter = error.retryAfter { object["retryAfter"] = .double(seconds(retryAfter)) }
        return object
    }

    /// The header `Retry-After` carries: whole seconds, rounded up.
    static func retryAfterHeader(_ duration: Duration) -> String {
        String(Int64(seconds(duration).rounded(.up)))
    }
}

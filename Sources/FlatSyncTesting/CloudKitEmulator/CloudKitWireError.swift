import FlatSync
import FlatSyncCloudKit
import Foundation

/// How the emulator puts a ``CloudError`` on the wire: the HTTP status and `serverErrorCode` of the wire
/// contract's table, and the error bodies.
///
/// | CloudError code | HTTP | serverErrorCode |
/// |---|---|---|
/// | requestRateLimited | 429 | THROTTLED |
/// | serviceUnavailable | 503 | TRY_AGAIN_LATER |
/// | zoneBusy | 503 | ZONE_BUSY (invented; strict wire: TRY_AGAIN_LATER) |
/// | limitExceeded | 400 | LIMIT_EXCEEDED (invented; strict wire: BAD_REQUEST) |
/// | serverRecordChanged | 409 | CONFLICT |
/// | zoneNotFound | 404 | ZONE_NOT_FOUND |
/// | userDeletedZone | 404 | USER_DELETED_ZONE (invented; strict wire: 400 BAD_REQUEST) |
/// | changeTokenExpired | 400 | CHANGE_TOKEN_EXPIRED (invented; strict wire: BAD_REQUEST) |
/// | unknownItem | 404 | NOT_FOUND |
/// | batchRequestFailed | 400 | ATOMIC_ERROR |
/// | quotaExceeded | 413 | QUOTA_EXCEEDED |
/// | notAuthenticated | 421 | AUTHENTICATION_REQUIRED |
/// | invalidArguments | 400 | BAD_REQUEST |
/// | anything else | 500 | INTERNAL_ERROR |
///
/// `networkUnavailable` and `networkFailure` have no wire form: the emulator drops the connection.
enum CloudKitWireError {
    /// The status and code for `code`; `strictWire` replaces the invented codes with documented ones.
    static func wire(_ code: CloudError.Code, strictWire: Bool) -> (status: Int, serverErrorCode: String) {
        switch code {
        case .requestRateLimited: return (429, "THROTTLED")
        case .serviceUnavailable: return (503, "TRY_AGAIN_LATER")
        case .zoneBusy: return strictWire ? (503, "TRY_AGAIN_LATER") : (503, "ZONE_BUSY")
        case .limitExceeded: return strictWire ? (400, "BAD_REQUEST") : (400, "LIMIT_EXCEEDED")
        case .serverRecordChanged: return (409, "CONFLICT")
        case .zoneNotFound: return (404, "ZONE_NOT_FOUND")
        case .userDeletedZone: return strictWire ? (400, "BAD_REQUEST") : (404, "USER_DELETED_ZONE")
        case .changeTokenExpired: return strictWire ? (400, "BAD_REQUEST") : (400, "CHANGE_TOKEN_EXPIRED")
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

    /// `retryAfter` as a JSON number of seconds (fractional when it is).
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

    /// The error of one record (or zone) inside a 200: `serverErrorCode`, `reason`, `retryAfter` when known.
    /// The caller adds `recordName` or `zoneID`.
    static func itemBody(_ error: CloudError, strictWire: Bool) -> CloudKitJSON.Object {
        var object: CloudKitJSON.Object = [
            "serverErrorCode": .string(wire(error.code, strictWire: strictWire).serverErrorCode),
            "reason": .string(error.message),
        ]
        if let retryAfter = error.retryAfter { object["retryAfter"] = .double(seconds(retryAfter)) }
        return object
    }

    /// The header `Retry-After` carries: whole seconds, rounded up.
    static func retryAfterHeader(_ duration: Duration) -> String {
        String(Int64(seconds(duration).rounded(.up)))
    }
}

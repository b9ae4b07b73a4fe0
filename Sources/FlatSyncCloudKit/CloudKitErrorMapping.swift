import FlatSync
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How ``CloudKitWebServicesTransport`` turns what CloudKit Web Services answered into a `CloudError`:
/// the one table, from the HTTP status, the body's `serverErrorCode` (for a whole request, or for one
/// record or zone inside a 200), and failures of the connection itself.
///
/// | `serverErrorCode` | HTTP | `CloudError.Code` | source |
/// |---|---|---|---|
/// | `THROTTLED` | 429 | `requestRateLimited` (+ `retryAfter`) | documented |
/// | `TRY_AGAIN_LATER` | 503 | `serviceUnavailable` (+ `retryAfter`) | documented |
/// | `CONFLICT`, `EXISTS` | 409 | `serverRecordChanged` (the transport looks the record up: CKWS sends none) | documented; `CONFLICT` for a create of an existing record observed live |
/// | `NOT_FOUND` | 404 | `unknownItem` (a delete counts as done; a lookup leaves the record out) | documented |
/// | `ZONE_NOT_FOUND` | 404 | `zoneNotFound` | documented |
/// | `ATOMIC_ERROR` | 400 | `batchRequestFailed` | documented |
/// | `QUOTA_EXCEEDED` | 413 | `quotaExceeded` | documented |
/// | `AUTHENTICATION_REQUIRED` | 421 | `notAuthenticated` (+ `redirectURL`; the web auth token is forgotten) | documented |
/// | `AUTHENTICATION_FAILED` | 401 | `notAuthenticated` (the web auth token is kept: a wrong API token or key gets this too, developer.apple.com/forums/thread/777574; `currentUser()` asks again without the token to name the sign-in page) | documented; the action is a choice |
/// | `ACCESS_DENIED` | 403 | `notAuthenticated` | documented code; the action is a choice |
/// | `BAD_REQUEST`, `VALIDATING_REFERENCE_ERROR`, `UNIQUE_FIELD_ERROR` | 400, 412 | `invalidArguments` (the engine parks the change: see `RefusedChange`) | documented (`UNIQUE_FIELD_ERROR` by CloudKit JS only); a production schema's refusal of a field comes back this way, per record, observed live |
/// | `INTERNAL_ERROR` | 500 | `internalError` (per record: parked too, unless it carries `retryAfter`) | documented |
/// | `ZONE_BUSY` | 503 | `zoneBusy` | **guessed**, never documented nor seen: kept in case; see below |
/// | `LIMIT_EXCEEDED` | 400 | `limitExceeded` | **guessed**: see below |
/// | `CHANGE_TOKEN_EXPIRED` | 400 | `changeTokenExpired` | **guessed**: see below |
/// | `USER_DELETED_ZONE` | 404 | `userDeletedZone` | **guessed**: see below |
/// | any other code | by status: 429 → `requestRateLimited`; 502–504 → `serviceUnavailable`; other 5xx → `internalError`; 401/421 → `notAuthenticated`; other 4xx → `invalidArguments` | the raw code is kept in `CloudError.serverErrorCode` |
/// | no CKWS body (HTML, empty, truncated JSON) | 429 → `requestRateLimited`; 5xx → `serviceUnavailable`; 401 → `notAuthenticated`; 421 → `networkFailure` (HTTP's Misdirected Request, RFC 9110 §15.5.20; the token is kept); 413 → `limitExceeded` (**assumed**: HTTP's Content Too Large from a front end; CloudKit's own 413 carries `QUOTA_EXCEEDED`); else `unexpectedServerResponse` | a proxy's page, a server restarting, a reused HTTP/2 connection |
/// | none: a save under a record name CloudKit does not take (not printable ASCII, over 255 characters, a leading `_`: `CKRecord.ID` documents the rule for the native API) | `invalidArguments` for that record, before anything is sent | what CKWS answers such a name is **not known**; the emulator's per-record `BAD_REQUEST` is a guess |
/// | a 200 whose body lacks the keys the operation needs | `unexpectedServerResponse` | |
///
/// `retryAfter` comes from the body's `retryAfter` (seconds; the unit is not documented), else from an
/// HTTP `Retry-After` header of whole seconds (RFC 9110 §10.2.3; whether CloudKit sends one is not known);
/// 0 or less counts as none. Apple documents it on every error, a record's included, as
/// the time to wait "before trying this operation again": the engine retries a change it would otherwise
/// park (`BAD_REQUEST`, `INTERNAL_ERROR` and the like) when its error carries one.
///
/// **Which failures may have been applied.** CloudKit documents no error as "nothing was saved". The engine
/// (`CloudErrorPolicy.mayHaveBeenApplied`) takes a request answered `networkFailure`, `serviceUnavailable`
/// (any 5xx without a CloudKit body included), `internalError` or `unexpectedServerResponse`, and a record
/// whose entry in a 200 does not read, as possibly applied: **assumed** from HTTP (a gateway or a failing
/// server can answer after the backend committed), not observed on CloudKit. The other codes are taken as
/// refusals before anything was applied.
///
/// **What the engine does without the four guessed codes.** The emulator used to send them; it now sends
/// only documented codes unless told to guess (`CloudKitWebServicesServer.Options.guessedErrorCodes`), and
/// each behaviour that was keyed to one has a documented trigger or is an assumption written down here:
/// - *A busy zone*: CloudKit's documented "retry later" answers are `TRY_AGAIN_LATER` (503) and `THROTTLED`
///   (429), with `retryAfter`; the engine waits and retries on those. `ZONE_BUSY` would do the same.
/// - *A request over a limit*: the transport never sends more than the documented 200 operations, nor a
///   record it can tell is over 1 MB. **Assumed**: a request CloudKit still finds too large is refused as a
///   whole with `BAD_REQUEST` (no code is documented; the native API's is `limitExceeded`). The engine halves
///   any request refused as a whole until the culprit stands alone, and parks that record
///   (`RefusedChange`), so this needs no code of its own.
/// - *An expired change token*: no documented code. On `changes/database` and `changes/zone` sent with a
///   token, any error that is not about signing in, throttling, a missing zone, a full account or a
///   permission (`keptOnChangeFetches`) is taken as
///   `changeTokenExpired` (keeping the raw code), so the engine fetches once more from no token; sent
///   without a token, the same error keeps its own meaning, so a reset never loops. **Assumed** from the
///   native equivalent ("client knowledge differs from server knowledge", paulw11/Seam3#35); no capture.
///   An error that carries `retryAfter` (or a `Retry-After` header) keeps its meaning too: Apple documents
///   `retryAfter` as the time to wait before trying the operation again, so the server expects the same
///   request to succeed later, and a one-off `INTERNAL_ERROR` must not cost a whole zone's download.
/// - *A zone the user deleted*: no code and no `purged` flag are documented or observed. Such a zone is
///   not found (`ZONE_NOT_FOUND`) and `changes/database` lists it with `"deleted": true` (observed on
///   `zones/changes`, MistKit #444), read as `ZoneDeletion.Reason.unknown`. The engine wipes a zone the
///   database reports deleted, and before it creates a zone it was told is not found, it asks the
///   database's changes since its last fetch: reported deleted, the zone is wiped instead of uploaded again
///   (`SyncContext.stopIfTheUserDeleted`). **Assumed**: that CloudKit reports the user's deletion there.
///
/// Connection failures (`URLError`): no connection at all (not connected, cannot find or connect to the
/// host, international roaming off, data not allowed) → `networkUnavailable`: the request was never
/// sent. A timeout, a connection lost or closed before the whole response arrived, an unparseable
/// response → `networkFailure`: the server may have applied it. A cancelled request → `CancellationError`.
enum CloudKitErrorMapping {
    /// What a request was, as far as error mapping cares.
    enum Operation: String, Sendable {
        case listZones = "zones/list"
        case modifyZones = "zones/modify"
        case databaseChanges = "changes/database"
        case zoneChanges = "changes/zone"
        case modifyRecords = "records/modify"
        case lookupRecords = "records/lookup"
        case currentUser = "users/current"
        case createPushToken = "tokens/create"
        case registerPushToken = "tokens/register"
        case listSubscriptions = "subscriptions/list"
        case modifySubscriptions = "subscriptions/modify"
        case pollWebCourier = "webcourier poll"
        case downloadAsset = "asset download"
        case uploadAssets = "assets/upload"
        case rereferenceAssets = "assets/rereference"
        case uploadAssetBytes = "asset upload"

        var fetchesChanges: Bool { self == .databaseChanges || self == .zoneChanges }
    }

    /// The documented (and assumed) codes, with the status CKWS documents for each.
    static let table: [String: (code: CloudError.Code, status: Int, documented: Bool)] = [
        "THROTTLED": (.requestRateLimited, 429, true),
        "TRY_AGAIN_LATER": (.serviceUnavailable, 503, true),
        "CONFLICT": (.serverRecordChanged, 409, true),
        "EXISTS": (.serverRecordChanged, 409, true),
        "NOT_FOUND": (.unknownItem, 404, true),
        "ZONE_NOT_FOUND": (.zoneNotFound, 404, true),
        "ATOMIC_ERROR": (.batchRequestFailed, 400, true),
        "QUOTA_EXCEEDED": (.quotaExceeded, 413, true),
        "AUTHENTICATION_REQUIRED": (.notAuthenticated, 421, true),
        "AUTHENTICATION_FAILED": (.notAuthenticated, 401, true),
        "ACCESS_DENIED": (.notAuthenticated, 403, true),
        "BAD_REQUEST": (.invalidArguments, 400, true),
        "VALIDATING_REFERENCE_ERROR": (.invalidArguments, 412, true),
        "UNIQUE_FIELD_ERROR": (.invalidArguments, 400, true),
        "INTERNAL_ERROR": (.internalError, 500, true),
        "ZONE_BUSY": (.zoneBusy, 503, false),
        "LIMIT_EXCEEDED": (.limitExceeded, 400, false),
        "CHANGE_TOKEN_EXPIRED": (.changeTokenExpired, 400, false),
        "USER_DELETED_ZONE": (.userDeletedZone, 404, false),
    ]

    /// Codes that keep their meaning on a `changes/*` request sent with a token: signing in, throttling,
    /// and a missing zone, as ckws.md §4 recommends, plus two it does not name, by choice: `ACCESS_DENIED`
    /// (a permission, which fetching from no token would meet again) and `QUOTA_EXCEEDED` (a full account
    /// pauses sending; a full refetch would not make room). Every other error there means the token is no
    /// longer good (no code for an expired token is documented).
    private static let keptOnChangeFetches: Set<String> = [
        "AUTHENTICATION_REQUIRED", "AUTHENTICATION_FAILED", "ACCESS_DENIED", "THROTTLED", "TRY_AGAIN_LATER",
        "ZONE_BUSY", "ZONE_NOT_FOUND", "USER_DELETED_ZONE", "CHANGE_TOKEN_EXPIRED", "QUOTA_EXCEEDED",
    ]

    /// The code for a `serverErrorCode` sent with `status` (nil for an item inside a 200).
    static func code(for serverErrorCode: String, status: Int?) -> CloudError.Code {
        if let known = table[serverErrorCode] { return known.code }
        return code(forStatus: status ?? 400)
    }

    /// The code for a status alone (an unknown `serverErrorCode`).
    static func code(forStatus status: Int) -> CloudError.Code {
        switch status {
        case 429: return .requestRateLimited
        case 502, 503, 504: return .serviceUnavailable
        case 500...599: return .internalError
        case 401, 421: return .notAuthenticated
        default: return .invalidArguments
        }
    }

    /// The error for the keys of an error (a request's or an item's).
    static func error(
        _ fields: CloudKitWire.ErrorFields, status: Int?, operation: Operation, sentChangeToken: Bool,
        retryAfterHeader: String? = nil
    ) -> CloudError {
        let raw = fields.serverErrorCode ?? "UNKNOWN"
        var code = code(for: raw, status: status)
        let reason = fields.reason.map { $0.isEmpty ? "" : ": \($0)" } ?? ""
        var message =
            "CloudKit answered \(operation.rawValue) with \(raw)\(status.map { " (HTTP \($0))" } ?? "")\(reason)"
        let retryAfter = fields.retryAfter.flatMap(duration(seconds:)) ?? retryAfterHeader.flatMap(headerDuration)
        if operation.fetchesChanges, sentChangeToken, retryAfter == nil, !keptOnChangeFetches.contains(raw) {
            code = .changeTokenExpired
            message += ". Taken as an expired change token: CloudKit documents no code for one."
        }
        if let uuid = fields.uuid, !uuid.isEmpty { message += " (error \(uuid))" }
        return CloudError(
            code, message, retryAfter: retryAfter, serverErrorCode: raw,
            redirectURL: fields.redirectURL.flatMap(URL.init(string:)))
    }

    /// The error for a response whose status is not 200.
    static func error(for response: HTTPExchangeResponse, operation: Operation, sentChangeToken: Bool) -> CloudError {
        let retryAfterHeader = response.header("Retry-After")
        if let fields = CloudKitWire.ErrorFields.of(body: response.body) {
            return error(
                fields, status: response.status, operation: operation, sentChangeToken: sentChangeToken,
                retryAfterHeader: retryAfterHeader)
        }
        // No CloudKit error body: a proxy's page, an empty 500, a server going down.
        let code: CloudError.Code
        switch response.status {
        case 429: code = .requestRateLimited
        case 500...599: code = .serviceUnavailable
        case 401: code = .notAuthenticated
        // HTTP's "Content Too Large" from something in front of CloudKit (CloudKit's own 413, a full quota,
        // has a body): the request is too large, so it is split, down to a record refused on its own,
        // rather than retried as it is for good while everything after it in its zone waits.
        case 413: code = .limitExceeded
        // HTTP's "Misdirected Request" (CloudKit's own 421 has a body): a network failure, retried.
        case 421: code = .networkFailure
        default: code = .unexpectedServerResponse
        }
        return CloudError(
            code,
            "CloudKit answered \(operation.rawValue) with HTTP \(response.status) and no CloudKit error "
                + "(\(describeBody(response.body)))",
            retryAfter: retryAfterHeader.flatMap(headerDuration))
    }

    /// The error for a 200 whose body could not be read as `operation`'s response.
    static func unexpectedResponse(_ operation: Operation, _ body: Data, problem: String) -> CloudError {
        CloudError(
            .unexpectedServerResponse,
            "CloudKit's answer to \(operation.rawValue) could not be read: \(problem) (\(describeBody(body)))")
    }

    /// The error for a failure to get any complete response: `CancellationError` when the request was
    /// cancelled, else a `CloudError`. Messages never include the URL, whose query holds tokens.
    static func error(forTransportFailure failure: any Error, operation: Operation) -> any Error {
        if failure is CancellationError { return failure }
        guard let urlError = failure as? URLError else {
            if let cloudError = failure as? CloudError { return cloudError }
            return CloudError(.networkFailure, "The \(operation.rawValue) request failed: \(type(of: failure)).")
        }
        switch urlError.code {
        case .cancelled:
            return CancellationError()
        case .notConnectedToInternet, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed,
            .internationalRoamingOff, .dataNotAllowed, .callIsActive:
            return CloudError(
                .networkUnavailable,
                "Could not reach CloudKit for \(operation.rawValue) (URLError \(urlError.code.rawValue)); nothing was sent."
            )
        case .timedOut:
            return CloudError(
                .networkFailure,
                "CloudKit did not answer \(operation.rawValue) in time (URLError \(urlError.code.rawValue)); "
                    + "it may have applied it.")
        default:
            return CloudError(
                .networkFailure,
                "The connection failed during \(operation.rawValue) (URLError \(urlError.code.rawValue)); "
                    + "CloudKit may have applied it.")
        }
    }

    /// A `retryAfter` in seconds as a wait; none for a value that gives no time to wait (0 or less), which
    /// would have the engine retry at once, over and over, or retry a change it would otherwise park.
    private static func duration(seconds: Double) -> Duration? {
        guard seconds.isFinite, seconds > 0 else { return nil }
        return .milliseconds(max(1, Int64((seconds * 1_000).rounded())))
    }

    private static func headerDuration(_ value: String) -> Duration? {
        Int64(value.trimmingCharacters(in: .whitespaces)).flatMap { $0 > 0 ? .seconds($0) : nil }
    }

    /// A short description of a body for an error message: its size and what it starts with.
    private static func describeBody(_ body: Data) -> String {
        if body.isEmpty { return "empty body" }
        // Newlines as spaces, byte by byte: Foundation's `replacingOccurrences` took microseconds, and a
        // modify reports each record its answer lacks with this description.
        let start = String(
            decoding: body.prefix(60).map { $0 == UInt8(ascii: "\n") ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
        return "\(body.count) bytes starting \"\(start)\(body.count > 60 ? "…" : "")\""
    }
}

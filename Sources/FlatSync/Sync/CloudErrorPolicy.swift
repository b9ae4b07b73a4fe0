/// What the engine does about a failed send or fetch: the error table of <doc:Errors>, as a pure function.
///
/// | error | action |
/// |---|---|
/// | network unavailable / failure | keep; retry when the network returns or after backoff |
/// | service unavailable, rate limited, zone busy, batch failed, unexpected server response | keep; wait `retryAfter`, else back off |
/// | limit exceeded | split the batch in half (a single record: park it as refused) |
/// | server record changed | merge local over the server record, resend with the server's tag |
/// | zone not found | create the zone, resend |
/// | user deleted zone | wipe the zone and its commands, do not resend |
/// | change token expired | fetch again from nil (reset) |
/// | not authenticated | stop; wait for an account change |
/// | quota exceeded | keep, pause sending |
/// | unknown item | a save is resent as a create; a delete is done |
/// | anything else (bad request, reference or unique-field validation, a per-record internal error, unknown codes) | park the change as refused: kept applied and pending, reported, retried only when asked (see `RefusedChange`); a request refused as a whole is split until the culprit stands alone |
/// | anything else with `retryAfter` | keep; wait `retryAfter`, then send again (five times for a record at most, then park it) |
///
/// Apple documents `retryAfter` as "the suggested time to wait before trying this operation again. If
/// this key is not set, the operation can't be retried" (CKWS reference, error dictionaries). So an error
/// that would park a change is retried instead when the server gives `retryAfter`: the server said the
/// operation can go through later. The converse is not followed: Apple's error table calls `THROTTLED`
/// and `TRY_AGAIN_LATER` "retry later" without promising `retryAfter`, and the two texts disagree there;
/// such an error without `retryAfter` backs off and retries, as parking every change for a transient
/// condition would hold the user's edits back until someone asks. Which of the two texts the live server
/// follows is not known.
package enum CloudErrorPolicy {
    package enum Action: Equatable, Sendable {
        /// Keep the change; try again after the delay (or backoff when nil).
        case retryLater(after: Duration?)
        /// Keep the change; try again when the network is back (or after backoff).
        case waitForNetwork
        /// Split the request in half and send each half (one record: park it as refused).
        case split
        /// Merge the local record over the server's and resend with its tag.
        case mergeWithServerRecord
        /// Create the zone and resend.
        case createZone
        /// Wipe the zone's local data and commands; do not resend.
        case wipeZone
        /// Fetch the zone again from the beginning.
        case resetZone
        /// Keep the change and stop sending until something changes.
        case pause(PauseReason)
        /// The record is gone on the server: resend a save as a create, count a delete as done.
        case recordMissing
        /// Park this record's change as refused: keep it pending and applied, report it, and send it again
        /// only when asked.
        case refuse
    }

    /// The action for an error that failed a whole request: as ``action(for:)``, except that only a request
    /// the server calls malformed (``CloudError/Code-swift.struct/invalidArguments``) without `retryAfter`
    /// is refused — halved until the culprit stands alone, then parked. A request-level internal error or
    /// an unknown code says nothing about any one record, so every record waits and is sent again: parking
    /// them all for one server hiccup would hold the user's changes back until someone asks. The design's
    /// table parks "a per-record internal error", and CloudKit reports what it has against one record inside
    /// a 200, record by record (observed live: pyicloud #353, better-bear #7), so a whole request's 500 is
    /// the server failing, retried as a busy server is. (Tried and dropped on 2026-11-28: parking after a
    /// few such waits. Telling a record that makes every request fail from an outage took three rounds of
    /// heuristics, each reviewed into new holes, and still parked nothing when the record was the only one
    /// left, the usual case.)
    package static func requestAction(for error: CloudError) -> Action {
        let action = action(for: error)
        guard action == .refuse, error.code != .invalidArguments else { return action }
        return .retryLater(after: error.retryAfter)
    }

    /// True when `error` would park its change (or, for a whole request, halve it) but for its
    /// `retryAfter`: the engine waits for such an error a few times for one record (for a whole request,
    /// pushes of its zone in a row), then parks the change after all, so that a server that keeps saying
    /// "later" to one record does not hold its zone back for good.
    package static func waitsOnlyForRetryAfter(_ error: CloudError, wholeRequest: Bool = false) -> Bool {
        guard error.retryAfter != nil else { return false }
        var bare = error
        bare.retryAfter = nil
        return (wholeRequest ? requestAction(for: bare) : action(for: bare)) == .refuse
    }

    /// True when a request that failed with `error` may still have been applied by the server: its answer
    /// was lost on the way (`networkFailure`, or an error that is not a ``CloudError`` such as a
    /// cancellation), or something answered in the server's place after it may have committed — a gateway's
    /// 502 or 504 with no CloudKit body (`serviceUnavailable`), a 500 (`internalError`), or an answer that
    /// does not read (`unexpectedServerResponse`). CloudKit documents none of these as "nothing was
    /// applied". The other codes are the server refusing the request before it acts: no network to send it
    /// on, a throttle, a busy zone, a request too large, a missing zone, a bad token or argument, a full
    /// quota. Taking a refused request as unknown costs only a merge without an ancestor; taking an applied
    /// one as refused counts its change twice in a merge, so the doubtful codes count as unknown.
    package static func mayHaveBeenApplied(afterRequestFailedWith error: any Error) -> Bool {
        guard let error = error as? CloudError else { return true }
        switch error.code {
        case .networkFailure, .serviceUnavailable, .internalError, .unexpectedServerResponse: return true
        default: return false
        }
    }

    /// True when a record that failed with `error` inside an answer to its request may still have been
    /// saved or deleted by the server: the server's entry for it did not read, or was missing, which a
    /// transport reports as `unexpectedServerResponse` (CKWS: a 200 whose entry lacks what a record needs), or
    /// its answer was lost (`networkFailure`, which no transport of this package gives a single record). Every
    /// other code of a record's own is the server's answer about that record.
    package static func mayHaveBeenApplied(recordFailedWith error: CloudError) -> Bool {
        error.code == .unexpectedServerResponse || error.code == .networkFailure
    }

    /// The action for an error.
    package static func action(for error: CloudError) -> Action {
        switch error.code {
        case .networkUnavailable, .networkFailure:
            return .waitForNetwork
        case .serviceUnavailable, .requestRateLimited, .zoneBusy, .batchRequestFailed, .unexpectedServerResponse:
            return .retryLater(after: error.retryAfter)
        case .limitExceeded:
            return .split
        case .serverRecordChanged:
            return error.serverRecord == nil ? .retryLater(after: nil) : .mergeWithServerRecord
        case .zoneNotFound:
            return .createZone
        case .userDeletedZone:
            return .wipeZone
        case .changeTokenExpired:
            return .resetZone
        case .notAuthenticated:
            return .pause(.notAuthenticated)
        case .quotaExceeded:
            return .pause(.quotaExceeded)
        case .unknownItem:
            return .recordMissing
        default:
            // invalidArguments, internalError, partialFailure without detail, and codes added later: parked,
            // unless the server says when the operation can be tried again.
            return error.retryAfter.map { .retryLater(after: $0) } ?? .refuse
        }
    }
}

/// What a push from the server asks the engine to do: fetch the changes of some zones, or of the whole
/// database.
///
/// CloudKit delivers a push as an APNs payload, `{"aps": {…}, "ck": {…}}`, whether it reaches an iOS app
/// (its `userInfo`) or a web courier long poll. Apple documents none of the `ck` keys; FlatSync reads the
/// ones Apple's own CloudKit.framework parses (`CKNotification`, `CKRecordZoneNotification`,
/// `CKQueryNotification`, `CKDatabaseNotification`, as decompiled from iOS 26.1) and that third parties
/// captured from the live web courier (MistKit #379):
///
/// | key | meaning | FlatSync fetches |
/// |---|---|---|
/// | `ck.fet.zid` | a record zone subscription fired for the zone `zid` | that zone |
/// | `ck.qry.zid` | a query subscription fired for a record in the zone `zid` | that zone |
/// | `ck.met` | a database subscription fired | the whole database |
/// | anything else, or nothing readable | — | the whole database |
///
/// Reading is lenient and never fails: a payload it cannot place asks for a whole-database fetch, which is
/// always correct, only slower. Pushes coalesce and can be missed altogether, so a source also asks for a
/// whole-database fetch after any gap in which one might have been lost (``Reason/gap``).
public struct CloudNotification: Sendable, Hashable, CustomStringConvertible {
    /// What to fetch.
    public enum Fetch: Sendable, Hashable {
        /// The changes of these zones.
        case zones([ZoneID])
        /// The database's changes: every zone that changed since the last fetch.
        case database
    }

    /// Why the notification asks for what it does.
    public enum Reason: String, Sendable, Hashable {
        /// A record zone subscription fired (`ck.fet`).
        case recordZone
        /// A query subscription fired (`ck.qry`).
        case query
        /// A database subscription fired (`ck.met`).
        case database
        /// The payload was not one FlatSync can place (no `ck`, an unknown kind, no zone, not JSON).
        case unrecognized
        /// No payload at all: pushes may have been missed (a push token was just registered, the connection
        /// to the server came back, a long poll ended empty), so the whole database is fetched.
        case gap
    }

    /// What to fetch.
    public var fetch: Fetch
    /// Why.
    public var reason: Reason
    /// The notification's ID (`ck.nid`), when the payload has one. Not unique per delivery: one change that
    /// matches several subscriptions arrives once per subscription under one ID (observed live, MistKit
    /// #379), so it must not be used to drop duplicates.
    public var notificationID: String?
    /// The ID of the subscription that fired (`sid` of `fet`, `qry` or `met`), when the payload has one.
    public var subscriptionID: String?

    /// A notification; sources and tests build them.
    public init(fetch: Fetch, reason: Reason, notificationID: String? = nil, subscriptionID: String? = nil) {
        self.fetch = fetch
        self.reason = reason
        self.notificationID = notificationID
        self.subscriptionID = subscriptionID
    }

    /// A whole-database fetch for `reason` (by default after a gap in which pushes may have been missed).
    public static func wholeDatabase(_ reason: Reason = .gap) -> CloudNotification {
        CloudNotification(fetch: .database, reason: reason)
    }

    /// Reads an APNs payload as an iOS app receives it (`application(_:didReceiveRemoteNotification:…)`'s
    /// `userInfo`), or as a web courier's JSON object parsed with `JSONSerialization`.
    ///
    /// Never fails: whatever it cannot read asks for a whole-database fetch (``Reason/unrecognized``).
    public init(userInfo: [AnyHashable: Any]) {
        guard let ck = Self.dictionary(userInfo["ck"]) else {
            self.init(fetch: .database, reason: .unrecognized)
            return
        }
        let notificationID = ck["nid"] as? String
        // Apple's client checks `qry`, then `fet`, then `met`; a payload carries one of them.
        for (key, reason) in [("qry", Reason.query), ("fet", Reason.recordZone), ("met", Reason.database)] {
            guard let body = Self.dictionary(ck[key]) else { continue }
            let subscriptionID = body["sid"] as? String
            // `met` may name a zone too (for the shared database, whose zones the owner names); a database
            // subscription still means "something in the database changed".
            if reason != .database, let zone = body["zid"] as? String, !zone.isEmpty {
                self.init(
                    fetch: .zones([ZoneID(zone)]), reason: reason, notificationID: notificationID,
                    subscriptionID: subscriptionID)
            } else {
                // A zone notification without its zone (a pruned payload, say) still means a change.
                self.init(
                    fetch: .database, reason: reason, notificationID: notificationID, subscriptionID: subscriptionID)
            }
            return
        }
        self.init(fetch: .database, reason: .unrecognized, notificationID: notificationID)
    }

    public var description: String {
        switch fetch {
        case .zones(let zones): return "fetch \(zones.map(\.name).joined(separator: ", ")) (\(reason.rawValue))"
        case .database: return "fetch the database (\(reason.rawValue))"
        }
    }

    /// A nested dictionary of a payload, whichever key type the decoder gave it.
    private static func dictionary(_ value: Any?) -> [AnyHashable: Any]? {
        if let dictionary = value as? [AnyHashable: Any] { return dictionary }
        if let dictionary = value as? [String: Any] {
            return Dictionary(uniqueKeysWithValues: dictionary.map { (AnyHashable($0.key), $0.value) })
        }
        return nil
    }
}

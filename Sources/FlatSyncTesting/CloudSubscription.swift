import FlatSync
import Foundation

/// A zone subscription a test cloud keeps: the server pushes a notification to the account's devices when
/// a record in ``zone`` changes (CloudKit's `CKRecordZoneSubscription`; CKWS `subscriptionType` `"zone"`).
///
/// Test clouds keep zone subscriptions only; query and database subscriptions are not modelled.
public struct CloudSubscription: Sendable, Codable, Hashable {
    /// The subscription's ID, unique in the database.
    public var id: String
    /// The zone whose changes it announces.
    public var zone: ZoneID
    /// The CKWS `notificationInfo` object as the client sent it (JSON), kept to send back and to shape the
    /// notification's `aps`; `nil` when none was sent.
    public var notificationInfo: Data?

    /// A zone subscription.
    public init(id: String, zone: ZoneID, notificationInfo: Data? = nil) {
        self.id = id
        self.zone = zone
        self.notificationInfo = notificationInfo
    }

    /// The ID FlatSync's test clouds give the subscription they create for `zone` in
    /// `CloudTransport.subscribeToChanges(in:)`, the one the CKWS transport gives it too.
    public static func flatSyncID(for zone: ZoneID) -> String {
        "flatsync-\(zone.name)"
    }
}

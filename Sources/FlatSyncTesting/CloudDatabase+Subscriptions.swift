import FlatSync

// Zone subscriptions: what CKWS `subscriptions/modify`, `subscriptions/list` and `subscriptions/lookup` do,
// and `CloudTransport.subscribeToChanges(in:)` on top of them.
//
// Sources, as the research notes give them: the request and response shapes are documented
// (ModifySubscriptions.html, GetSubscriptions.html, LookupSubscriptionsbyID.html). That creating an existing
// ID succeeds and returns the existing subscription, and that a duplicate of another subscription's content
// under another ID fails with INTERNAL_ERROR "could not find subscription we just created" inside a 200, was
// observed live for query subscriptions (MistKit #387, PR #416) and is assumed here for zone ones. What
// happens to a zone's subscriptions when the zone is deleted is not documented: here they go with it (the
// stricter of the two possibilities, so a client that does not subscribe again after creating a zone anew
// is caught).

extension CloudDatabase {
    /// The reason CloudKit gave, observed live, for a subscription whose content duplicates another's.
    package static let duplicateSubscriptionReason = "could not find subscription we just created"

    /// Every subscription, sorted by ID.
    package func subscriptions() -> [CloudSubscription] {
        (subscriptionsByID ?? [:]).values.sorted { $0.id < $1.id }
    }

    /// The subscription with `id`, if there is one.
    package func subscription(id: String) -> CloudSubscription? {
        subscriptionsByID?[id]
    }

    /// The subscriptions that announce changes in `zone`.
    package func subscriptions(of zone: ZoneID) -> [CloudSubscription] {
        subscriptions().filter { $0.zone == zone }
    }

    /// Creates a subscription, as a `create` operation of `subscriptions/modify`, and returns what the
    /// server holds afterwards.
    ///
    /// - A subscription with the same ID exists: nothing changes and the existing one is returned (observed
    ///   live for query subscriptions).
    /// - Another subscription already announces the zone: fails with
    ///   `CloudError.Code.internalError` and ``duplicateSubscriptionReason`` (observed live for
    ///   a query subscription duplicating another's content; assumed for zone subscriptions).
    /// - The zone does not exist: fails with `CloudError.Code.zoneNotFound` (assumed).
    package mutating func createSubscription(_ subscription: CloudSubscription) throws(CloudError) -> CloudSubscription
    {
        try Self.validate(subscription)
        if let existing = subscriptionsByID?[subscription.id] { return existing }
        try requireZone(subscription.zone)
        guard subscriptions(of: subscription.zone).isEmpty else {
            throw CloudError(.internalError, Self.duplicateSubscriptionReason)
        }
        subscriptionsByID = (subscriptionsByID ?? [:]).merging([subscription.id: subscription]) { $1 }
        return subscription
    }

    /// Replaces the subscription with the same ID, as an `update` operation of `subscriptions/modify`.
    ///
    /// Fails with `CloudError.Code.unknownItem` when there is none, and as
    /// ``createSubscription(_:)`` does for a missing zone or a duplicate of another subscription (assumed).
    package mutating func updateSubscription(_ subscription: CloudSubscription) throws(CloudError) -> CloudSubscription
    {
        try Self.validate(subscription)
        guard subscriptionsByID?[subscription.id] != nil else {
            throw CloudError(.unknownItem, "There is no subscription \(subscription.id) to update.")
        }
        try requireZone(subscription.zone)
        guard subscriptions(of: subscription.zone).allSatisfy({ $0.id == subscription.id }) else {
            throw CloudError(.internalError, Self.duplicateSubscriptionReason)
        }
        subscriptionsByID?[subscription.id] = subscription
        return subscription
    }

    /// Deletes the subscription `id`, as a `delete` operation of `subscriptions/modify`; fails with
    /// `CloudError.Code.unknownItem` when there is none (assumed).
    package mutating func deleteSubscription(id: String) throws(CloudError) {
        guard subscriptionsByID?.removeValue(forKey: id) != nil else {
            throw CloudError(.unknownItem, "There is no subscription \(id) to delete.")
        }
    }

    /// `CloudTransport.subscribeToChanges(in:)`: a zone subscription for each zone that has none, with the
    /// ID ``CloudSubscription/flatSyncID(for:)``; zones that have one, whoever made it, are left alone.
    ///
    /// - Throws: `CloudError.Code.zoneNotFound` (or `userDeletedZone`) for a zone that does
    ///   not exist; nothing is created then.
    package mutating func subscribeToChanges(in zones: [ZoneID]) throws(CloudError) {
        try Self.validateZoneNames(zones)
        for zone in zones { try requireZone(zone) }
        for zone in zones where subscriptions(of: zone).isEmpty {
            _ = try createSubscription(CloudSubscription(id: CloudSubscription.flatSyncID(for: zone), zone: zone))
        }
    }

    /// Forgets the subscriptions of a zone that was deleted.
    mutating func removeSubscriptions(of zone: ZoneID) {
        guard let all = subscriptionsByID, all.values.contains(where: { $0.zone == zone }) else { return }
        subscriptionsByID = all.filter { $0.value.zone != zone }
    }

    private static func validate(_ subscription: CloudSubscription) throws(CloudError) {
        guard !subscription.id.isEmpty else {
            throw CloudError(.invalidArguments, "A subscription needs a subscriptionID.")
        }
        try validateZoneNames([subscription.zone])
    }
}

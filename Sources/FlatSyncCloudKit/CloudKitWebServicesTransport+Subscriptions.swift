import FlatSync
import Foundation

extension CloudKitWebServicesTransport {
    /// Makes sure CloudKit pushes changes in these zones to the user's devices: one zone subscription per
    /// zone, with `shouldSendContentAvailable` (a silent push), ID `flatsync-<ZoneName>`.
    ///
    /// `GET subscriptions/list` first; a zone that has any zone subscription, whoever made it, counts as
    /// subscribed. Then one `subscriptions/modify` creates the missing ones. CloudKit treats a subscription
    /// duplicating another's content as an error of its own item inside a 200 (`INTERNAL_ERROR` "could not
    /// find subscription we just created"; observed live for query subscriptions, MistKit #387 / PR #416,
    /// assumed for zone ones), while creating an ID that exists succeeds silently. So a per-item error (two
    /// devices subscribing at once, say) lists again: a zone that has a subscription now is fine; one that
    /// still has none fails with its item's error. Nothing is ever deleted.
    ///
    /// The subscriptions belong to the signed-in user (the web auth token), so they reach every device of
    /// the user; a subscription made with a server-to-server key would belong to the key instead (MistKit
    /// #338), which this transport never uses.
    public func subscribeToChanges(in zones: [ZoneID]) async throws {
        try Self.requireZoneNames(zones)
        var wanted: [ZoneID] = []
        for zone in zones where !wanted.contains(zone) { wanted.append(zone) }
        guard !wanted.isEmpty else { return }

        let subscribed = try await subscribedZones()
        let missing = wanted.filter { !subscribed.contains($0) }
        guard !missing.isEmpty else { return }

        let request = CloudKitWire.SubscriptionsCreateRequest(
            subscriptions: missing.map { (Self.subscriptionID(for: $0), $0) })
        let reply = try await send(.modifySubscriptions, body: try encode(request))
        let response = try decode(CloudKitWire.SubscriptionsResponse.self, reply, .modifySubscriptions)
        let created = Set(response.subscriptions.compactMap(\.subscribedZone))
        let itemErrors = Dictionary(
            response.subscriptions.compactMap { entry in entry.error.map { (entry.subscriptionID ?? "", $0) } },
            uniquingKeysWith: { first, _ in first })
        if missing.allSatisfy(created.contains) && itemErrors.isEmpty { return }

        // Someone else's subscription may have won the race: what counts is whether one exists now.
        let now = try await subscribedZones()
        for zone in missing where !now.contains(zone) {
            if let error = itemErrors[Self.subscriptionID(for: zone)] {
                throw CloudKitErrorMapping.error(
                    error, status: nil, operation: .modifySubscriptions, sentChangeToken: false)
            }
            throw CloudKitErrorMapping.unexpectedResponse(
                .modifySubscriptions, reply.data, problem: "the zone \(zone) has no subscription afterwards")
        }
    }

    /// The ID FlatSync gives the zone subscription it creates for `zone`.
    static func subscriptionID(for zone: ZoneID) -> String {
        "flatsync-\(zone.name)"
    }

    /// The zones that have a zone subscription (`GET subscriptions/list`).
    private func subscribedZones() async throws -> Set<ZoneID> {
        let reply = try await send(.listSubscriptions, method: "GET", body: nil)
        let response = try decode(CloudKitWire.SubscriptionsResponse.self, reply, .listSubscriptions)
        return Set(response.subscriptions.compactMap(\.subscribedZone))
    }
}

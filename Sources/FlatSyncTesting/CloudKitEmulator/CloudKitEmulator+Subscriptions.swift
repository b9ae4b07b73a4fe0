import FlatSync
import FlatSyncCloudKit
import Foundation

// subscriptions/list, subscriptions/lookup and subscriptions/modify (ModifySubscriptions.html,
// GetSubscriptions.html, LookupSubscriptionsbyID.html), for zone subscriptions. The rules they apply, and
// which of them are observed live or assumed, are CloudDatabase's (CloudDatabase+Subscriptions.swift).

extension CloudKitEmulator {
    /// One operation of `subscriptions/modify`, as parsed: its type, and the subscription or why it cannot
    /// be used (an error of that item alone).
    private struct SubscriptionOperation: Sendable {
        enum Kind: String, Sendable { case create, update, delete }

        var kind: Kind
        var id: String
        var subscription: Result<CloudSubscription, CloudError>
    }

    /// What one operation or lookup came to.
    private enum SubscriptionOutcome: Sendable {
        case subscription(CloudSubscription)
        case deleted(String)
        case failed(String, CloudError)
    }

    /// `GET subscriptions/list` → `{"subscriptions":[…]}`, every subscription. Counted as
    /// `listSubscriptions`.
    func listSubscriptions() async -> HTTPServerReply {
        switch await serve(.listSubscriptions, { $0.subscriptions() }) {
        case .failure(let error): return reply(for: error)
        case .success(let subscriptions): return render(subscriptions.map { .subscription($0) })
        }
    }

    /// `subscriptions/lookup` `{"subscriptions":[{"subscriptionID"}]}` → `{"subscriptions":[…]}`, one entry
    /// per ID in order: the subscription, or NOT_FOUND (assumed). Counted as `listSubscriptions`.
    func lookupSubscriptions(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result { () throws(CloudKitJSON.Problem) -> [String] in
            try CloudKitJSON.array(body["subscriptions"], "subscriptions").enumerated().map {
                (index, raw) throws(CloudKitJSON.Problem) -> String in
                let entry = try CloudKitJSON.object(raw, "subscriptions[\(index)]")
                return try CloudKitJSON.string(entry["subscriptionID"], "subscriptions[\(index)].subscriptionID")
            }
        }.mapError(\.cloudError)
        let outcome = await serve(.listSubscriptions) { (database) throws(CloudError) -> [SubscriptionOutcome] in
            try parsed.get().map { id in
                database.subscription(id: id).map { .subscription($0) }
                    ?? .failed(id, CloudError(.unknownItem, "There is no subscription \(id)."))
            }
        }
        switch outcome {
        case .failure(let error): return reply(for: error)
        case .success(let outcomes): return render(outcomes)
        }
    }

    /// `subscriptions/modify` `{"operations":[{"operationType","subscription"}]}` → `{"subscriptions":[…]}`,
    /// one entry per operation in order: the subscription as the server holds it, `{"subscriptionID",
    /// "deleted": true}` for a delete (the shape is assumed: none is documented), or the item's error.
    ///
    /// The emulator keeps zone subscriptions only: a `query` one is refused for its item with BAD_REQUEST
    /// (**emulator behaviour**; CloudKit accepts them). A body that is not a list of operations, an
    /// operation that is not an object, an unknown `operationType` fail the whole request (400).
    func modifySubscriptions(_ body: CloudKitJSON.Object) async -> HTTPServerReply {
        let parsed = Result { () throws(CloudKitJSON.Problem) -> [SubscriptionOperation] in
            try CloudKitJSON.array(body["operations"], "operations").enumerated().map {
                (index, raw) throws(CloudKitJSON.Problem) -> SubscriptionOperation in
                let what = "operations[\(index)]"
                let operation = try CloudKitJSON.object(raw, what)
                let typeName = try CloudKitJSON.string(operation["operationType"], "\(what).operationType")
                guard let kind = SubscriptionOperation.Kind(rawValue: typeName) else {
                    throw CloudKitJSON.Problem(
                        "The subscription operation type \(typeName) is not create, update or delete.")
                }
                let subscription = try CloudKitJSON.object(operation["subscription"], "\(what).subscription")
                let id = (try? CloudKitJSON.string(subscription["subscriptionID"], "")) ?? ""
                return SubscriptionOperation(
                    kind: kind, id: id, subscription: Self.subscription(subscription, needsZone: kind != .delete))
            }
        }.mapError(\.cloudError)
        let outcome = await serve(.modifySubscriptions) { (database) throws(CloudError) -> [SubscriptionOutcome] in
            try parsed.get().map { operation -> SubscriptionOutcome in
                do throws(CloudError) {
                    let subscription = try operation.subscription.get()
                    switch operation.kind {
                    case .create: return .subscription(try database.createSubscription(subscription))
                    case .update: return .subscription(try database.updateSubscription(subscription))
                    case .delete:
                        try database.deleteSubscription(id: subscription.id)
                        return .deleted(subscription.id)
                    }
                } catch {
                    return .failed(operation.id, error)
                }
            }
        }
        switch outcome {
        case .failure(let error): return reply(for: error)
        case .success(let outcomes): return render(outcomes)
        }
    }

    /// A subscription a client sent, or the error of its item: an ID is needed, and for a create or update
    /// `subscriptionType` `"zone"` with a `zoneID`.
    private static func subscription(_ object: CloudKitJSON.Object, needsZone: Bool) -> Result<
        CloudSubscription, CloudError
    > {
        Result { () throws(CloudKitJSON.Problem) -> CloudSubscription in
            let id = try CloudKitJSON.string(object["subscriptionID"], "subscriptionID")
            guard !id.isEmpty else { throw CloudKitJSON.Problem("subscriptionID must not be empty.") }
            guard needsZone else { return CloudSubscription(id: id, zone: ZoneID("")) }
            let type = try CloudKitJSON.string(object["subscriptionType"], "subscriptionType")
            guard type == "zone" else {
                throw CloudKitJSON.Problem(
                    type == "query"
                        ? "The emulator keeps zone subscriptions only, not query subscriptions."
                        : "The subscriptionType \(type) is not zone or query.")
            }
            let zone = try CloudKitJSON.zoneID(from: object["zoneID"], "zoneID")
            var info: Data?
            if let value = object["notificationInfo"], value != .null {
                _ = try CloudKitJSON.object(value, "notificationInfo")
                info = CloudKitJSON.data(value)
            }
            return CloudSubscription(id: id, zone: zone, notificationInfo: info)
        }.mapError(\.cloudError)
    }

    /// A 200 `{"subscriptions":[…]}`, one entry per outcome.
    private func render(_ outcomes: [SubscriptionOutcome]) -> HTTPServerReply {
        let entries = outcomes.map { outcome -> JSONValue in
            switch outcome {
            case .subscription(let subscription):
                var entry: CloudKitJSON.Object = [
                    "subscriptionID": .string(subscription.id), "subscriptionType": "zone",
                    "zoneID": CloudKitJSON.zoneID(subscription.zone),
                ]
                if let info = subscription.notificationInfo, let value = try? JSONValue.parse(info) {
                    entry["notificationInfo"] = value
                }
                return CloudKitJSON.value(entry)
            case .deleted(let id):
                return CloudKitJSON.value(["subscriptionID": .string(id), "deleted": .bool(true)])
            case .failed(let id, let error):
                var entry = CloudKitWireError.itemBody(error, guessedCodes: options.guessedErrorCodes)
                entry["subscriptionID"] = .string(id)
                return CloudKitJSON.value(entry)
            }
        }
        return Self.ok(["subscriptions": .array(entries)])
    }
}

import FlatSync
import Foundation

// The JSON of CloudKit's push path: zone subscriptions (`subscriptions/list`, `subscriptions/modify`).

extension CloudKitWire {
    /// `subscriptions`: of `subscriptions/list`, `subscriptions/lookup` and `subscriptions/modify`.
    enum Subscriptions: ListName { static let key = "subscriptions" }

    /// `subscriptions/modify` creating one zone subscription per entry, each with `shouldSendContentAvailable`
    /// (a silent push: the notification says what changed, the engine fetches it).
    struct SubscriptionsCreateRequest: JSONWritable {
        var subscriptions: [(id: String, zone: FlatSync.ZoneID)]

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                request.member("operations") {
                    $0.array(subscriptions) { writer, subscription in
                        writer.object {
                            $0.member("operationType") { $0.string("create") }
                            $0.member("subscription") {
                                $0.object {
                                    $0.member("subscriptionID") { $0.string(subscription.id) }
                                    $0.member("subscriptionType") { $0.string("zone") }
                                    $0.member("zoneID") { ZoneID(subscription.zone).write(to: &$0) }
                                    $0.member("notificationInfo") {
                                        $0.object { $0.member("shouldSendContentAvailable") { $0.bool(true) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// An entry of a `subscriptions` list: a subscription, or an error for one (`subscriptionID`, `reason`,
    /// `serverErrorCode`). Read leniently: an entry of a kind FlatSync does not use (a query subscription,
    /// a database one) is kept with what it has, and ignored by the caller.
    struct SubscriptionEntry: JSONReadable {
        var subscriptionID: String?
        var subscriptionType: String?
        var zoneName: String?
        var errorFields = ErrorFields()
        var error: ErrorFields? { errorFields.ifError }

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "subscriptionID": subscriptionID = try reader.string()
            case "subscriptionType": subscriptionType = try reader.string()
            case "zoneID":
                zoneName = nil
                _ = try reader.readObject { key, reader in
                    if key == "zoneName" { zoneName = try reader.string() } else { try reader.skip() }
                }
            default: return try errorFields.read(key, from: &reader)
            }
            return true
        }

        func finish(wasObject: Bool) throws(FieldProblem) {
            guard wasObject else { throw FieldProblem("a subscription entry is not an object") }
        }

        /// The zone a zone subscription announces; nil for any other entry.
        var subscribedZone: FlatSync.ZoneID? {
            guard error == nil, subscriptionType == "zone", let zoneName, !zoneName.isEmpty else { return nil }
            return FlatSync.ZoneID(zoneName)
        }
    }

    typealias SubscriptionsResponse = ListResponse<SubscriptionEntry, Subscriptions>
}

extension CloudKitWire.ListResponse where Name == CloudKitWire.Subscriptions {
    var subscriptions: [Element] { elements }
}

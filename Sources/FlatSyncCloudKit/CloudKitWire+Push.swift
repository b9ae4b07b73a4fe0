import FlatSync
import Foundation

// The JSON of CloudKit's push path: push tokens (`tokens/create`, `tokens/register`) and zone subscriptions
// (`subscriptions/list`, `subscriptions/modify`). The courier's notifications are read by
// `CloudNotification(userInfo:)` in FlatSync, from `JSONSerialization`'s tree, as an iOS app's `userInfo`.

extension CloudKitWire {
    /// `tokens/create`: `{"apnsEnvironment", "clientId"}`. The documented body is `apnsEnvironment` alone
    /// (CreateTokens.html); CloudKit JS also sends a `clientId`, which MistKit sends too (PR #381).
    struct TokensCreateRequest: JSONWritable {
        var apnsEnvironment: String
        var clientID: String

        func write(to writer: inout JSONValue.Writer) {
            writer.object {
                $0.member("apnsEnvironment") { $0.string(apnsEnvironment) }
                $0.member("clientId") { $0.string(clientID) }
            }
        }
    }

    /// `tokens/create`'s answer: `{"apnsEnvironment", "apnsToken", "webcourierURL"}` (documented, and
    /// observed live in MistKit #379/#382).
    struct TokensCreateResponse: JSONReadable {
        var apnsEnvironment: String?
        var apnsToken: String?
        var webcourierURL: String?

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "apnsEnvironment": apnsEnvironment = try reader.string()
            case "apnsToken": apnsToken = try reader.string()
            case "webcourierURL": webcourierURL = try reader.string()
            default: return false
            }
            return true
        }
    }

    /// `tokens/register`: `{"apnsEnvironment", "apnsToken", "clientId"}`. Apple lists the first two as
    /// required (RegisterTokens.html); the live server failed without `apnsEnvironment` (MistKit #379).
    struct TokensRegisterRequest: JSONWritable {
        var apnsEnvironment: String
        var apnsToken: String
        var clientID: String

        func write(to writer: inout JSONValue.Writer) {
            writer.object {
                $0.member("apnsEnvironment") { $0.string(apnsEnvironment) }
                $0.member("apnsToken") { $0.string(apnsToken) }
                $0.member("clientId") { $0.string(clientID) }
            }
        }
    }

    /// Any JSON at all, read for the error keys a body may carry and nothing else: `tokens/register`
    /// documents no answer (`{}` and an empty body are both taken as success).
    struct AnyAnswer: JSONReadable {
        init() {}
        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool { false }
    }

    /// `subscriptions`: of `subscriptions/list` and `subscriptions/modify`. None listed makes the transport
    /// create its own (an ID that exists is created again silently), and none answered makes it list again.
    enum Subscriptions: ListName {
        static let key = "subscriptions"
        static let emptyWhenMissing = true
    }

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

import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync
@testable import FlatSyncCloudKit

/// `subscribeToChanges(in:)` over CKWS against scripted answers: what it sends, and how it reads a server
/// that already has subscriptions, refuses a duplicate per item, or fails.
@Suite("CKWS transport: zone subscriptions")
struct CloudKitSubscriptionTests {
    static func list(_ entries: String) -> HTTPExchangeResponse { .json(#"{"subscriptions":[\#(entries)]}"#) }

    static func zoneSubscription(_ id: String, _ zone: String) -> String {
        #"{"subscriptionID":"\#(id)","subscriptionType":"zone","zoneID":{"zoneName":"\#(zone)","ownerRecordName":"_defaultOwner"}}"#
    }

    @Test func listsFirstThenCreatesOnlyTheZonesWithoutAZoneSubscription() async throws {
        let exchange = ScriptedExchange([
            Self.list(
                Self.zoneSubscription("made-by-another-client", "ReadingList") + ","
                    + #"{"subscriptionID":"q","subscriptionType":"query","query":{"recordType":"X"},"zoneID":{"zoneName":"ReadingHistory"}}"#
            ),
            Self.list(Self.zoneSubscription("flatsync-ReadingHistory", "ReadingHistory")),
        ])
        try await makeTransport(exchange).subscribeToChanges(in: ZoneID.builtIn)
        let requests = exchange.requests
        #expect(requests.map(\.method) == ["GET", "POST"])
        #expect(
            requests.map(\.url.path) == [
                "/database/1/iCloud.com.example.news/development/private/subscriptions/list",
                "/database/1/iCloud.com.example.news/development/private/subscriptions/modify",
            ])
        #expect(requests[0].body == nil)
        #expect(
            requests[1].jsonBody
                == json(
                    #"{"operations":[{"operationType":"create","subscription":{"subscriptionID":"flatsync-ReadingHistory","subscriptionType":"zone","zoneID":{"zoneName":"ReadingHistory"},"notificationInfo":{"shouldSendContentAvailable":true}}}]}"#
                ), "a query subscription does not count; the zone that has a zone subscription is left alone")
    }

    @Test func aListWithoutItsSubscriptionsKeyHasNoneAndTheCreateDecides() async throws {
        // Not documented either way: a missing list is read as an empty one, so the transport creates its
        // subscriptions (creating an ID that exists succeeds silently) instead of never subscribing.
        let exchange = ScriptedExchange([
            .json(#"{}"#), Self.list(Self.zoneSubscription("flatsync-ReadingList", "ReadingList")),
        ])
        try await makeTransport(exchange).subscribeToChanges(in: [.readingList])
        #expect(exchange.requests.map(\.url.lastPathComponent) == ["list", "modify"])
    }

    @Test func zonesThatAllHaveOneSendNothingMore() async throws {
        let exchange = ScriptedExchange([
            Self.list(Self.zoneSubscription("a", "ReadingList") + "," + Self.zoneSubscription("b", "ReadingHistory"))
        ])
        try await makeTransport(exchange).subscribeToChanges(in: ZoneID.builtIn + ZoneID.builtIn)
        #expect(exchange.requests.count == 1)
    }

    @Test func aDuplicateRefusedForItsItemIsFineWhenTheZoneHasASubscriptionNow() async throws {
        // Another device created one between the list and the create: CloudKit refuses a duplicate by content
        // inside a 200 (observed live for query subscriptions; assumed for zone ones). The list decides.
        let exchange = ScriptedExchange([
            Self.list(""),
            Self.list(
                #"{"subscriptionID":"flatsync-ReadingList","reason":"could not find subscription we just created","serverErrorCode":"INTERNAL_ERROR"}"#
            ),
            Self.list(Self.zoneSubscription("device-b", "ReadingList")),
        ])
        try await makeTransport(exchange).subscribeToChanges(in: [.readingList])
        #expect(exchange.requests.map(\.method) == ["GET", "POST", "GET"])
    }

    @Test func anItemErrorWithStillNoSubscriptionIsThrown() async throws {
        let exchange = ScriptedExchange([
            Self.list(""),
            Self.list(
                #"{"subscriptionID":"flatsync-ReadingList","reason":"no such zone","serverErrorCode":"ZONE_NOT_FOUND"}"#
            ),
            Self.list(""),
        ])
        let error = await #expect(throws: CloudError.self) {
            try await makeTransport(exchange).subscribeToChanges(in: [.readingList])
        }
        #expect(error?.code == .zoneNotFound)
        #expect(error?.serverErrorCode == "ZONE_NOT_FOUND")
    }

    @Test func aRequestThatFailsThrowsItsError() async throws {
        let exchange = ScriptedExchange([.json(#"{"serverErrorCode":"TRY_AGAIN_LATER","retryAfter":3}"#, status: 503)])
        let error = await #expect(throws: CloudError.self) {
            try await makeTransport(exchange).subscribeToChanges(in: [.readingList])
        }
        #expect(error?.code == .serviceUnavailable)
        #expect(error?.retryAfter == .seconds(3))
    }

    @Test func anEmptyZoneNameIsRefusedBeforeAnythingIsSent() async throws {
        let exchange = ScriptedExchange([])
        await #expect(throws: CloudError.self) {
            try await makeTransport(exchange).subscribeToChanges(in: [ZoneID("")])
        }
        #expect(exchange.requests.isEmpty)
    }
}

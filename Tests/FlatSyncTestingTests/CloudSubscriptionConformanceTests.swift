import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The transport conformance suite, part 4: `subscribeToChanges(in:)`, against every `CloudUnderTest`.

@Suite("Cloud conformance: subscriptions")
struct CloudSubscriptionConformanceTests {
    @Test(arguments: CloudUnderTest.allCases)
    func oneZoneSubscriptionPerZoneMadeOnceAndNeverTwice(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            try await cloud.subscribeToChanges(in: [.notes, .photos])
            try await cloud.subscribeToChanges(in: [.notes, .photos])  // already there: fine
            try await cloud.subscribeToChanges(in: [.notes])
            #expect(
                try await cloud.subscriptions()
                    == [
                        CloudSubscription(
                            id: "flatsync-Notes", zone: .notes,
                            notificationInfo: kind.isHTTP ? Data(#"{"shouldSendContentAvailable":true}"#.utf8) : nil),
                        CloudSubscription(
                            id: "flatsync-Photos", zone: .photos,
                            notificationInfo: kind.isHTTP ? Data(#"{"shouldSendContentAvailable":true}"#.utf8) : nil),
                    ])
            let counters = try await cloud.counters()
            // Over CKWS each call lists first and creates only what is missing.
            #expect(counters.requests(.modifySubscriptions) == (kind.isHTTP ? 1 : 3))
            #expect(counters.requests(.listSubscriptions) == (kind.isHTTP ? 3 : 0))
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aZoneSubscribedUnderAnotherIDCountsAsSubscribed(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.serveDirectly { (database) throws(CloudError) in
                _ = try database.createSubscription(CloudSubscription(id: "another-client", zone: .notes))
            }
            try await cloud.subscribeToChanges(in: [.notes])
            #expect(try await cloud.subscriptions().map(\.id) == ["another-client"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aMissingZoneIsNotSubscribed(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            await expectCloudError(.zoneNotFound) { try await cloud.subscribeToChanges(in: [.notes, .photos]) }
            #expect(try await cloud.subscriptions().map(\.zone).allSatisfy { $0 == .notes })
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func deletingAZoneDropsItsSubscription(_ kind: CloudUnderTest) async throws {
        // Assumed (CloudKit documents neither way); the stricter choice, so an engine must subscribe again.
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            try await cloud.subscribeToChanges(in: [.notes, .photos])
            try await cloud.deleteZones([.notes])
            #expect(try await cloud.subscriptions().map(\.zone) == [.photos])
            try await cloud.createZones([.notes])
            try await cloud.subscribeToChanges(in: [.notes])
            #expect(try await cloud.subscriptions().map(\.zone).sorted() == [.notes, .photos])
        }
    }
}

extension CloudAdministration {
    /// Changes the database behind the transport without a client request: `InMemoryCloud` and
    /// `DirectoryCloud` directly, an emulator's backing store for an `HTTPTestCloud`.
    func serveDirectly(_ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> Void) async throws {
        let serving: any CloudDatabaseServing
        if let http = self as? HTTPTestCloud {
            serving = http.backing
        } else if let direct = self as? any CloudDatabaseServing {
            serving = direct
        } else {
            Issue.record("\(type(of: self)) cannot be changed directly")
            return
        }
        try await serving.serve(.modifySubscriptions, body)
        try await serving.resetCounters()
    }
}

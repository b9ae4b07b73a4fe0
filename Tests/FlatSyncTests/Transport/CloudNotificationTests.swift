import Foundation
import Testing

@testable import FlatSync

/// Reading APNs payloads: the three web courier frames MistKit captured against a live container (#379),
/// zone and database frames built from the keys Apple's CloudKit.framework reads, and payloads it cannot
/// place, which must ask for a whole-database fetch and never fail.
@Suite struct CloudNotificationTests {
    /// `text` as `JSONSerialization` reads it: what a web courier poll gives, and the same bridged types
    /// an iOS app's `userInfo` holds.
    static func userInfo(_ text: String) -> [AnyHashable: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    /// The `ck` of the captured frames (a query subscription in the default zone; live, MistKit #379).
    static let capturedCK = """
        "ck":{"ce":2,"ckuserid":"_aca0fa","aux":{},"nid":"c17cf8c1-5567-4635-b650-9aba0cd9acdc",
        "qry":{"zid":"_defaultZone","dbs":1,"fo":1,"zoid":"_aca0fa","rid":"B61C8113-78DD-4ED1-9E62-4666F9888FE9",
        "sid":"MistDemo.pushToken"},"cid":"iCloud.com.brightdigit.MistDemo"}
        """

    // MARK: - Live captures

    @Test(arguments: [
        #"{"aps":{"alert":"MistDemo push (token suffix: 429bd7)"},\#(capturedCK)}"#,
        "{\(capturedCK)}",
        #"{"aps":{"content-available":1},\#(capturedCK)}"#,
    ])
    func theCapturedLiveFramesNameTheirZone(frame: String) {
        let notification = CloudNotification(userInfo: Self.userInfo(frame))
        #expect(notification.fetch == .zones([ZoneID("_defaultZone")]))
        #expect(notification.reason == .query)
        #expect(notification.notificationID == "c17cf8c1-5567-4635-b650-9aba0cd9acdc")
        #expect(notification.subscriptionID == "MistDemo.pushToken")
    }

    /// A database subscription's push to a CloudKit JS client for a private Core Data zone, as posted
    /// live (typescriptlibs/tsl-apple-cloudkit #22, 2023; IDs as the reporter left them): `met` names
    /// the zone, yet a database notification is read as "fetch the database".
    @Test func theCapturedDatabaseFrameAsksForTheDatabase() {
        let frame = """
            {"aps":{"content-available":1},"ck":{"aux":{},"ce":2,"cid":"<MY ID>","ckuserid":"<MY USER ID>",
            "met":{"dbs":1,"sid":"com.apple.coredata.cloudkit.private.subscription",
            "zid":"com.apple.coredata.cloudkit.zone","zoid":"_85bc87478f3f4b2674583752b91e8249"},
            "nid":"4a65fb63-98ea-4710-a41e-6d479c63aa41"}}
            """
        let notification = CloudNotification(userInfo: Self.userInfo(frame))
        #expect(notification.fetch == .database)
        #expect(notification.reason == .database)
        #expect(notification.subscriptionID == "com.apple.coredata.cloudkit.private.subscription")
        #expect(notification.notificationID == "4a65fb63-98ea-4710-a41e-6d479c63aa41")
    }

    // MARK: - Built from Apple's parser

    @Test func aRecordZoneNotificationNamesItsZone() {
        let notification = CloudNotification(
            userInfo: Self.userInfo(
                #"{"aps":{"content-available":1},"ck":{"ce":2,"cid":"iCloud.com.example.App","nid":"n-1","ckuserid":"_abc123","fet":{"zid":"ReadingList","zoid":"_abc123","dbs":2,"sid":"flatsync-ReadingList"}}}"#
            ))
        #expect(
            notification
                == CloudNotification(
                    fetch: .zones([.readingList]), reason: .recordZone, notificationID: "n-1",
                    subscriptionID: "flatsync-ReadingList"))
    }

    @Test func aDatabaseNotificationAsksForTheDatabaseEvenWhenItNamesAZone() {
        for frame in [
            #"{"aps":{"content-available":1},"ck":{"ce":2,"cid":"iCloud.com.example.App","nid":"n-2","ckuserid":"_abc123","met":{"dbs":2,"sid":"db-sub-private"}}}"#,
            #"{"ck":{"nid":"n-2","met":{"dbs":3,"sid":"db-sub-private","zid":"Shared","zoid":"_owner"}}}"#,
        ] {
            let notification = CloudNotification(userInfo: Self.userInfo(frame))
            #expect(notification.fetch == .database)
            #expect(notification.reason == .database)
            #expect(notification.subscriptionID == "db-sub-private")
            #expect(notification.notificationID == "n-2")
        }
    }

    @Test func swiftDictionariesReadAsBridgedOnesDo() {
        // A host may build `userInfo` itself (in a test, say) with Swift dictionaries all the way down.
        let ck: [String: Any] = ["nid": "n-3", "fet": ["zid": "ReadingHistory", "sid": "s"] as [String: Any]]
        let notification = CloudNotification(userInfo: ["aps": [String: Any](), "ck": ck])
        #expect(notification.fetch == .zones([.readingHistory]))
        let hashable: [AnyHashable: Any] = [
            "ck": ["fet": ["zid": "ReadingList"] as [AnyHashable: Any]] as [AnyHashable: Any]
        ]
        #expect(CloudNotification(userInfo: hashable).fetch == .zones([.readingList]))
    }

    // MARK: - What cannot be placed

    @Test(arguments: [
        "{}", #"{"aps":{"content-available":1}}"#, #"{"ck":"text"}"#, #"{"ck":{}}"#, #"{"ck":{"nid":"n"}}"#,
        #"{"ck":{"xyz":{"zid":"ReadingList"}}}"#, #"{"ck":{"fet":"ReadingList"}}"#, #"{"ck":{"fet":[1]}}"#,
    ])
    func aPayloadWithoutAKnownKindAsksForTheWholeDatabase(frame: String) {
        let notification = CloudNotification(userInfo: Self.userInfo(frame))
        #expect(notification.fetch == .database)
        #expect(notification.reason == .unrecognized)
    }

    @Test(arguments: [
        #"{"ck":{"fet":{"dbs":2,"sid":"s"}}}"#, #"{"ck":{"fet":{"zid":""}}}"#, #"{"ck":{"fet":{"zid":7}}}"#,
        #"{"ck":{"p":1,"qry":{"fo":1}}}"#,
    ])
    func aZoneNotificationWithoutItsZoneAsksForTheWholeDatabase(frame: String) {
        let notification = CloudNotification(userInfo: Self.userInfo(frame))
        #expect(notification.fetch == .database)
        #expect(notification.reason == .recordZone || notification.reason == .query)
    }

    @Test func aGapAsksForTheWholeDatabase() {
        #expect(CloudNotification.wholeDatabase() == CloudNotification(fetch: .database, reason: .gap))
        #expect(CloudNotification.wholeDatabase().description == "fetch the database (gap)")
    }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Testing

// Getting started sample begins
import FlatSync
import FlatSyncCloudKit  // the CloudKit Web Services transport
import Foundation

/// Opens the device directory's context for the user signed in to iCloud, and starts syncing.
func openContext(
    deviceDirectory: URL, apiToken: String, recordTypes: [any SyncableRecord.Type] = [],
    server: URL = CloudKitWebServicesTransport.Configuration.appleBaseURL  // tests use the emulator's
) async throws -> SyncContext {
    var configuration = SyncContext.Configuration()
    configuration.recordTypes = recordTypes  // your own records, if any (see "Syncing your own records")
    let transport = CloudKitWebServicesTransport(
        configuration: .init(
            containerID: "iCloud.com.example.news", environment: .production, apiToken: apiToken,
            tokenStore: DirectoryWebAuthTokenStore(directory: deviceDirectory),  // the rotating web auth token
            baseURL: server))  // the context adds its record types to the schema it writes within
    let userID: String
    do {
        // Nobody signed in: notAuthenticated, with the sign-in page as its redirectURL.
        userID = try await transport.currentUser().userRecordName
    } catch let error as CloudError where error.code.isTransient || error.code == .notAuthenticated {
        // No network at launch, or the sign-in expired: carry on as the account the directory holds (nil
        // would wipe its data). Signed out, the context pauses until accountDidChange(to:) names the user.
        guard let stored = try SyncContext.accountID(storedIn: deviceDirectory) else { throw error }
        userID = stored
    }
    let context = try await SyncContext.open(
        directory: deviceDirectory, account: CloudAccount(id: userID, transport: transport),
        configuration: configuration)
    do {
        try await context.start()  // offline too: it syncs once networkDidBecomeAvailable() is called
    } catch let error as CloudError where error.code == .notAuthenticated {
        // Signed out: paused, its data there to read; once the user signs in, accountDidChange(to:), start().
    }
    return context
}
// Getting started sample ends

/// The "Getting started" article's sample is the code above, run here against the CloudKit Web Services
/// emulator, online and then offline; a test checks that the article shows exactly this text.
@Suite struct GettingStartedSampleTests {
    @Test func theSampleOpensOnlineAndOfflineWithoutLosingAChange() async throws {
        try await withTemporaryDirectory { directory in
            let phone = directory.appendingPathComponent("phone")
            let server = try CloudKitWebServicesServer(backing: InMemoryCloud())
            let url = server.baseURL
            do {
                let online = try await openContext(
                    deviceDirectory: phone, apiToken: "t", recordTypes: [TestNote.self], server: url)
                try await online.readingList.add("a1")
                try await online.records(TestNote.self).save(TestNote(id: "n1", articleID: "a1", text: "Tea"))
                #expect(try await online.syncNow().isComplete)
                try await online.close()
            } catch {
                await server.stop()
                throw error
            }
            await server.stop()

            // The server is out of reach (port 1 on this machine: nothing listens there, and no other test's
            // server can take it over): the directory's account is kept, and so is a change made now.
            let unreachable = URL(string: "http://127.0.0.1:1")!
            let offline = try await openContext(
                deviceDirectory: phone, apiToken: "t", recordTypes: [TestNote.self], server: unreachable)
            try await offline.readingList.add("a2")
            #expect(Set(await offline.readingList.entries().map(\.articleID)) == ["a1", "a2"])
            #expect(await offline.records(TestNote.self).value("n1")?.text == "Tea")
            #expect(await offline.status().pendingRecords == 1)
            try await offline.close()

            // The sign-in expired (a server that wants a web auth token, and none is held): the directory's
            // account is kept, its data shows, and nothing is sent or fetched until the host names the account.
            let signedOut = try CloudKitWebServicesServer(
                backing: InMemoryCloud(), options: .init(requireWebAuthToken: true))
            do {
                let paused = try await openContext(
                    deviceDirectory: phone, apiToken: "t", recordTypes: [TestNote.self], server: signedOut.baseURL)
                #expect(Set(await paused.readingList.entries().map(\.articleID)) == ["a1", "a2"])
                _ = try? await paused.syncNow()
                #expect(await paused.status().paused == .notAuthenticated)
                #expect(await paused.status().pendingRecords == 1)
                try await paused.close()
                await #expect(throws: CloudError.self) {
                    _ = try await openContext(
                        deviceDirectory: directory.appendingPathComponent("laptop"), apiToken: "t",
                        server: signedOut.baseURL)
                }
            } catch {
                await signedOut.stop()
                throw error
            }
            await signedOut.stop()

            // A directory that holds no account cannot be opened offline: there is nobody to open it for.
            await #expect(throws: CloudError.self) {
                _ = try await openContext(
                    deviceDirectory: directory.appendingPathComponent("tablet"), apiToken: "t", server: unreachable)
            }
        }
    }

    @Test func theArticleShowsExactlyTheSampleThatIsCompiled() throws {
        let sample = try DocumentationSample("Getting started sample", in: #filePath)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/GettingStarted.md"), "verbatim")
    }
}

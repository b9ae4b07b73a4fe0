import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// A device directory copied to a second device (an iOS backup restored on a new phone while the old one
/// stays in use, a folder copied by hand) opens with a device ID of its own: with the same ID, each
/// device took the other's writes for its own, and a delete sent by one beat an edit the other made
/// without ever having seen it (found by the eighth newcomer, a red team).
@Suite struct CopiedDirectoryTests {
    private func deviceID(_ directory: URL, options: LocalStore.Options = .init()) async throws -> String {
        let store = try LocalStore(directory: directory, options: options)
        let id = store.deviceID
        try await store.close()
        return id
    }

    @Test func aCopiedDirectoryOpensAsAnotherDeviceAndTheOriginalStaysItself() async throws {
        try await withTemporaryDirectory { root in
            let original = root.appendingPathComponent("A")
            let copy = root.appendingPathComponent("B")
            let first = try await deviceID(original)
            try FileManager.default.copyItem(at: original, to: copy)

            let store = try LocalStore(directory: copy)
            let copied = store.deviceID
            #expect(copied != first)
            #expect(store.eventHub.keptEvents == [.deviceIDChanged(from: first, to: copied)], "the host is told")
            try await store.close()
            let reopened = try LocalStore(directory: copy)
            #expect(reopened.deviceID == copied, "the copy keeps the ID it was given")
            #expect(reopened.eventHub.keptEvents.isEmpty, "told once")
            try await reopened.close()
            #expect(try await deviceID(original) == first)
            // Both of the copy's files name its new ID: a damaged device.plist falls back on device-id.plist.
            let identity = try Data(contentsOf: copy.appendingPathComponent(DeviceIdentityFile.fileName))
            #expect(try DeviceIdentityFile.decode(identity, path: "device-id.plist").deviceID == copied)
        }
    }

    @Test func aRenamedDirectoryKeepsItsID() async throws {
        try await withTemporaryDirectory { root in
            let before = root.appendingPathComponent("before")
            let after = root.appendingPathComponent("after")
            let id = try await deviceID(before)
            try FileManager.default.moveItem(at: before, to: after)
            #expect(try await deviceID(after) == id)
        }
    }

    /// A host that names the device ID keeps it in a copy too: it chose to say which device this is.
    @Test func anIDTheHostNamesIsKeptInACopy() async throws {
        try await withTemporaryDirectory { root in
            let original = root.appendingPathComponent("A")
            let copy = root.appendingPathComponent("B")
            let options = LocalStore.Options(deviceID: "kitchen-ipad")
            #expect(try await deviceID(original, options: options) == "kitchen-ipad")
            try FileManager.default.copyItem(at: original, to: copy)
            #expect(try await deviceID(copy, options: options) == "kitchen-ipad")
        }
    }

    /// A directory an earlier version wrote has no note of its inode: it is taken as it is, and noted.
    @Test func aDirectoryWithoutTheNoteKeepsItsIDAndIsNoted() async throws {
        try await withTemporaryDirectory { root in
            let directory = root.appendingPathComponent("A")
            let id = try await deviceID(directory)
            let note = directory.appendingPathComponent(LocalStore.inodeFileName)
            try FileManager.default.removeItem(at: note)
            #expect(try await deviceID(directory) == id)
            #expect(FileManager.default.fileExists(atPath: note.path))
        }
    }

    /// The loss itself: B (the copy) edits a record; A, which has not fetched since, deletes it. An edit
    /// beats a delete it did not see, on the server and on both devices.
    @Test(arguments: [SyncHarness.Route.direct, .http])
    func theCopysEditBeatsTheOriginalsUnseenDelete(_ route: SyncHarness.Route) async throws {
        try await SyncHarness.run(via: route) { harness in
            var a = try await harness.device("A") {
                $0.recordTypes = [TestRecipe.self]; $0.deviceID = nil
            }
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup"))
            try await a.readingList.add("x", title: "Rates")
            #expect(try await a.syncNow().isComplete)
            try await a.close()
            try FileManager.default.copyItem(
                at: harness.directory.appendingPathComponent("A"), to: harness.directory.appendingPathComponent("B"))
            a = try await harness.device("A") {
                $0.recordTypes = [TestRecipe.self]; $0.deviceID = nil
            }
            let b = try await harness.device("B") {
                $0.recordTypes = [TestRecipe.self]; $0.deviceID = nil
            }
            #expect(a.localStore.deviceID != b.localStore.deviceID)

            try await b.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup, edited on B"))
            #expect(try await b.readingList.remove("x"))
            #expect(try await b.readingList.add("x", title: "Rates, saved again on B"))
            #expect(try await b.syncNow().isComplete)
            #expect(try await a.records(TestRecipe.self).delete("r"))
            #expect(try await a.readingList.remove("x"))
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)

            let server = await harness.cloud.records(in: TestRecipe.zone).first { $0.id.name == "r" }
            #expect(server?.fields["title"] == .string("Soup, edited on B"))
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).value("r")?.title == "Soup, edited on B")
                #expect(await device.readingList.entry("x")?.title == "Rates, saved again on B")
            }
            try await a.close()
            try await b.close()
        }
    }
}

import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// A device directory restored from a backup on the same device (same path, whether its files are put back
/// in place or the folder is deleted and copied back, which may reuse its inode number) must not let a
/// stale change in the backup undo what was synced after it. Each save is marked with the session that
/// sent it (``OwnWrites``), and a restored directory does not remember the sessions after the backup: their
/// versions count as someone else's, so the backup's delete loses to them, as any delete loses to a version
/// it never saw (found by the ninth newcomer, a red team).
@Suite struct RestoredBackupTests {
    enum Restore: String, CaseIterable, Sendable {
        /// The backup's files copied over the directory's, the directory itself kept.
        case inPlace
        /// The directory deleted, then the backup copied to its path.
        case removeAndCopyBack
    }

    private func restore(_ directory: URL, from backup: URL, _ how: Restore) throws {
        let manager = FileManager.default
        switch how {
        case .inPlace:
            for name in try manager.contentsOfDirectory(atPath: directory.path) {
                try manager.removeItem(at: directory.appendingPathComponent(name))
            }
            for name in try manager.contentsOfDirectory(atPath: backup.path) {
                try manager.copyItem(
                    at: backup.appendingPathComponent(name), to: directory.appendingPathComponent(name))
            }
        case .removeAndCopyBack:
            try manager.removeItem(at: directory)
            try manager.copyItem(at: backup, to: directory)
        }
    }

    private func device(_ harness: SyncHarness, _ name: String, start: Bool = true) async throws -> SyncContext {
        try await harness.device(name, start: start) { $0.recordTypes = [TestRecipe.self] }
    }

    /// A deletes a recipe offline; a backup is taken; A makes the recipe again and sends it, and B sees it.
    /// The backup comes back: its delete never saw the new version, which stays everywhere.
    @Test(arguments: [SyncHarness.Route.direct, .http], Restore.allCases)
    func aRestoredBackupsStaleDeleteLosesToWhatWasSyncedAfterIt(_ route: SyncHarness.Route, _ how: Restore)
        async throws
    {
        try await SyncHarness.run(via: route) { harness in
            let directory = harness.directory.appendingPathComponent("A")
            let backup = harness.directory.appendingPathComponent("backup")
            var a = try await device(harness, "A")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup"))
            try await a.readingList.add("x", title: "Tides")
            #expect(try await a.syncNow().isComplete)
            #expect(try await a.records(TestRecipe.self).delete("r"))  // not sent: the backup holds it
            #expect(try await a.readingList.remove("x"))
            try await a.close()
            try FileManager.default.copyItem(at: directory, to: backup)

            a = try await device(harness, "A")
            #expect(try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup, second try")))
            #expect(try await a.readingList.add("x", title: "Tides, again"))
            #expect(try await a.syncNow().isComplete)
            let b = try await device(harness, "B")
            #expect(try await b.syncNow().isComplete)
            #expect(await b.records(TestRecipe.self).value("r")?.title == "Soup, second try")
            try await a.close()

            try restore(directory, from: backup, how)
            a = try await device(harness, "A")
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            let server = await harness.cloud.records(in: TestRecipe.zone).first { $0.id.name == "r" }
            #expect(server?.fields["title"] == .string("Soup, second try"))
            for device in [a, b] {
                #expect(await device.records(TestRecipe.self).value("r")?.title == "Soup, second try")
                #expect(await device.readingList.entry("x")?.title == "Tides, again")
            }
            try await a.close()
            try await b.close()
        }
    }

    /// A backup taken while the store is open (a Mac's hourly backup, a suspended app's) knows the session
    /// of that run: what the run did after the backup still counts as someone else's once it is restored,
    /// since its mutations are newer than any the restored directory holds.
    ///
    /// With `offlineRunFirst`, the first run after the restore changes things offline and never sends; the
    /// stale delete goes out in a later run, whose first mutation's number has passed those the lost run
    /// made after the backup. The restored directory's first run noted where it began, before its first
    /// mutation: the lost run's versions from there on are still someone else's.
    @Test(arguments: Restore.allCases, [false, true])
    func aBackupTakenWhileTheStoreIsOpenToo(_ how: Restore, offlineRunFirst: Bool) async throws {
        try await SyncHarness.run { harness in
            let directory = harness.directory.appendingPathComponent("A")
            let backup = harness.directory.appendingPathComponent("backup")
            var a = try await harness.device("A") {
                $0.recordTypes = [TestRecipe.self]; $0.durability = .fsync
            }
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup"))
            #expect(try await a.syncNow().isComplete)
            #expect(try await a.records(TestRecipe.self).delete("r"))  // durable, not sent
            try FileManager.default.copyItem(at: directory, to: backup)

            #expect(try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup, second try")))
            #expect(try await a.syncNow().isComplete)
            let b = try await device(harness, "B")
            #expect(try await b.syncNow().isComplete)
            try await a.close()

            try restore(directory, from: backup, how)
            let offline = offlineRunFirst ? ["p", "q", "s", "t"] : []
            if offlineRunFirst {
                // More mutations than the lost run made after the backup, none sent.
                a = try await device(harness, "A", start: false)
                for article in offline { #expect(try await a.readingList.add(article)) }
                try await a.close()
            }
            a = try await device(harness, "A")
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            let server = await harness.cloud.records(in: TestRecipe.zone).first { $0.id.name == "r" }
            #expect(server?.fields["title"] == .string("Soup, second try"))
            #expect(await a.records(TestRecipe.self).value("r")?.title == "Soup, second try")
            #expect(await b.records(TestRecipe.self).value("r")?.title == "Soup, second try")
            #expect(await b.readingList.entries().map(\.articleID).sorted() == offline, "the offline run's are sent")
            try await a.close()
            try await b.close()
        }
    }

    /// What the marks must keep: a delete that meets this device's own save, sent before a restart whose
    /// answer never came, still deletes it (the device saw that version: it wrote it).
    ///
    /// With `offlineRunBetween`, a run that changes other things offline comes between: the save's session
    /// is bounded by where that run began, which its mark is below.
    @Test(arguments: [false, true])
    func aDeleteStillTakesItsOwnUnansweredSaveFromBeforeARestart(offlineRunBetween: Bool) async throws {
        try await SyncHarness.run { harness in
            var a = try await device(harness, "A")
            let b = try await device(harness, "B")
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup"))
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            // The save applied, every answer lost (a retry's conflict too), and no fetch after it: A never
            // learns of that version before it closes.
            await harness.cloud.setFaultPlan(
                .loseResponses(20, .modifyRecords).then(.failNext(20, .fetchDatabaseChanges, with: .networkUnavailable))
            )
            try await a.records(TestRecipe.self).save(TestRecipe(id: "r", title: "Soup, edited"))
            _ = try await a.syncNow()
            await harness.cloud.setFaultPlan(.none)
            let edited = await harness.cloud.records(in: TestRecipe.zone).first { $0.id.name == "r" }
            #expect(edited?.fields["title"] == .string("Soup, edited"), "the save was applied")
            let mark = edited?.lastModifiedBy
            #expect(mark?.hasSuffix("@A") == true && mark?.contains(":") == true, "marked with A's session")
            try await a.close()
            if offlineRunBetween {
                a = try await device(harness, "A", start: false)
                for article in ["p", "q"] { #expect(try await a.readingList.add(article)) }
                try await a.close()
            }

            // Not started, so that nothing fetches before the delete goes out with the tag A last knew: it
            // meets A's own version, and deletes it.
            a = try await device(harness, "A", start: false)
            #expect(try await a.records(TestRecipe.self).delete("r"))
            #expect(try await a.syncNow().isComplete)
            #expect(try await b.syncNow().isComplete)
            #expect(await harness.cloud.records(in: TestRecipe.zone).isEmpty)
            #expect(await b.records(TestRecipe.self).value("r") == nil)
            try await a.close()
            try await b.close()
        }
    }
}

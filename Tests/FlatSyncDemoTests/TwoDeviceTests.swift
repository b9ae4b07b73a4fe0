import FlatSyncTestSupport
import FlatSync
import FlatSyncTesting
import Foundation
import Testing

/// The real `flatsync-demo` binary as two devices (two device directories, two processes per step)
/// against one `DirectoryCloud` directory.
@Suite struct TwoDeviceTests {
    // MARK: - Propagation

    @Test func aSaveOnAReachesBAfterBothSync() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "save", "ecb-holds-rates", "--title", "ECB holds rates")
            #expect(try await world.list("B") == [])
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            #expect(try await world.list("B") == ["ecb-holds-rates"])
            let a = try await world.listRows("A")
            let b = try await world.listRows("B")
            #expect(isoDate(a.first?["dateAdded"]) != nil)
            #expect(a.first?["dateAdded"] as? String == b.first?["dateAdded"] as? String, "B keeps A's dateAdded")
        }
    }

    @Test func anUnsaveOnBRemovesTheEntryFromA() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "save", "kept")
            try await world.ok("A", "save", "removed")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            #expect(Set(try await world.list("B")) == ["kept", "removed"])
            try await world.ok("B", "unsave", "removed")
            try await world.ok("B", "sync")
            try await world.ok("A", "sync")
            #expect(try await world.list("A") == ["kept"])
        }
    }

    @Test func likesAndVisitsReachTheOtherDevicesHistory() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "visit", "read-it", "--version", "3")
            try await world.ok("A", "like", "liked-it")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            let b = try await world.history("B")
            #expect(b["read-it"]?["read"] as? Bool == true)
            #expect(b["read-it"]?["liked"] as? Bool == false)
            #expect(b["liked-it"]?["liked"] as? Bool == true)
            #expect(b["liked-it"]?["read"] as? Bool == false, "liking is not reading")
            // B changes its mind; the later setting wins on A too.
            try await world.ok("B", "dislike", "liked-it")
            try await world.ok("B", "sync")
            try await world.ok("A", "sync")
            let a = try await world.history("A")
            #expect(a["liked-it"]?["liked"] as? Bool == false)
            #expect(a["liked-it"]?["disliked"] as? Bool == true)
        }
    }

    // MARK: - Server-side events

    @Test func expiredTokensKeepTheDataAndAPendingOfflineEdit() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "save", "first")
            try await world.ok("A", "visit", "first")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            // B edits offline (device commands never reach the cloud), then the server forgets every token.
            try await world.ok("B", "save", "offline-edit")
            try await world.ok("B", "like", "first")
            try await world.cloudOK("expire-tokens")
            try await world.ok("A", "save", "after-expiry")
            let a = try await world.sync("A")
            #expect(a.status == 0)
            #expect((a.report["resets"] as? [String] ?? []).contains("ReadingList: tokenExpired"))

            let b = try await world.sync("B")
            #expect(b.status == 0)
            let resets = b.report["resets"] as? [String] ?? []
            #expect(resets.contains("ReadingList: tokenExpired") && resets.contains("ReadingHistory: tokenExpired"))
            #expect(Set(try await world.list("B")) == ["first", "offline-edit", "after-expiry"])
            #expect(
                try await world.history("B")["first"]?["liked"] as? Bool == true, "the pending like survived the reset")

            try await world.ok("A", "sync")
            #expect(Set(try await world.list("A")) == ["first", "offline-edit", "after-expiry"])
            #expect(try await world.history("A")["first"]?["liked"] as? Bool == true)
        }
    }

    @Test func aZoneDeletedByTheUserIsWipedOnTheNextSyncAndStartsAfresh() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "save", "old")
            try await world.ok("A", "visit", "old")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            try await world.cloudOK("delete-zone", "readinglist")

            let b = try await world.sync("B")
            #expect(b.status == 0)
            #expect((b.report["resets"] as? [String] ?? []).contains("ReadingList: deletedByUser"))
            #expect(try await world.list("B") == [])
            #expect(try await world.history("B")["old"] != nil, "only the deleted zone is wiped")
            try await world.ok("A", "sync")
            #expect(try await world.list("A") == [])

            try await world.ok("A", "save", "new")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            #expect(try await world.list("B") == ["new"])
        }
    }

    @Test func devicesConvergeOnceFaultsStop() async throws {
        try await DemoWorld.run { world in
            try await world.cloudOK("faults", "--rate", "0.3", "--seed", "11")
            var saved: [String: Set<String>] = ["A": [], "B": []]
            for round in 0..<4 {
                for device in ["A", "B"] {
                    let id = "\(device.lowercased())-\(round)"
                    // Offline commands are untouched by the cloud's faults.
                    try await world.ok(device, "save", id)
                    try await world.ok(device, "visit", id)
                    saved[device]!.insert(id)
                    if round == 2 {
                        try await world.ok(device, "unsave", "\(device.lowercased())-0")
                        saved[device]!.remove("\(device.lowercased())-0")
                    }
                    let sync = try await world.run(device, "sync")
                    #expect(sync.status == 0 || sync.status == 1, "sync under faults: \(sync)")
                    if sync.status == 1 { #expect(sync.stderr.contains("run `flatsync-demo sync` again")) }
                }
            }
            try await world.cloudOK("faults", "--rate", "0")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            try await world.ok("A", "sync")
            let expected = saved["A"]!.union(saved["B"]!)
            #expect(Set(try await world.list("A")) == expected)
            #expect(Set(try await world.list("B")) == expected)
            let a = try await world.run("A", "history", "--json")
            let b = try await world.run("B", "history", "--json")
            #expect(a.stdout == b.stdout)
            #expect(try await world.history("A").count == 8)
            let pending = try await world.run("A", "pending", "--json")
            #expect(try pendingCounts(pending) == ["commands": 0, "records": 0, "refused": 0])
        }
    }

    // MARK: - Offline, locks, failures

    @Test func deviceCommandsOtherThanSyncNeverTouchTheCloud() async throws {
        try await DemoWorld.run { world in
            for command in [
                ["save", "x"], ["visit", "x"], ["like", "x"], ["dislike", "x"], ["unsave", "x"],
                ["list"], ["history"], ["pending"], ["status"],
            ] {
                let result = try await DemoProcess.run(
                    command + ["--device", world.device("A").path, "--cloud", world.cloud.path])
                #expect(result.status == 0, "\(command): \(result)")
            }
            #expect(!FileManager.default.fileExists(atPath: world.cloud.path), "a DirectoryCloud was opened")
            let pending = try await world.run("A", "pending", "--json")
            #expect(try pendingCounts(pending) == ["commands": 2, "records": 2, "refused": 0])
        }
    }

    @Test func aDeviceInUseByAnotherProcessGetsAClearMessage() async throws {
        try await DemoWorld.run { world in
            let store = try LocalStore(directory: world.device("A"))
            for command in [["list", "--json"], ["save", "x"], ["sync"]] {
                let result = try await DemoProcess.run(
                    command + ["--device", world.device("A").path, "--cloud", world.cloud.path])
                #expect(result.status == 1, "\(command): \(result)")
                #expect(result.stderr.contains("is in use by another process"), "\(result)")
                #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
                #expect(result.stdout.isEmpty)
            }
            try await store.close()
            #expect(try await world.list("A") == [], "the refused save wrote nothing")
        }
    }

    @Test func aSyncThatCannotFinishPrintsItsSummaryThenSaysWhatIsLeft() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "sync")
            try await world.ok("A", "save", "x")
            // Two: `sync` sends from start()'s background push, then again from syncNow().
            try await DirectoryCloud(directory: world.cloud).setFaultPlan(
                .failNext(2, .modifyRecords, with: .networkUnavailable))
            let result = try await world.run("A", "sync", "--json")
            #expect(result.status == 1, "\(result)")
            let report = try result.json() as? [String: Any] ?? [:]
            #expect(report["sent"] as? Int == 0)
            let lines = result.stderr.split(separator: "\n")
            #expect(
                lines.count == 1 && lines[0].contains("1 change still waiting to be sent")
                    && lines[0].contains("run `flatsync-demo sync` again"), "\(result)")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")
            #expect(try await world.list("B") == ["x"])
        }
    }

    @Test func aSyncThatCannotReachTheCloudKeepsThePendingChanges() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "save", "x")
            let cloud = try DirectoryCloud(directory: world.cloud)
            try await cloud.setFaultPlan(.failNext(1_000, with: .networkUnavailable))
            let result = try await world.run("A", "sync")
            #expect(result.status == 1, "\(result)")
            #expect(
                result.stderr.contains("1 change still waiting to be sent")
                    && result.stderr.contains("the network is unavailable")
                    && result.stderr.contains("nothing is lost"),
                "\(result)")
            let pending = try await world.run("A", "pending", "--json")
            #expect(try pendingCounts(pending) == ["commands": 1, "records": 1, "refused": 0])
            // One lost answer is retried within the sync.
            try await cloud.setFaultPlan(.failNext(1, .listZones, with: .networkUnavailable))
            try await world.ok("A", "sync")
            #expect(try pendingCounts(try await world.run("A", "pending", "--json"))["records"] == 0)
        }
    }

    // MARK: - The command line

    @Test(arguments: [
        ["frobnicate"], ["save"], ["visit", "x", "--version", "-1"], ["visit", "x", "--version", "two"],
        ["cloud", "faults", "--rate", "1.5"], ["cloud", "faults", "--rate", "-0.1"], ["cloud", "faults"],
        ["cloud", "delete-zone", "Bookmarks"], ["list", "--bogus"], ["save", ""], ["cloud", "stats", "--device", "d"],
    ])
    func usageErrorsExit2WithTheUsageOnStandardError(arguments: [String]) async throws {
        try await withTemporaryDirectory { directory in
            let result = try await DemoProcess.run(arguments, currentDirectory: directory)
            #expect(result.status == 2, "\(result)")
            #expect(result.stderr.hasPrefix("flatsync-demo: ") && result.stderr.contains("usage:"), "\(result)")
            #expect(result.stdout.isEmpty)
            #expect(
                !FileManager.default.fileExists(atPath: directory.appendingPathComponent(".flatsync").path),
                "nothing was opened")
        }
    }

    @Test func helpForTheToolAndForEachCommand() async throws {
        let tool = try await DemoProcess.run(["--help"])
        #expect(tool.status == 0)
        for command in [
            "save ID", "unsave ID", "visit ID", "like ID", "dislike ID", "list", "history", "pending", "sync",
            "status", "cloud stats", "cloud expire-tokens", "cloud delete-zone ZONE", "cloud faults",
        ] {
            #expect(tool.stdout.contains("  \(command)"), "\(command) is missing from --help")
        }
        let save = try await DemoProcess.run(["save", "--help"])
        #expect(save.status == 0 && save.stdout.hasPrefix("usage: flatsync-demo save ID [--title T]"), "\(save)")
        let faults = try await DemoProcess.run(["cloud", "faults", "-h"])
        #expect(faults.status == 0 && faults.stdout.contains("--rate R"), "\(faults)")
    }

    @Test func theDirectoriesComeFromTheEnvironmentOrDefaultToDotFlatsync() async throws {
        try await withTemporaryDirectory { directory in
            let saved = try await DemoProcess.run(["save", "x"], currentDirectory: directory)
            #expect(saved.status == 0, "\(saved)")
            #expect(
                FileManager.default.fileExists(
                    atPath: directory.appendingPathComponent(".flatsync/device/commands.log").path))
            let synced = try await DemoProcess.run(["sync"], currentDirectory: directory)
            #expect(synced.status == 0, "\(synced)")
            #expect(
                FileManager.default.fileExists(
                    atPath: directory.appendingPathComponent(".flatsync/cloud/cloud-state").path))

            let environment = [
                "FLATSYNC_DEVICE": directory.appendingPathComponent("other").path,
                "FLATSYNC_CLOUD": directory.appendingPathComponent(".flatsync/cloud").path,
            ]
            let other = try await DemoProcess.run(["sync"], environment: environment, currentDirectory: directory)
            #expect(other.status == 0, "\(other)")
            let list = try await DemoProcess.run(["list", "--json"], environment: environment)
            #expect(try list.json() as? [[String: String]] != nil)
            #expect((try list.json() as? [[String: Any]])?.map { $0["articleID"] as? String } == ["x"])
        }
    }
}

/// `pending --json` as counts: commands, records, and how many of them were refused.
private func pendingCounts(_ result: DemoProcess.Result) throws -> [String: Int] {
    let object = try result.json() as? [String: Any] ?? [:]
    return [
        "commands": object["commands"] as? Int ?? -1, "records": object["records"] as? Int ?? -1,
        "refused": (object["refused"] as? [Any])?.count ?? -1,
    ]
}

import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// Every directory FlatSync creates — the device directory and its missing parents, the cloud directory —
/// is durable before anything in it is acknowledged: after each `mkdir` the parent is flushed. Shown on a
/// simulated disk, by the calls it sees and by what a power loss right after the acknowledgement leaves.
@Suite struct DirectoryDurabilityTests {
    /// The calls that changed the disk, in order, as text.
    private func changes(_ disk: SimulatedDisk) -> [String] {
        disk.crashPoints.dropFirst().map(\.lastCall)
    }

    /// Every `mkdir` is followed by a flush of its parent before anything is created inside the new directory.
    private func expectEachMkdirFlushedBeforeUse(_ calls: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        for (index, call) in calls.enumerated() where call.hasPrefix("mkdir ") {
            let directory = String(call.dropFirst("mkdir ".count))
            let parent = FileSystem.parent(of: directory)
            let rest = calls[(index + 1)...]
            let flushed = rest.firstIndex(of: "fsync directory \(parent)")
            let firstUse = rest.firstIndex { $0.contains(directory + "/") }
            #expect(flushed != nil, "\(call) is never followed by a flush of \(parent)", sourceLocation: sourceLocation)
            if let flushed, let firstUse {
                #expect(
                    flushed < firstUse, "\(directory) is used before its entry is durable",
                    sourceLocation: sourceLocation)
            }
        }
    }

    @Test func theDeviceDirectoryAndItsMissingParentsAreDurableBeforeTheFirstAcknowledgement() async throws {
        let disk = SimulatedDisk()
        disk.recordsCrashPoints = true
        var options = testOptions()
        options.fileSystem = FileSystem(disk)
        let directory = URL(fileURLWithPath: "/devices/a/b")
        let store = try LocalStore(directory: directory, options: options)
        try await store.readingList.add("acknowledged")

        let calls = changes(disk)
        #expect(calls.filter { $0.hasPrefix("mkdir") } == ["mkdir /devices", "mkdir /devices/a", "mkdir /devices/a/b"])
        expectEachMkdirFlushedBeforeUse(calls)

        // A power loss now keeps only what was flushed: the directories and the acknowledged save are there.
        let afterPowerLoss = SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)
        await store.abandon()
        #expect(afterPowerLoss.names(in: "/devices/a/b").contains("commands.log"))
        var reopenOptions = testOptions()
        reopenOptions.fileSystem = FileSystem(afterPowerLoss)
        let reopened = try LocalStore(directory: directory, options: reopenOptions)
        #expect(await reopened.readingList.contains("acknowledged"))
        try await reopened.close()
    }

    /// `mkdir -p` (or a process that died right after its `mkdir`) leaves entries nobody flushed; the first
    /// open of such a directory flushes every parent, so the store does not vanish with them.
    @Test func aDirectoryMadeByOthersHasItsParentsFlushedOnFirstOpen() async throws {
        let disk = SimulatedDisk()
        _ = disk.makeDirectory("/made", permissions: 0o700)
        _ = disk.makeDirectory("/made/by", permissions: 0o700)
        _ = disk.makeDirectory("/made/by/hand", permissions: 0o700)
        var options = testOptions()
        options.fileSystem = FileSystem(disk)
        let directory = URL(fileURLWithPath: "/made/by/hand")
        let store = try LocalStore(directory: directory, options: options)
        try await store.readingList.add("acknowledged")
        let afterPowerLoss = SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)
        await store.abandon()
        options.fileSystem = FileSystem(afterPowerLoss)
        let reopened = try LocalStore(directory: directory, options: options)
        #expect(await reopened.readingList.contains("acknowledged"))
        try await reopened.close()
    }

    @Test func theCloudDirectoryIsDurableBeforeItsFirstRequestIsAnswered() async throws {
        let disk = SimulatedDisk()
        disk.recordsCrashPoints = true
        let directory = URL(fileURLWithPath: "/clouds/shared/cloud")
        let cloud = try DirectoryCloud(directory: directory, fileSystem: FileSystem(disk))
        try await cloud.createZones(ZoneID.builtIn)

        let calls = changes(disk)
        #expect(calls.filter { $0.hasPrefix("mkdir") }.count == 3)
        expectEachMkdirFlushedBeforeUse(calls)
        let afterPowerLoss = SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)
        let reopened = try DirectoryCloud(directory: directory, fileSystem: FileSystem(afterPowerLoss))
        #expect(Set(try await reopened.listZones()) == Set(ZoneID.builtIn))
    }

    /// A damaged file moved aside stays moved aside: the rename is flushed with its directory.
    @Test func aQuarantineIsDurable() async throws {
        let disk = SimulatedDisk()
        var options = testOptions()
        options.fileSystem = FileSystem(disk)
        let directory = URL(fileURLWithPath: "/device")
        let store = try LocalStore(directory: directory, options: options)
        try await store.readingList.add("a")
        try await store.close()
        disk.setContents(of: "/device/reading-list.plist", to: Array("not a snapshot".utf8))
        disk.recordsCrashPoints = true

        let reopened = try LocalStore(directory: directory, options: options)
        await reopened.abandon()
        let renames = changes(disk).filter { $0.hasPrefix("rename /device/reading-list.plist ") }
        #expect(renames.count == 1)
        let afterPowerLoss = SimulatedDisk.crashImage(of: disk.model, damage: .flushedOnly)
        let names = afterPowerLoss.names(in: "/device")
        #expect(names.contains { Quarantine.isQuarantined($0) && $0.hasPrefix("reading-list.plist") })
        #expect(afterPowerLoss.contents(of: "/device/reading-list.plist") != Array("not a snapshot".utf8))
    }
}

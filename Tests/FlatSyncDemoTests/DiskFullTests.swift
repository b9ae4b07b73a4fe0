import FlatSync
import FlatSyncTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real full disk: a small tmpfs, mounted for the test (which needs root; it is skipped otherwise, with
/// the reason printed) and always unmounted, even when the test fails.
///
/// The demo's `save` fails with a clear message and exit 1, nothing saved before is lost, a snapshot or a
/// compaction that fails leaves the old files as they were, and everything works again — in the same open
/// store too — once there is space.
@Suite(.serialized) struct DiskFullTests {
    /// Why a tmpfs cannot be mounted here, or nil when it can.
    static let unavailable: String? = {
        #if os(Linux)
            guard geteuid() == 0 else { return "not running as root" }
            do {
                try SmallFileSystem.with(size: "64k") { _ in }
                return nil
            } catch {
                return "mount -t tmpfs does not work here: \(error)"
            }
        #else
            return "tmpfs is Linux only"
        #endif
    }()

    static var available: Bool {
        if let unavailable { print("DiskFullTests skipped: \(unavailable)") }
        return unavailable == nil
    }

    /// A title long enough that the log entry of a save needs a fresh page of the file.
    static let longTitle = String(repeating: "The disk is full. ", count: 400)

    @Test(.enabled(if: available, "needs root and tmpfs"))
    func theDemosSaveFailsClearlyOnAFullDiskAndWorksAgainOnceThereIsSpace() async throws {
        try await SmallFileSystem.with(size: "1m") { mount in
            let device = mount.appendingPathComponent("device").path
            let cloud = mount.appendingPathComponent("cloud").path
            func demo(_ arguments: String...) async throws -> DemoProcess.Result {
                try await DemoProcess.run(arguments + ["--device", device, "--cloud", cloud])
            }
            for id in ["before-1", "before-2", "before-3"] {
                let saved = try await demo("save", id)
                #expect(saved.status == 0, "\(saved)")
            }

            let filler = try SmallFileSystem.fill(mount)
            let failed = try await demo("save", "while-full", "--title", Self.longTitle)
            #expect(failed.status == 1, "\(failed)")
            #expect(failed.stderr.contains("save failed: the disk is full"), "\(failed.stderr)")
            #expect(failed.stderr.contains("No space left on device"), "\(failed.stderr)")
            #expect(failed.stderr.contains("free some space and try again"), "\(failed.stderr)")
            #expect(failed.stderr.split(separator: "\n").count == 1, "one line: \(failed.stderr)")

            // Reading still works on the full disk, and shows everything saved before.
            let listed = try await demo("list", "--json")
            #expect(listed.status == 0, "\(listed)")
            let ids = try (listed.json() as? [[String: Any]])?.compactMap { $0["articleID"] as? String } ?? []
            #expect(Set(ids) == ["before-1", "before-2", "before-3"])

            try FileManager.default.removeItem(at: filler)
            let again = try await demo("save", "after", "--title", Self.longTitle)
            #expect(again.status == 0, "\(again)")
            let after = try await demo("list", "--json")
            let all = try (after.json() as? [[String: Any]])?.compactMap { $0["articleID"] as? String } ?? []
            #expect(Set(all) == ["before-1", "before-2", "before-3", "after"])
            #expect(try fileNames(in: URL(fileURLWithPath: device)).allSatisfy { !$0.hasPrefix(".tmp-") })
        }
    }

    @Test(.enabled(if: available, "needs root and tmpfs"))
    func aFailedSnapshotOrCompactionLeavesTheOldFilesAndTheStoreWorksOnOnceThereIsSpace() async throws {
        try await SmallFileSystem.with(size: "1m") { mount in
            let directory = mount.appendingPathComponent("device")
            let store = try LocalStore(
                directory: directory, options: LocalStore.Options(deviceID: "disk-full", snapshotDelay: .seconds(3_600))
            )
            for index in 0..<20 { try await store.readingList.add("kept-\(index)") }
            for zone in ZoneID.builtIn { try await store.persistSnapshot(of: zone) }
            try await store.readingList.add("in the log only")
            let snapshot = directory.appendingPathComponent("reading-list.plist")
            let log = directory.appendingPathComponent("commands.log")
            let snapshotBefore = try Data(contentsOf: snapshot)
            let logBefore = try Data(contentsOf: log)

            let filler = try SmallFileSystem.fill(mount)
            let snapshotError = await #expect(throws: FlatSyncError.self) {
                try await store.persistSnapshot(of: .readingList)
            }
            #expect((snapshotError?.cause as? POSIXError)?.code == .ENOSPC, "\(String(describing: snapshotError))")
            #expect(try Data(contentsOf: snapshot) == snapshotBefore, "the old snapshot is intact")
            let compactionError = await #expect(throws: FlatSyncError.self) { try await store.compact() }
            #expect((compactionError?.cause as? POSIXError)?.code == .ENOSPC)
            #expect(try Data(contentsOf: log) == logBefore, "the old log is intact")
            #expect(try fileNames(in: directory).allSatisfy { !$0.hasPrefix(".tmp-") }, "no temporary file left")
            await #expect(throws: FlatSyncError.self) {
                try await store.readingList.add("refused", title: Self.longTitle)
            }
            #expect(await store.readingList.contains("refused") == false)

            // Space again: the same store works on without being reopened.
            try FileManager.default.removeItem(at: filler)
            try await store.readingList.add("after", title: Self.longTitle)
            try await store.persistSnapshot(of: .readingList)
            try await store.compact()
            try await store.close()
            let reopened = try LocalStore(directory: directory, options: LocalStore.Options(deviceID: "disk-full"))
            let ids = Set(await reopened.readingList.entries().map(\.articleID))
            #expect(ids == Set((0..<20).map { "kept-\($0)" } + ["in the log only", "after"]))
            #expect(reopened.eventHub.keptEvents.isEmpty, "nothing was damaged")
            try await reopened.close()
        }
    }
}

/// A tmpfs of a given size, mounted on a fresh directory for the length of a closure.
enum SmallFileSystem {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Mounts a tmpfs of `size` (`mount -o size=`), runs `body` with its mount point, then unmounts it and
    /// removes the mount point — also when `body` throws (lazily, if something still holds it open).
    static func with<T>(size: String, _ body: (URL) async throws -> T) async throws -> T {
        let mount = try mountPoint(size: size)
        defer { unmount(mount) }
        return try await body(mount)
    }

    static func with<T>(size: String, _ body: (URL) throws -> T) throws -> T {
        let mount = try mountPoint(size: size)
        defer { unmount(mount) }
        return try body(mount)
    }

    private static func mountPoint(size: String) throws -> URL {
        let mount = FileManager.default.temporaryDirectory.appendingPathComponent(
            "FlatSyncDiskFull-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
        do {
            try run("/bin/mount", "-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", mount.path)
        } catch {
            try? FileManager.default.removeItem(at: mount)
            throw error
        }
        return mount
    }

    private static func unmount(_ mount: URL) {
        if (try? run("/bin/umount", mount.path)) == nil {
            _ = try? run("/bin/umount", "-l", mount.path)
        }
        try? FileManager.default.removeItem(at: mount)
    }

    /// Fills the file system at `mount` to the last byte with one file, and returns that file.
    static func fill(_ mount: URL) throws -> URL {
        let url = mount.appendingPathComponent("filler")
        let fd = open(url.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw Failure(description: "open \(url.path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        for chunk in [1 << 16, 4096, 1] {
            let bytes = [UInt8](repeating: 0x46, count: chunk)
            while bytes.withUnsafeBytes({ write(fd, $0.baseAddress, chunk) }) == chunk {}
        }
        return url
    }

    @discardableResult
    private static func run(_ executable: String, _ arguments: String...) throws -> String {
        let process = try SpawnedProcess(
            URL(fileURLWithPath: executable), arguments: arguments, output: .pipe, error: .sameAsOutput)
        let text = String(decoding: (try process.standardOutput!.readToEnd()) ?? Data(), as: UTF8.self)
        guard process.waitUntilExit().status == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")): \(text)")
        }
        return text
    }
}

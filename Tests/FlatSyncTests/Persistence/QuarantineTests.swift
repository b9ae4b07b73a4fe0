import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

@Suite struct QuarantineTests {
    /// 2026-11-22 04:57:34 UTC.
    static let date = Date(timeIntervalSince1970: 1_795_323_454)

    @Test func formatsTheTimestampInUTC() {
        #expect(Quarantine.timestamp(Self.date) == "20261122T045734Z")
        #expect(Quarantine.timestamp(Date(timeIntervalSince1970: 0.999)) == "19700101T000000Z")
    }

    @Test func movesTheFileAsideAndAddsSuffixesOnCollision() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            var moved: [URL] = []
            for content in ["first", "second", "third"] {
                try Data(content.utf8).write(to: url)
                moved.append(try Quarantine.moveAside(url, now: Self.date))
            }
            #expect(
                moved.map(\.lastPathComponent) == [
                    "commands.log.corrupt-20261122T045734Z",
                    "commands.log.corrupt-20261122T045734Z-2",
                    "commands.log.corrupt-20261122T045734Z-3",
                ])
            #expect(
                try moved.map { String(decoding: try Data(contentsOf: $0), as: UTF8.self) } == [
                    "first", "second", "third",
                ])
            #expect(moved.allSatisfy { $0.deletingLastPathComponent().path == directory.path })
            #expect(!FileManager.default.fileExists(atPath: url.path))
            #expect(try fileNames(in: directory).count == 3)
        }
    }

    /// When whether a quarantine name is taken cannot be told, neither way of keeping a damaged file goes
    /// ahead: taken for free, the name could be an earlier damaged file's, which it would replace.
    @Test(arguments: [true, false])
    func aNameThatCannotBeCheckedIsNotTakenForFree(moving: Bool) throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            try Data("first".utf8).write(to: url)
            let earlier = try Quarantine.moveAside(url, now: Self.date)
            try Data("second".utf8).write(to: url)
            let faulty = FaultyFileSystem()
            faulty.failNext(.itemKind, with: .ioError, pathSuffix: earlier.lastPathComponent)
            let fileSystem = FileSystem(faulty)
            #expect {
                if moving {
                    try Quarantine.moveAside(url, now: Self.date, fileSystem: fileSystem)
                } else {
                    try Quarantine.keepCopy(of: url, now: Self.date, fileSystem: fileSystem)
                }
            } throws: { ($0 as? FlatSyncError)?.code == .ioFailed }
            #expect(faulty.injections.count == 1)
            #expect(String(decoding: try Data(contentsOf: earlier), as: UTF8.self) == "first")
            #expect(String(decoding: try Data(contentsOf: url), as: UTF8.self) == "second")
            #expect(try fileNames(in: directory).count == 2)
        }
    }

    @Test func keepingACopyLeavesTheOriginalInPlaceWithTheSameBytes() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("commands.log")
            try Data("damaged".utf8).write(to: url)
            let first = try Quarantine.keepCopy(of: url, now: Self.date)
            let second = try Quarantine.keepCopy(of: url, now: Self.date)
            #expect(first.lastPathComponent == "commands.log.corrupt-20261122T045734Z")
            #expect(second.lastPathComponent == "commands.log.corrupt-20261122T045734Z-2")
            #expect(try Data(contentsOf: url) == Data("damaged".utf8))
            #expect(try Data(contentsOf: first) == Data("damaged".utf8))

            // Replacing the original (as a repair does, by rename) leaves the copy as it was.
            try DurableFileWriter().write(Data("repaired".utf8), to: url)
            #expect(try Data(contentsOf: first) == Data("damaged".utf8))
            #expect(try Data(contentsOf: url) == Data("repaired".utf8))
            #expect(try fileNames(in: directory).count == 3)
        }
    }

    @Test func keepingACopyOfAMissingFileFailsAndWritesNothing() throws {
        try withTemporaryDirectory { directory throws in
            let error = #expect(throws: FlatSyncError.self) {
                try Quarantine.keepCopy(of: directory.appendingPathComponent("missing"), now: Self.date)
            }
            #expect(error?.code == .ioFailed)
            #expect(try fileNames(in: directory).isEmpty)
        }
    }

    @Test func movingAMissingFileFails() throws {
        try withTemporaryDirectory { directory throws in
            let error = #expect(throws: FlatSyncError.self) {
                try Quarantine.moveAside(directory.appendingPathComponent("missing"), now: Self.date)
            }
            #expect(error?.code == .ioFailed)
            #expect(try fileNames(in: directory).isEmpty)
        }
    }

    @Test(arguments: [
        ("commands.log.corrupt-20261122T045734Z", true),
        ("commands.log.corrupt-20261122T045734Z-2", true),
        ("reading-list.plist.corrupt-19991231T235959Z-17", true),
        ("commands.log", false),
        ("commands.log.corrupt-", false),
        ("commands.log.corrupt-2026112", false),
        ("commands.log.corrupt-20261122X045734Z", false),
        ("commands.log.corrupt-20261122T045734Zx", false),
        ("commands.log.corrupt-20261122T045734Z-", false),
        ("commands.log.corrupt-20261122T045734Z-2a", false),
        (".corrupt-20261122T045734Z", false),
    ])
    func recognisesQuarantinedNames(name: String, quarantined: Bool) {
        #expect(Quarantine.isQuarantined(name) == quarantined)
    }
}

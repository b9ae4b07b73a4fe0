import FlatSyncTestSupport
import Foundation
import Testing

@testable import FlatSync

/// The rule that tells this device's own versions from others' (``OwnWrites``), and the bounds the sessions
/// file gives it, without a disk.
@Suite struct OwnWritesTests {
    private func version(marked mark: String?) -> Record {
        Record(id: RecordID(zone: ZoneID("Recipes"), name: "r"), type: "Recipe", lastModifiedBy: mark)
    }

    @Test func aRememberedSessionCountsBelowItsBoundOnly() {
        let own = OwnWrites(deviceID: "A", sessions: ["5e": 10], currentSession: "c0")
        #expect(own.wrote(version(marked: "5e:9@A")))
        #expect(!own.wrote(version(marked: "5e:10@A")), "from the next session's start on, not this directory's")
        #expect(own.wrote(version(marked: "c0:99@A")), "this run's, whatever its number")
        #expect(!own.wrote(version(marked: "77:1@A")), "a session the directory does not remember")
        #expect(!own.wrote(version(marked: "5e:9@B")), "another device's")
        #expect(own.wrote(version(marked: "A")), "marked with the device ID alone, before sessions")
        #expect(!own.wrote(version(marked: nil)))
        #expect(!own.wrote(version(marked: "5e:x@A")), "a damaged mark")
    }

    @Test func eachSessionIsBoundedByWhereTheNextBegan() {
        let lines: [LocalStore.WriterSessionLine] = [
            .init(session: "a", firstSequence: 1), .init(session: "b", firstSequence: 40),
            .init(session: "c", firstSequence: 55),
        ]
        #expect(LocalStore.bounds(of: lines, firstSequenceOfRun: 70) == ["a": 40, "b": 55, "c": 70])
    }

    /// Lines written before the file held numbers take the bound of the next line that has one; numbers out
    /// of order (a damaged file) bound by the smaller, so that fewer versions count as own.
    @Test func linesWithoutNumbersOrOutOfOrderBoundConservatively() {
        let lines: [LocalStore.WriterSessionLine] = [
            .init(session: "old1", firstSequence: nil), .init(session: "old2", firstSequence: nil),
            .init(session: "x", firstSequence: 30), .init(session: "y", firstSequence: 20),
        ]
        #expect(
            LocalStore.bounds(of: lines, firstSequenceOfRun: 50)
                == ["old1": 20, "old2": 20, "x": 20, "y": 50])
        #expect(LocalStore.bounds(of: [.init(session: "old", firstSequence: nil)], firstSequenceOfRun: 9) == ["old": 9])
    }

    /// A line is a session of up to 16 hex digits, alone (an earlier FlatSync's) or with its run's first
    /// mutation after one space; anything else is left out, never a crash.
    @Test func damagedLinesAreLeftOut() {
        let text = "ab 7\nab\nabc \na b c\n 5\nzz 1\nab 99999999999999999999\nab 1\r\n\n0123456789abcdef0 1\nfF 3"
        #expect(
            LocalStore.writerSessionLines(in: Data(text.utf8)) == [
                .init(session: "ab", firstSequence: 7), .init(session: "ab", firstSequence: nil),
                .init(session: "fF", firstSequence: 3),
            ])
    }

    /// A save in flight sends the record as it is now, which may hold a mutation made after the change it
    /// sends (the user read the article again meanwhile): its mark names the newest mutation made, so the
    /// version never passes for older than what it holds.
    @Test func aSaveIsMarkedWithTheNewestMutationNotItsChanges() async throws {
        try await withTemporaryDirectory { directory in
            let store = try LocalStore(directory: directory, options: testOptions())
            try await store.history.visit("x")
            let sealed = try await store.sealPendingCommands(in: .readingHistory)
            try await store.history.visit("x")  // a newer mutation, in a command of its own
            let changes = sealed.flatMap { Array($0.changes.values) }
            #expect(changes.map(\.sequence) == [1])
            let saves = try await store.request(for: changes).saves
            #expect(saves.map { try? ReadingHistoryItem(record: $0.record).readCount } == [2])
            #expect(saves.first?.record.lastModifiedBy?.contains(":2@test-device") == true)
            try await store.close()
        }
    }

    /// The file as written: a run that only changes things (never sends) notes its session, with its first
    /// mutation's number, before the first is logged; a line of the old form and a damaged line are read as
    /// such.
    @Test func aRunNotesItsSessionBeforeItsFirstMutation() async throws {
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("writer-sessions")
            var store = try LocalStore(directory: directory, options: testOptions())
            #expect(!FileManager.default.fileExists(atPath: file.path), "opening writes nothing")
            try await store.readingList.add("x")
            let first = try String(contentsOf: file, encoding: .utf8)
            let parts = first.split(separator: " ")
            #expect(parts.count == 2 && parts[1] == "1\n", "the run's first mutation is number 1: \(first)")
            try await store.readingList.add("y")
            #expect(try String(contentsOf: file, encoding: .utf8) == first, "one line per run")
            try await store.close()

            try Data(("0dd\nnot a session\n" + first).utf8).write(to: file)
            store = try LocalStore(directory: directory, options: testOptions())
            try await store.readingList.add("z")
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 3 && lines[0] == "0dd" && "\(lines[1])\n" == first)
            #expect(lines[2].hasSuffix(" 3"))
            let own = await store.ownWrites()
            #expect(own.sessions["0dd"] == 1, "bounded by where the next line's run began")
            #expect(own.sessions[String(parts[0])] == 3)
            try await store.close()
        }
    }
}

import FlatSyncTestSupport
import Foundation
import Testing

/// `note` and `notes`: the demo's own record type, synced by the host-store API between two devices (two
/// processes per step) over a `DirectoryCloud`.
@Suite struct NoteDemoTests {
    private func notes(_ world: DemoWorld, _ device: String, _ articleID: String? = nil) async throws -> [[String: Any]]
    {
        let result =
            if let articleID { try await world.run(device, "notes", articleID, "--json") } else {
                try await world.run(device, "notes", "--json")
            }
        #expect(result.status == 0, "notes on \(device): \(result)")
        return try result.json() as? [[String: Any]] ?? []
    }

    @Test func aNoteReachesTheOtherDeviceAndGoesWhenItsArticleIsUnsaved() async throws {
        try await DemoWorld.run { world in
            try await world.ok("A", "save", "tides")
            try await world.ok("A", "save", "rates")
            let added = try await world.ok("A", "note", "tides", "Read with tea", "--json")
            let row = try #require(try added.json() as? [String: Any])
            #expect(Set(row.keys) == ["noteID", "articleID", "text", "created"])
            #expect(row["articleID"] as? String == "tides")
            #expect(isoDate(row["created"]) != nil)
            try await world.ok("A", "note", "rates", "Check the source")
            try await world.ok("A", "sync")
            try await world.ok("B", "sync")

            let onB = try await notes(world, "B")
            #expect(onB.map { $0["text"] as? String } == ["Read with tea", "Check the source"])
            #expect(try await notes(world, "B", "tides").map { $0["noteID"] as? String } == [row["noteID"] as? String])
            #expect(try await world.list("B").sorted() == ["rates", "tides"], "a note is not an entry")

            try await world.ok("B", "unsave", "tides")
            #expect(try await notes(world, "B").map { $0["articleID"] as? String } == ["rates"], "at once on B")
            try await world.ok("B", "sync")
            try await world.ok("A", "sync")
            #expect(try await notes(world, "A").map { $0["articleID"] as? String } == ["rates"], "and on A")
            #expect(try await world.list("A") == ["rates"])
        }
    }

    @Test func aNoteNeedsASavedArticleAndText() async throws {
        try await DemoWorld.run { world in
            let unsaved = try await world.run("A", "note", "nowhere", "text")
            #expect(unsaved.status == 1)
            #expect(unsaved.stderr.contains("nowhere is not on the reading list"))
            let empty = try await world.run("A", "note", "x", "")
            #expect(empty.status == 2, "a usage error")
            let missing = try await world.run("A", "note", "x")
            #expect(missing.status == 2)
            #expect(try await notes(world, "A").isEmpty)
            #expect(try await world.run("A", "notes", "x", "y").status == 2, "one article at most")
        }
    }
}

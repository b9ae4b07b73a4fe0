import Foundation
import Testing

/// Every `--json` output is exactly one JSON value with the keys and types its command's help gives
/// (Sources/flatsync-demo/CommandTable.swift).
@Suite struct JSONOutputTests {
    @Test func everyJSONOutputHasTheShapeOfTheContract() async throws {
        try await DemoWorld.run { world in
            let mutation = try await world.run("A", "save", "x", "--title", "X", "--json")
            #expect(
                shape(of: try mutation.json() as? [String: Any] ?? [:]) == ["articleID": .string, "changed": .bool])
            try await world.ok("A", "visit", "x", "--version", "2")
            try await world.ok("A", "like", "liked-only")

            let list = try await world.run("A", "list", "--json")
            let rows = try list.json() as? [[String: Any]] ?? []
            #expect(rows.count == 1)
            for row in rows { #expect(shape(of: row) == ["articleID": .string, "dateAdded": .string]) }
            #expect(isoDate(rows.first?["dateAdded"]) != nil)

            let history = try await world.run("A", "history", "--json")
            let items = try history.json() as? [[String: Any]] ?? []
            #expect(items.count == 2)
            for item in items {
                #expect(
                    shape(of: item) == [
                        "articleID": .string, "lastVisited": .string, "read": .bool, "liked": .bool, "disliked": .bool,
                    ])
                #expect(isoDate(item["lastVisited"]) != nil, "an item only liked falls back to firstSeen")
            }

            let pending = try await world.run("A", "pending", "--json")
            #expect(
                shape(of: try pending.json() as? [String: Any] ?? [:])
                    == ["commands": .int, "records": .int, "refused": .array])

            let sync = try await world.run("A", "sync", "--json")
            #expect(sync.status == 0)
            #expect(
                shape(of: try sync.json() as? [String: Any] ?? [:]) == [
                    "sent": .int, "fetched": .int, "deleted": .int, "resets": .array, "refused": .array,
                ])
            #expect((try sync.json() as? [String: Any])?["sent"] as? Int == 3)

            let stats = try await world.cloudCommand("stats", "--json")
            let counters = try stats.json() as? [String: Any] ?? [:]
            #expect(
                shape(of: counters) == [
                    "requests": .int, "modifyRequests": .int, "recordsSaved": .int, "recordsDeleted": .int,
                ])
            #expect(counters["recordsSaved"] as? Int == 3)

            let status = try await world.run("A", "status", "--json")
            #expect(
                shape(of: try status.json() as? [String: Any] ?? [:])
                    == [
                        "deviceID": .string, "readingList": .int, "history": .int, "pendingCommands": .int,
                        "pendingRecords": .int, "refusedRecords": .int,
                    ])
            for command in [
                ["expire-tokens"], ["delete-zone", "ReadingHistory"], ["faults", "--rate", "0.5", "--seed", "3"],
                ["faults", "--rate", "0"],
            ] {
                let result = try await DemoProcess.run(["cloud"] + command + ["--cloud", world.cloud.path, "--json"])
                #expect(result.status == 0, "\(result)")
                #expect((try result.json() as? [String: Any])?["done"] is String)
            }
        }
    }

    @Test func listIsNewestFirstAndHistoryMostRecentFirst() async throws {
        try await DemoWorld.run { world in
            for id in ["one", "two", "three"] {
                try await world.ok("A", "save", id)
                try await world.ok("A", "visit", id)
            }
            #expect(try await world.list("A") == ["three", "two", "one"])
            let history = try await world.run("A", "history", "--json")
            let ids = (try history.json() as? [[String: Any]] ?? []).map { $0["articleID"] as? String }
            #expect(ids == ["three", "two", "one"])
        }
    }
}

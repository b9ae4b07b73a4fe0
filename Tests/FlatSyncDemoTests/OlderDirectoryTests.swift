import FlatSyncTestSupport
import Foundation
import Testing

/// A device directory written by an older build opens unchanged: the same entries, history, notes and
/// pending changes as that build showed, and its pending changes reach another device.
@Suite struct OlderDirectoryTests {
    /// Written at 82688fb, before the built-in stores went through the host stores' protocols (see the
    /// fixture's README).
    private static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/directory-82688fb", isDirectory: true)

    /// `text` as JSON, written again with sorted keys: two outputs compare by value, not by spelling.
    private static func canonical(_ text: String) throws -> String {
        let value = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
        return String(decoding: data, as: UTF8.self)
    }

    private static func expected(_ name: String) throws -> String {
        try canonical(String(contentsOf: fixture.appendingPathComponent("expected/\(name).json"), encoding: .utf8))
    }

    @Test func aDirectoryFromBeforeOneEngineOpensAndSyncsUnchanged() async throws {
        try await DemoWorld.run { world in
            let files = FileManager.default
            try files.copyItem(at: Self.fixture.appendingPathComponent("device"), to: world.device("A"))
            try files.copyItem(at: Self.fixture.appendingPathComponent("cloud"), to: world.cloud)

            for command in ["list", "history", "notes", "pending"] {
                let result = try await world.ok("A", command, "--json")
                #expect(try Self.canonical(result.stdout) == Self.expected(command), "\(command)")
            }
            // The old log's pending changes go out, and a second device gets what that build's did.
            try await world.ok("A", "sync")
            let pending = try await world.ok("A", "pending", "--json")
            #expect(try Self.canonical(pending.stdout).contains("\"records\":0"), "\(pending)")
            try await world.ok("B", "sync")
            for command in ["list", "history", "notes"] {
                let result = try await world.ok("B", command, "--json")
                #expect(try Self.canonical(result.stdout) == Self.expected("synced-\(command)"), "\(command) on B")
            }
        }
    }
}

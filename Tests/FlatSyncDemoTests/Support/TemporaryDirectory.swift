import Foundation

/// A fresh, empty directory for one test, removed when the test's body returns or throws.
func withTemporaryDirectory<Result>(_ body: (URL) async throws -> Result) async throws -> Result {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("FlatSyncDemoTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    // Resolve symbolic links (/var → /private/var on Darwin) so paths compare equal to what the demo prints.
    return try await body(directory.resolvingSymlinksInPath())
}

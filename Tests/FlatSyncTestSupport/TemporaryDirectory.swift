import Foundation

/// A fresh, empty directory for one test, removed when the test's body returns or throws.
///
/// ```swift
/// @Test func writes() async throws {
///     try await withTemporaryDirectory { directory in … }
/// }
/// ```
public func withTemporaryDirectory<Result>(
    _ body: (URL) async throws -> Result
) async throws -> Result {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// The synchronous form of ``withTemporaryDirectory(_:)``.
public func withTemporaryDirectory<Result>(_ body: (URL) throws -> Result) throws -> Result {
    let directory = try makeTemporaryDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    return try body(directory)
}

private func makeTemporaryDirectory() throws -> URL {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("FlatSyncTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    // Resolve symbolic links (/var → /private/var on Darwin) so paths compare equal to what the code reports.
    return directory.resolvingSymlinksInPath()
}

/// The names of the files in `directory`, sorted.
public func fileNames(in directory: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
}

/// The permission bits of the file at `url`, or nil when it cannot be examined.
public func permissions(of url: URL) -> Int? {
    guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
        let mode = attributes[.posixPermissions] as? NSNumber
    else { return nil }
    return mode.intValue & 0o777
}

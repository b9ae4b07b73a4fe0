import Foundation

/// Finds an executable of this package (`flatsync-test-child`, `flatsync-demo`) in the build products
/// directory that holds the test runner, so tests can start the real binaries.
///
/// On Linux `CommandLine.arguments[0]` is `.build/<triple>/debug/<Package>PackageTests.xctest`; on Darwin
/// the `.xctest` bundle is a directory inside the products directory, and the runner may be
/// `swiftpm-testing-helper`, given the bundle with `--test-bundle-path`. So the search walks up from each
/// of those places. An environment variable can name the executable instead.
public enum BuildProduct {
    /// The executable `name`, or the path in the environment variable `override` when it is set.
    public static func url(named name: String, override: String? = nil) throws -> URL {
        if let override, let path = ProcessInfo.processInfo.environment[override] {
            return URL(fileURLWithPath: path)
        }
        var starts = [URL(fileURLWithPath: CommandLine.arguments[0])]
        if let index = CommandLine.arguments.firstIndex(of: "--test-bundle-path"),
            index + 1 < CommandLine.arguments.count
        {
            starts.append(URL(fileURLWithPath: CommandLine.arguments[index + 1]))
        }
        if let executable = Bundle.main.executableURL { starts.append(executable) }
        starts.append(contentsOf: Bundle.allBundles.map(\.bundleURL))
        for start in starts {
            var directory = start.resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<6 {
                let candidate = directory.appendingPathComponent(name)
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory),
                    !isDirectory.boolValue, FileManager.default.isExecutableFile(atPath: candidate.path)
                {
                    return candidate
                }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        let hint = override.map { "; set \($0)" } ?? ""
        throw CocoaError(
            .fileNoSuchFile,
            userInfo: [NSLocalizedDescriptionKey: "\(name) not found near \(starts.map(\.path))\(hint)"]
        )
    }
}

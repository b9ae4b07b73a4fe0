import Foundation

/// A documentation sample that a test compiles and runs: the lines of the test's own file between
/// `// NAME begins` and `// NAME ends`, which the articles must show verbatim as a Swift code block.
///
/// ```swift
/// let sample = try DocumentationSample("Getting started sample", in: #filePath)
/// #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/GettingStarted.md"))
/// ```
public struct DocumentationSample: Sendable {
    /// The sample's text, as the articles show it (a line per line, each ending in a newline).
    public let text: String
    private let packageRoot: URL

    /// Reads the sample marked `name` in `file` (pass `#filePath`), taking `indent` spaces off each line
    /// (a sample written inside a function is indented; an article's is not).
    public init(_ name: String, in file: String, indent: Int = 0) throws {
        let source = try String(contentsOfFile: file, encoding: .utf8)
        let margin = String(repeating: " ", count: indent)
        guard let begin = source.range(of: margin + "// \(name) begins\n"),
            let end = source.range(of: margin + "// \(name) ends\n", range: begin.upperBound..<source.endIndex)
        else { throw SampleNotFound(name: name, file: file) }
        text = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.hasPrefix(margin) ? $0.dropFirst(indent) : $0 }.joined(separator: "\n")
        var root = URL(fileURLWithPath: file).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: root.appendingPathComponent("Package.swift").path) {
            guard root.pathComponents.count > 1 else { throw SampleNotFound(name: "Package.swift", file: file) }
            root.deleteLastPathComponent()
        }
        packageRoot = root
    }

    /// True when the article at `path` (from the package's root) shows the sample as a Swift code block.
    public func isShown(in path: String) throws -> Bool {
        let article = try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
        return article.contains("```swift\n" + text + "```\n")
    }

    /// The markers were not found.
    public struct SampleNotFound: Error, CustomStringConvertible {
        public let name: String
        public let file: String
        public var description: String { "no \"// \(name) begins\" … \"ends\" lines in \(file)" }
    }
}

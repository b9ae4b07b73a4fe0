import Foundation

/// An article of `SampleData/articles.json`.
struct Article: Codable, Equatable, Sendable {
    /// The article ID the devices sync: a short slug.
    var id: String
    var title: String
    var source: String
    var published: Date
}

/// The tour's inputs: the sample articles and the script, read from the `SampleData` folder.
struct SampleData: Sendable {
    /// The folder they were read from.
    var directory: URL
    var articles: [Article]
    var script: TourScript

    /// The article with `id`.
    func article(_ id: String) -> Article? {
        articles.first { $0.id == id }
    }

    /// Reads `articles.json` and `tour.json` from ``locate(environment:)``'s folder.
    ///
    /// - Throws: ``DemoFailure`` naming the file and what to do, when a file is missing or malformed.
    static func load(environment: [String: String]) throws -> SampleData {
        let directory = try locate(environment: environment)
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        func read<T: Decodable>(_ name: String, as type: T.Type) throws -> T {
            let url = directory.appendingPathComponent(name)
            do {
                return try decoder.decode(T.self, from: Data(contentsOf: url))
            } catch {
                throw DemoFailure(
                    "cannot read the tour's \(url.path): \(Self.describe(error)); fix the file or set FLATSYNC_SAMPLE_DATA to a good SampleData folder"
                )
            }
        }
        let articles = try read("articles.json", as: [Article].self)
        let script = try read("tour.json", as: TourScript.self)
        return SampleData(directory: directory, articles: articles, script: script)
    }

    /// `$FLATSYNC_SAMPLE_DATA` when set, else `<package>/SampleData` found from this source file's path
    /// (the package the demo was built from).
    ///
    /// - Throws: ``DemoFailure`` when the folder has no `articles.json` and `tour.json`.
    static func locate(environment: [String: String], sourceFile: String = #filePath) throws -> URL {
        let directory: URL
        let origin: String
        if let override = environment["FLATSYNC_SAMPLE_DATA"], !override.isEmpty {
            directory = URL(fileURLWithPath: override, isDirectory: true)
            origin = "FLATSYNC_SAMPLE_DATA"
        } else {
            // <package>/Sources/flatsync-demo/SampleData.swift → <package>/SampleData
            directory = URL(fileURLWithPath: sourceFile).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("SampleData", isDirectory: true)
            origin = "the package the demo was built from"
        }
        let missing = ["articles.json", "tour.json"].filter {
            !FileManager.default.fileExists(atPath: directory.appendingPathComponent($0).path)
        }
        guard missing.isEmpty else {
            throw DemoFailure(
                "cannot find the tour's sample data: \(directory.path) (from \(origin)) has no \(missing.joined(separator: " or ")); "
                    + "set FLATSYNC_SAMPLE_DATA to the package's SampleData folder"
            )
        }
        return directory
    }

    /// A decoding error in one line, with the path to the bad value.
    private static func describe(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? context.debugDescription : "\(keys): \(context.debugDescription)"
        }
        switch error {
        case DecodingError.dataCorrupted(let context), DecodingError.typeMismatch(_, let context),
            DecodingError.valueNotFound(_, let context), DecodingError.keyNotFound(_, let context):
            return path(context)
        default:
            return error.localizedDescription
        }
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension CloudSchema {
    /// The schema in CloudKit's schema language, as Apple's `cktool import-schema` takes it and
    /// `cktool export-schema` writes it: `DEFINE SCHEMA`, then a `RECORD TYPE` per type with the six system
    /// fields every exported type lists, the fields in name order, and the grants CloudKit Dashboard gives a
    /// new type; then the `Users` type every container has (an import that left it out would try to
    /// remove it).
    ///
    /// The grammar is Apple's ("Integrating a Text-Based Schema into Your Workflow"); the system fields,
    /// grants and `Users` type are as exported schemas in public repositories show them. Whether a private
    /// database needs the grants at all is not documented: they are the defaults, and harmless.
    public var ckdbText: String {
        var lines = ["DEFINE SCHEMA", ""]
        for name in recordTypes.keys.sorted() where name != "Users" {
            let fields = recordTypes[name]!.keys.sorted().map { (Self.quoted($0), recordTypes[name]![$0]!.schemaName) }
            lines += Self.recordType(
                name, fields: fields,
                grants: [#"GRANT WRITE TO "_creator""#, #"GRANT CREATE TO "_icloud""#, #"GRANT READ TO "_world""#])
            lines.append("")
        }
        lines += Self.recordType(
            "Users", fields: [("roles", "LIST<INT64>")],
            grants: [#"GRANT WRITE TO "_creator""#, #"GRANT READ TO "_world""#])
        return lines.joined(separator: "\n") + "\n"
    }

    /// The system fields CloudKit lists first in every exported record type.
    private static let systemFields = [
        (#""___createTime""#, "TIMESTAMP"), (#""___createdBy""#, "REFERENCE"), (#""___etag""#, "STRING"),
        (#""___modTime""#, "TIMESTAMP"), (#""___modifiedBy""#, "REFERENCE"), (#""___recordID""#, "REFERENCE"),
    ]

    private static func recordType(_ name: String, fields: [(String, String)], grants: [String]) -> [String] {
        let all = systemFields + fields
        let width = all.map(\.0.count).max() ?? 0
        var entries: [String] = all.map { name, type in
            name + String(repeating: " ", count: width - name.count) + " " + type
        }
        entries += grants
        var lines = ["    RECORD TYPE \(quoted(name)) ("]
        for (index, entry) in entries.enumerated() {
            lines.append("        " + entry + (index < entries.count - 1 ? "," : ""))
        }
        lines.append("    );")
        return lines
    }

    /// Words of the schema language that a field name must not be without quotes.
    private static let reservedWords: Set<String> = ["grant", "preferred", "queryable", "sortable", "searchable"]

    /// A name as the schema language takes it: bare when it is a plain identifier, else in double quotes.
    private static func quoted(_ name: String) -> String {
        let plain =
            name.first.map { $0.isLetter && $0.isASCII } == true
            && name.allSatisfy { ($0.isLetter || $0.isNumber || $0 == "_") && $0.isASCII }
            && !reservedWords.contains(name.lowercased())
        return plain
            ? name
            : "\"" + name.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
    }

    /// The schema as JSON, `{"recordTypes": {"ReadingListEntry": {"articleID": "STRING", …}, …}}`, with
    /// CloudKit Web Services' type names and keys in order.
    public var jsonData: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // Encoding dictionaries of strings cannot fail.
        return (try? encoder.encode(self)) ?? Data()
    }

    /// Reads a schema written as ``jsonData`` writes it.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/invalidArgument`` for anything else, an unknown type name
    ///   included, saying what is wrong.
    public init(json: Data) throws(FlatSyncError) {
        do {
            self = try JSONDecoder().decode(CloudSchema.self, from: json)
        } catch {
            throw FlatSyncError(
                .invalidArgument,
                "The schema is not {\"recordTypes\": {TYPE: {FIELD: \"STRING\"|\"INT64\"|…}}}: \(error)",
                cause: error)
        }
    }
}

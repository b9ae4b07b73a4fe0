#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The CloudKit schema an engine writes: each record type and the type of each of its fields.
///
/// In a container's development environment CloudKit adds record types and fields as records are saved;
/// the production environment accepts only what was deployed to it, and refuses a record with any other
/// field (`BAD_REQUEST` "Cannot create or modify field … in production schema"). Deploy this schema before
/// an app goes to production: ``ckdbText`` is the text Apple's `cktool import-schema` takes, and
/// `flatsync-demo cloud schema` prints it. The engine never writes a field outside it, and the CloudKit
/// Web Services transport sends each list field with the list type declared here, also when it is empty.
///
/// ```swift
/// print(CloudSchema.flatSync.ckdbText)                      // DEFINE SCHEMA … RECORD TYPE ReadingListEntry (…)
/// let fields = CloudSchema.flatSync.recordTypes["ReadingListEntry"]   // ["articleID": .string, …]
/// ```
public struct CloudSchema: Hashable, Sendable, Codable {
    /// The fields of each record type, by record type name, then by field name.
    public var recordTypes: [String: [String: FieldType]]

    /// A schema of `recordTypes`.
    public init(recordTypes: [String: [String: FieldType]]) {
        self.recordTypes = recordTypes
    }

    /// The field a CloudKit Web Services client writes beside a record's own fields to say which device
    /// (and which run of it) wrote the version (``Record/lastModifiedBy``): every record type FlatSync syncs
    /// declares it.
    public static let lastModifiedByField = "fsLastModifiedBy"

    /// The schema of FlatSync's own stores: `ReadingListEntry` and `ReadingHistoryItem`, each with
    /// ``lastModifiedByField``.
    public static let flatSync = CloudSchema(recordTypes: [
        ReadingListEntry.recordType: [
            "articleID": .string, "dateAdded": .timestamp, "origin": .int64, "title": .string,
            lastModifiedByField: .string,
        ],
        ReadingHistoryItem.recordType: [
            "articleID": .string, "lastVisited": .timestamp, "firstSeen": .timestamp, "maxVersionSeen": .int64,
            "readCount": .int64, "deviceID": .string, "likingStatus": .int64, "likingChangedAt": .timestamp,
            "articleRead": .int64, "articleSeen": .int64, "offensive": .int64, "articleConsumed": .int64,
            "pruningDisabled": .int64, lastModifiedByField: .string,
        ],
    ])

    /// The schema of FlatSync's own stores and of the host-defined record types `recordTypes` (each with
    /// ``lastModifiedByField``): what an app that syncs its own records deploys to production.
    ///
    /// ```swift
    /// let schema = CloudSchema.flatSync(adding: [Note.self])
    /// ```
    public static func flatSync(adding recordTypes: [any SyncableRecord.Type]) -> CloudSchema {
        var schema = flatSync
        for type in recordTypes {
            var fields = type.fieldTypes
            fields[lastModifiedByField] = .string
            schema.recordTypes[type.recordType, default: [:]].merge(fields) { $1 }
        }
        return schema
    }

    /// A field this schema and `schema` both declare, as different types, in a sentence; nil when they
    /// agree on every field they share.
    package func firstConflict(with schema: CloudSchema) -> String? {
        for recordType in recordTypes.keys.sorted() {
            guard let theirs = schema.recordTypes[recordType] else { continue }
            let fields = recordTypes[recordType]!
            for field in fields.keys.sorted() {
                if let their = theirs[field], their != fields[field] {
                    return "the field \(field) of \(recordType) as \(fields[field]!) (it declares \(their))"
                }
            }
        }
        return nil
    }

    /// A field this schema declares as a type CloudKit has not (a list of lists, an encrypted reference), in
    /// a sentence; nil when every field's type exists.
    package var firstDeclarationProblem: String? {
        for recordType in recordTypes.keys.sorted() {
            let fields = recordTypes[recordType]!
            for field in fields.keys.sorted() {
                if let problem = fields[field]!.declarationProblem {
                    return "the field \(field) of \(recordType) as \(problem)"
                }
            }
        }
        return nil
    }

    /// This schema with every record type and field of `schema` too (`schema`'s type for a field both
    /// declare).
    package func adding(_ schema: CloudSchema) -> CloudSchema {
        var union = self
        for (recordType, fields) in schema.recordTypes {
            union.recordTypes[recordType, default: [:]].merge(fields) { $1 }
        }
        return union
    }

    /// The declared type of a field, or nil when the record type or the field is not declared.
    public func type(of field: String, in recordType: String) -> FieldType? {
        recordTypes[recordType]?[field]
    }

    /// Why a production container holding this schema would refuse to save `record`, or nil when it would
    /// take it: an undeclared record type ("Cannot create new type … in production schema",
    /// TableProApp/TablePro#2226; another capture reads "Did not find record type", dongdongbh/Mindwtr#350),
    /// an undeclared field (also ``lastModifiedByField`` when the record says who wrote it: "Cannot create or
    /// modify field …", caiyue1993/IceCream#164), or a value of another type ("Invalid value, expected type
    /// …", MistKit#375). The words are those seen live; CloudKit does not document them, and they may vary.
    package func problem(saving record: Record) -> String? {
        guard let fields = recordTypes[record.type] else {
            return "Cannot create new type \(record.type) in production schema"
        }
        if record.lastModifiedBy != nil, fields[Self.lastModifiedByField] == nil {
            return "Cannot create or modify field '\(Self.lastModifiedByField)' in record '\(record.type)' in "
                + "production schema"
        }
        for key in record.fields.keys.sorted() {
            guard let type = fields[key] else {
                return "Cannot create or modify field '\(key)' in record '\(record.type)' in production schema"
            }
            if !type.accepts(record.fields[key]!) {
                return "Invalid value, expected type \(type.wireName)."
            }
        }
        return nil
    }
}

extension CloudSchema {
    /// A field's type, as CloudKit names it.
    public indirect enum FieldType: Hashable, Sendable, CustomStringConvertible {
        /// `STRING`.
        case string
        /// `INT64` (FlatSync keeps booleans, counts and enumerations this way).
        case int64
        /// `DOUBLE`.
        case double
        /// `TIMESTAMP`: milliseconds since 1970.
        case timestamp
        /// `BYTES`.
        case bytes
        /// `REFERENCE`: a reference to another record.
        case reference
        /// `ASSET`: a file stored beside the record, held as a ``CloudAsset``: one made with
        /// ``SyncContext/makeAsset(_:)`` is uploaded with its record, one another device or client wrote is
        /// kept as it came (a ``FieldValue/opaque(_:)`` value) and its bytes downloaded on demand.
        case asset
        /// `LOCATION`: a geographic coordinate, kept as it came (``FieldValue/opaque(_:)``) like an asset.
        case location
        /// A list of one element type (`STRING_LIST` on the wire, `LIST<STRING>` in a schema file).
        case list(FieldType)
        /// A field CloudKit keeps encrypted with keys of the user's iCloud account (`ENCRYPTED STRING` in a
        /// schema file), for data such as health records or private notes (Apple's "Encrypting user data").
        /// Over CloudKit Web Services Apple's servers encrypt and decrypt it for the signed-in user, so the
        /// value reads and writes as its plain type; the transport marks it `isEncrypted` on the way out, as
        /// CloudKit requires of a field its schema declares encrypted.
        ///
        /// CloudKit encrypts a string, an integer, a double, a date, bytes or a location, not a reference
        /// or an asset; a list of encrypted strings is `.list(.encrypted(.string))` (`LIST<ENCRYPTED STRING>`,
        /// as CloudKit's schema grammar has it). An encrypted field cannot be queried, which FlatSync never
        /// does. Encrypting a field already deployed unencrypted is a change of its type, which a production
        /// schema does not allow: declare a new field instead.
        case encrypted(FieldType)

        /// The name CloudKit Web Services gives the type in a field's `type`: `STRING`, `INT64_LIST` (an
        /// encrypted field's is its plain type's: its `isEncrypted` says the rest).
        package var wireName: String {
            switch self {
            case .encrypted(let base): return base.wireName
            case .string: return "STRING"
            case .int64: return "INT64"
            case .double: return "DOUBLE"
            case .timestamp: return "TIMESTAMP"
            case .bytes: return "BYTES"
            case .reference: return "REFERENCE"
            case .asset: return "ASSET"
            case .location: return "LOCATION"
            case .list(let element): return element.wireName + "_LIST"
            }
        }

        /// The name in CloudKit's schema language (`cktool`'s `.ckdb` files): `STRING`, `LIST<INT64>`,
        /// `ENCRYPTED STRING`.
        package var schemaName: String {
            switch self {
            case .list(let element): return "LIST<\(element.schemaName)>"
            case .encrypted(let base): return "ENCRYPTED " + base.schemaName
            default: return wireName
            }
        }

        /// The name in a schema's JSON (``CloudSchema/jsonData``) and in errors: the wire name, with
        /// `ENCRYPTED_` before an encrypted type (`ENCRYPTED_STRING`, `ENCRYPTED_STRING_LIST`), as CloudKit
        /// names them in its errors.
        package var fullName: String {
            switch self {
            case .list(let element): return element.fullName + "_LIST"
            case .encrypted(let base): return "ENCRYPTED_" + base.wireName
            default: return wireName
            }
        }

        /// The type a full name (``fullName``) stands for, or nil for one FlatSync does not know.
        package init?(fullName: String) {
            if fullName.hasSuffix("_LIST") {
                guard let element = FieldType(fullName: String(fullName.dropLast("_LIST".count))), !element.isList
                else { return nil }
                self = .list(element)
            } else if fullName.hasPrefix("ENCRYPTED_") {
                guard let base = FieldType(wireName: String(fullName.dropFirst("ENCRYPTED_".count))),
                    base.canBeEncrypted
                else { return nil }
                self = .encrypted(base)
            } else {
                self.init(wireName: fullName)
            }
        }

        /// The type a wire name stands for (`STRING`, `TIMESTAMP_LIST`), or nil for one FlatSync does not
        /// know.
        package init?(wireName: String) {
            if wireName.hasSuffix("_LIST") {
                guard let element = FieldType(wireName: String(wireName.dropLast("_LIST".count))),
                    !element.isList
                else { return nil }
                self = .list(element)
                return
            }
            let scalars: [String: FieldType] = [
                "STRING": .string, "INT64": .int64, "DOUBLE": .double, "TIMESTAMP": .timestamp, "BYTES": .bytes,
                "REFERENCE": .reference, "ASSET": .asset, "LOCATION": .location,
            ]
            guard let type = scalars[wireName] else { return nil }
            self = type
        }

        /// True for a list type.
        public var isList: Bool {
            if case .list = self { return true }
            return false
        }

        /// True for an encrypted type, or a list of one.
        public var isEncrypted: Bool {
            switch self {
            case .encrypted: return true
            case .list(let element): return element.isEncrypted
            default: return false
            }
        }

        /// True for a type CloudKit can encrypt (its schema grammar's `ENCRYPTED` types).
        private var canBeEncrypted: Bool {
            switch self {
            case .string, .int64, .double, .timestamp, .bytes, .location: return true
            default: return false
            }
        }

        /// Why a record type may not declare a field of this type, or nil: CloudKit has no list of lists,
        /// and encrypts only some types, each on its own or as a list's element.
        package var declarationProblem: String? {
            switch self {
            case .list(.list):
                return "a list of lists, which CloudKit has no type for: store such a value as bytes (a Codable "
                    + "property of it is its JSON)"
            case .list(.encrypted(let base)) where !base.canBeEncrypted,
                .encrypted(let base) where !base.canBeEncrypted:
                return "an encrypted \(base.fullName), which CloudKit cannot encrypt: it encrypts strings, integers, "
                    + "doubles, dates, bytes and locations (a list is .list(.encrypted(.string)))"
            default:
                return nil
            }
        }

        /// True when a field of this type can hold `value`: its kind matches (every element's, for a list;
        /// an empty list fits any list type); a kept value (``FieldValue/opaque(_:)``) fits the type it was
        /// kept as (an `ASSETID` as an asset, as does an asset made on this device).
        package func accepts(_ value: FieldValue) -> Bool {
            switch (self, value) {
            case (.encrypted(let base), _):
                return base.accepts(value)
            case (.string, .string), (.int64, .int(_)), (.double, .double), (.timestamp, .date), (.bytes, .bytes),
                (.reference, .reference):
                return true
            case (.list(let element), .list(let values)):
                return values.allSatisfy { element.accepts($0) }
            case (_, .opaque(let kept)):
                return kept.type == wireName
                    || (self == .asset && (kept.type == "ASSETID" || kept.type == CloudAsset.localType))
                    || (self == .list(.asset) && kept.type == "ASSETID_LIST")
            default:
                return false
            }
        }

        public var description: String { fullName }
    }
}

extension CloudSchema.FieldType: Codable {
    /// Decodes a full name (`"STRING"`, `"INT64_LIST"`, `"ENCRYPTED_STRING"`).
    public init(from decoder: any Decoder) throws {
        let name = try decoder.singleValueContainer().decode(String.self)
        guard let type = Self(fullName: name) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "unknown CloudKit field type \(name)"))
        }
        self = type
    }

    /// Encodes the full name: the wire name, `ENCRYPTED_` before an encrypted type's.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fullName)
    }
}

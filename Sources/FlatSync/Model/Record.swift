#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A record as the server stores it: an ID, a type, typed fields and the server's change tag.
///
/// Stores turn their entries into records to send them (see ``ReadingListEntry/record`` and
/// ``ReadingHistoryItem/record``) and back again when records are fetched.
public struct Record: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The record's zone and name.
    public var id: RecordID
    /// The record type, such as `ReadingListEntry`.
    public var type: String
    /// The record's fields by key.
    public var fields: [String: FieldValue] {
        get { content.fields }
        set { content = .fields(newValue) }
    }
    /// The server's version stamp; `nil` for a record the server has not seen yet.
    public var changeTag: ChangeTag? {
        get { hasChangeTag ? ChangeTag(rawValue: changeTagValue) : nil }
        set {
            changeTagValue = newValue?.rawValue ?? ""
            hasChangeTag = newValue != nil
        }
    }
    /// The device that wrote this version: a system field, like CloudKit's `modified.deviceID`, kept
    /// apart from ``fields``. A saving client sets it to its own mark, `<session>:<sequence>@<device ID>`
    /// (the run of the store that sent it, the newest mutation the save holds, and the device); the server
    /// keeps it with the version, so a client can tell its own writes from someone else's with the same
    /// content, and a directory restored from a backup does not take the writes made after the backup for
    /// its own.
    public var lastModifiedBy: String? {
        get { hasLastModifiedBy ? lastModifiedByValue : nil }
        set {
            lastModifiedByValue = newValue ?? ""
            hasLastModifiedBy = newValue != nil
        }
    }
    // The two optionals as a value and a flag each: with an optional stored property, the optimizer copied a
    // whole record (retaining and releasing each of its strings) and destroyed the original where it could
    // have moved it, for every change a batch made (a `RecordChange`'s optional record did the same).
    // (The flags are declared after `content`, so that they take its tail instead of padding each string.)
    private var changeTagValue: String
    private var lastModifiedByValue: String
    /// The fields as a dictionary, or as the store item they describe until someone asks for the dictionary
    /// (see `Content`).
    package var content: Content
    private var hasChangeTag: Bool
    private var hasLastModifiedBy: Bool

    /// Creates a record.
    public init(
        id: RecordID,
        type: String,
        fields: [String: FieldValue] = [:],
        changeTag: ChangeTag? = nil,
        lastModifiedBy: String? = nil
    ) {
        self.id = id
        self.type = type
        self.content = .fields(fields)
        self.changeTagValue = changeTag?.rawValue ?? ""
        self.hasChangeTag = changeTag != nil
        self.lastModifiedByValue = lastModifiedBy ?? ""
        self.hasLastModifiedBy = lastModifiedBy != nil
    }

    /// A record whose fields are those of `content`.
    package init(id: RecordID, type: String, content: Content, changeTag: ChangeTag? = nil) {
        self.id = id
        self.type = type
        self.content = content
        self.changeTagValue = changeTag?.rawValue ?? ""
        self.hasChangeTag = changeTag != nil
        self.lastModifiedByValue = ""
        self.hasLastModifiedBy = false
    }

    /// The value of one field, or `nil` when the record lacks it.
    public subscript(key: String) -> FieldValue? {
        get { content.field(key) }
        set { fields[key] = newValue }
    }

    /// The record with a different change tag.
    public func withChangeTag(_ tag: ChangeTag?) -> Record {
        var copy = self
        copy.changeTag = tag
        return copy
    }

    /// A rough count of the record's bytes on the wire (names, keys and values), for the 1 MB limit.
    public var approximateSize: Int {
        fields.reduce(id.name.utf8.count + type.utf8.count) { $0 + $1.key.utf8.count + $1.value.approximateSize }
    }

    /// True when both records hold the same type and fields, whatever their change tags.
    public func hasSameContent(as other: Record) -> Bool {
        id == other.id && type == other.type && content == other.content
    }

    public static func == (lhs: Record, rhs: Record) -> Bool {
        lhs.id == rhs.id && lhs.type == rhs.type && lhs.changeTag == rhs.changeTag
            && lhs.lastModifiedBy == rhs.lastModifiedBy && lhs.content == rhs.content
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(type)
        hasher.combine(fields)
        hasher.combine(changeTag)
        hasher.combine(lastModifiedBy)
    }

    private enum CodingKeys: String, CodingKey {
        case id, type, fields, changeTag, lastModifiedBy
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(RecordID.self, forKey: .id)
        type = try container.decode(String.self, forKey: .type)
        content = .fields(try container.decode([String: FieldValue].self, forKey: .fields))
        let changeTag = try container.decodeIfPresent(ChangeTag.self, forKey: .changeTag)
        changeTagValue = changeTag?.rawValue ?? ""
        hasChangeTag = changeTag != nil
        let lastModifiedBy = try container.decodeIfPresent(String.self, forKey: .lastModifiedBy)
        lastModifiedByValue = lastModifiedBy ?? ""
        hasLastModifiedBy = lastModifiedBy != nil
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(type, forKey: .type)
        try container.encode(fields, forKey: .fields)
        try container.encodeIfPresent(changeTag, forKey: .changeTag)
        try container.encodeIfPresent(lastModifiedBy, forKey: .lastModifiedBy)
    }

    public var description: String {
        let body = fields.keys.sorted().map { "\($0)=\(fields[$0]!)" }.joined(separator: ", ")
        return "\(type)(\(id), tag: \(changeTag?.rawValue ?? "nil"), \(body))"
    }
}

import Foundation

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
    public var fields: [String: FieldValue]
    /// The server's version stamp; `nil` for a record the server has not seen yet.
    public var changeTag: ChangeTag?
    /// The device that wrote this version: a system field, like CloudKit's `modified.deviceID`, kept
    /// apart from ``fields``. A saving client sets it to its own device ID; the server keeps it with the
    /// version, so a client can tell its own writes from someone else's with the same content.
    public var lastModifiedBy: String?

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
        self.fields = fields
        self.changeTag = changeTag
        self.lastModifiedBy = lastModifiedBy
    }

    /// The value of one field, or `nil` when the record lacks it.
    public subscript(key: String) -> FieldValue? {
        get { fields[key] }
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
        id == other.id && type == other.type && fields == other.fields
    }

    public var description: String {
        let body = fields.keys.sorted().map { "\($0)=\(fields[$0]!)" }.joined(separator: ", ")
        return "\(type)(\(id), tag: \(changeTag?.rawValue ?? "nil"), \(body))"
    }
}

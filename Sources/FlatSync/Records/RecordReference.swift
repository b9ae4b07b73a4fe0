/// A field's reference to another record: CloudKit's `REFERENCE`.
///
/// CloudKit deletes a record whose `deleteSelf` reference points at a record that is deleted, and requires
/// both records to be in one zone for that; a `validate` reference makes the server refuse a save whose
/// target does not exist (`VALIDATING_REFERENCE_ERROR`).
public struct RecordReference: Hashable, Sendable, Codable, CustomStringConvertible {
    /// What the server does about the reference when its target is deleted, or missing when it is saved.
    public enum Action: String, Hashable, Sendable, Codable, CaseIterable {
        /// Nothing.
        case none = "NONE"
        /// Delete the record that holds the reference along with its target.
        case deleteSelf = "DELETE_SELF"
        /// Refuse a save of the holding record while the target does not exist (CloudKit Web Services' own
        /// action; the native API has no such case).
        case validate = "VALIDATE"
    }

    /// The name of the referenced record.
    public var recordName: String
    /// The referenced record's zone, when the reference names one; `nil`: the holding record's zone.
    public var zoneName: String?
    /// What the server does when the target goes.
    public var action: Action

    /// A reference to the record named `recordName` (in the holding record's zone unless `zoneName` says).
    public init(recordName: String, zoneName: String? = nil, action: Action = .none) {
        self.recordName = recordName
        self.zoneName = zoneName
        self.action = action
    }

    public var description: String {
        "→\(zoneName.map { "\($0)/" } ?? "")\(recordName)\(action == .none ? "" : " (\(action.rawValue))")"
    }
}

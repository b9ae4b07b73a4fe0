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
        /// action; the native API has no such case). Read from what other clients write; a ``RecordStore``
        /// refuses to save it, taking only `none` and `deleteSelf`.
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

extension RecordReference {
    /// The ID of the record this reference points at, when it is held by a record in `zone`.
    package func target(from zone: ZoneID) -> RecordID {
        RecordID(zone: zoneName.map(ZoneID.init) ?? zone, name: recordName)
    }

    /// True when the reference points out of `zone`, which CloudKit does not allow: "You may only create
    /// references between records within the same zone of the same database" (CKRecord.Reference).
    package func leaves(_ zone: ZoneID) -> Bool {
        zoneName.map { $0 != zone.name } ?? false
    }
}

extension Record {
    /// The record's references: those in reference fields and in lists of references, in no set order.
    /// The built-in stores' records hold none, so for them this builds no dictionary of fields.
    package var references: [RecordReference] {
        guard case .fields(let fields) = content else { return [] }
        return RecordReference.all(in: fields.values)
    }

    /// The records this one belongs to: the targets of its `deleteSelf` references.
    package var owners: [RecordID] {
        references.filter { $0.action == .deleteSelf }.map { $0.target(from: id.zone) }
    }
}

extension RecordReference {
    /// The references among `values`: reference fields and the elements of lists of references.
    package static func all(in values: some Sequence<FieldValue>) -> [RecordReference] {
        var found: [RecordReference] = []
        for value in values {
            switch value {
            case .reference(let reference): found.append(reference)
            case .list(let elements):
                for case .reference(let reference) in elements { found.append(reference) }
            default: continue
            }
        }
        return found
    }
}

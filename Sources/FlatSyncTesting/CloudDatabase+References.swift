import FlatSync

// What the server does about the references a record holds (`FieldValue.reference`, alone or in a list).
// Each rule is Apple's documentation (of the native CloudKit API: the CKWS reference documents only a
// reference's shape) or a live observation; where neither says, the comment says so.
//
// - A reference must point into its own record's zone: "You may only create references between records
//   within the same zone of the same database" (CKRecord.Reference). [uncertain] Which error CloudKit
//   answers is not documented; a save is refused with `invalidArguments` (`BAD_REQUEST` on the wire).
// - A `deleteSelf` reference makes its record go when the target goes: "CloudKit deletes any records that
//   contain CKReference objects pointing to the current record … The deletion of the additional records can
//   trigger further deletions as the action cascades. The deletions are asynchronous in the default zone and
//   immediate in a custom zone" (CKRecord.ReferenceAction.deleteSelf). FlatSync's zones are custom zones, so
//   the cascade is part of the request that deletes the target. [uncertain] That cascaded deletions appear
//   in the zone's changes like any other deletion is not stated; it is the only way another device could
//   learn of them, and a modify response lists only the request's own records.
// - Saving a record does not check that a `none` or `deleteSelf` target exists: "CloudKit requires that the
//   target record of the parent reference, if set, exists in the database or is part of the same operation;
//   all other reference fields are exempt from this requirement" (CKModifyRecordsOperation). A child saved
//   after its parent was deleted elsewhere stays, orphaned, and no cascade will ever remove it: a client
//   must clean such children up itself.
// - A `validate` reference (CloudKit Web Services' `VALIDATE`, listed by CKTool JS's
//   CKDBRecordReferenceAction) refuses a save whose target neither exists nor is saved in the same request,
//   with `VALIDATING_REFERENCE_ERROR` ("validating reference violated", HTTP 412, ErrorCodes.html).
//   [uncertain] No Apple page says when the code is returned; this is the reading of the action's name.
// - At most 750 `deleteSelf` references may point at one record (PropertyMetrics.html); more fail the save
//   per record with "Limit exceeded for number of owning references to single record" (observed live as
//   CKError limitExceeded, mentrena/SyncKit#192).
extension CloudDatabase {
    /// The most `deleteSelf` references that may point at one record (CloudKit's PropertyMetrics).
    package static let maximumOwningReferencesPerRecord = 750

    /// Why the references of `save` would make it fail, or `nil`: a reference out of the record's zone, or a
    /// `validate` reference whose target will not exist after the request. `saving` and `deleting` are the
    /// request's record IDs (a target saved in the same request counts as existing, one deleted as gone).
    func referenceFailure(_ save: RecordSave, saving: Set<RecordID>, deleting: Set<RecordID>) -> CloudError? {
        let record = save.record
        for reference in record.references {
            if reference.leaves(record.id.zone) {
                return CloudError(
                    .invalidArguments,
                    "The record \(record.id) refers to \(reference.recordName) in the zone \(reference.zoneName ?? ""); "
                        + "a reference must point into its own record's zone.",
                    serverErrorCode: "BAD_REQUEST")
            }
            guard reference.action == .validate else { continue }
            let target = reference.target(from: record.id.zone)
            let exists = (currentRecord(target) != nil || saving.contains(target)) && !deleting.contains(target)
            if !exists {
                return CloudError(
                    .invalidArguments,
                    "The record \(record.id) has a validating reference to \(target), which does not exist.",
                    serverErrorCode: "VALIDATING_REFERENCE_ERROR")
            }
        }
        return nil
    }

    /// The saves that would give some record more than ``maximumOwningReferencesPerRecord`` `deleteSelf`
    /// references, with their errors. Counts the zone as it will be after the request (the request's own
    /// saves replace the records they name; its deletes remove theirs). Empty, and cheap, for a request whose
    /// saves hold no `deleteSelf` reference.
    func owningReferenceFailures(_ saves: [RecordSave], deleting: Set<RecordID>) -> [RecordID: CloudError] {
        let owning = saves.filter { $0.record.references.contains { $0.action == .deleteSelf } }
        guard !owning.isEmpty else { return [:] }
        let replaced = Set(saves.map(\.record.id)).union(deleting)
        var owners: [RecordID: Int] = [:]
        for zone in Set(owning.map(\.record.id.zone)) {
            for (target, children) in owningReferences(in: zone) {
                owners[target, default: 0] += children.filter { !replaced.contains($0) }.count
            }
        }
        for save in saves {
            for target in Self.owningTargets(of: save.record) { owners[target, default: 0] += 1 }
        }
        var failed: [RecordID: CloudError] = [:]
        for save in owning {
            let over = Self.owningTargets(of: save.record).first {
                owners[$0, default: 0] > Self.maximumOwningReferencesPerRecord
            }
            if let over {
                failed[save.record.id] = CloudError(
                    .limitExceeded,
                    "Limit exceeded for number of owning references to single record: \(over) would have "
                        + "\(owners[over]!); the limit is \(Self.maximumOwningReferencesPerRecord).")
            }
        }
        return failed
    }

    /// Deletes every record that a `deleteSelf` reference ties to one of `deleted`, and the records tied to
    /// those, as CloudKit does in a custom zone; returns how many it deleted. Each is one step in its zone's
    /// history, as a deletion by a request is.
    mutating func cascadeDeletions(from deleted: [RecordID]) -> Int {
        var removed = 0
        for zone in Set(deleted.map(\.zone)) {
            let children = owningReferences(in: zone)
            guard !children.isEmpty else { continue }
            var pending = deleted.filter { $0.zone == zone }
            while let target = pending.popLast() {
                for child in children[target] ?? [] where currentRecord(child) != nil {
                    _ = applyDelete(RecordDeletion(child, policy: .force))
                    removed += 1
                    pending.append(child)
                }
            }
        }
        return removed
    }

    /// The records of `zone` that hold a `deleteSelf` reference, by the record each points at.
    private func owningReferences(in zone: ZoneID) -> [RecordID: [RecordID]] {
        guard let state = zones[zone.name], state.exists else { return [:] }
        var children: [RecordID: [RecordID]] = [:]
        for slot in state.slots.values {
            guard let record = slot.record else { continue }
            for target in Self.owningTargets(of: record) { children[target, default: []].append(record.id) }
        }
        return children
    }

    /// The distinct records `record`'s `deleteSelf` references point at.
    private static func owningTargets(of record: Record) -> Set<RecordID> {
        Set(record.references.filter { $0.action == .deleteSelf }.map { $0.target(from: record.id.zone) })
    }
}

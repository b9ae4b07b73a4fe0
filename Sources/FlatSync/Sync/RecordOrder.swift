/// The order records go to the server in: a record after every record of the same batch it refers to.
///
/// CloudKit checks a `parent` reference, and a `VALIDATE` one, when the record is saved (CKModifyRecordsOperation;
/// CloudKit Web Services' reference actions), and cascades a `deleteSelf` one only to records that exist when
/// the target goes: a parent saved first is never missing when its child arrives, whatever the server checks.
package enum RecordOrder {
    /// `records` with each one after the records among them that it refers to (by depth of that chain, then
    /// by name); a cycle of references is broken at an arbitrary record.
    package static func parentsFirst(_ records: [Record]) -> [Record] {
        guard records.contains(where: { !$0.references.isEmpty }) else { return records.sorted { $0.id < $1.id } }
        let byName = Dictionary(records.map { ($0.id.name, $0) }, uniquingKeysWith: { $1 })
        var depth: [String: Int] = [:]
        func depthOf(_ name: String, visiting: inout Set<String>) -> Int {
            if let known = depth[name] { return known }
            guard let record = byName[name], visiting.insert(name).inserted else { return 0 }
            var result = 0
            for reference in record.references where !reference.leaves(record.id.zone) {
                if byName[reference.recordName] != nil {
                    result = max(result, depthOf(reference.recordName, visiting: &visiting) + 1)
                }
            }
            visiting.remove(name)
            depth[name] = result
            return result
        }
        var visiting = Set<String>()
        for record in records { _ = depthOf(record.id.name, visiting: &visiting) }
        return records.sorted { (depth[$0.id.name] ?? 0, $0.id) < (depth[$1.id.name] ?? 0, $1.id) }
    }
}

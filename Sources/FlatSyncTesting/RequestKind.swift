/// The kinds of request a ``CloudTransport`` serves, one per protocol method.
///
/// Counters are kept per kind (``CloudCounters/requestsByKind``) and fault plans can target a kind
/// (``ScriptedFault/kind``, ``RandomFaults/kinds``).
public enum RequestKind: String, CaseIterable, Codable, CodingKeyRepresentable, Hashable, Sendable {
    /// ``CloudTransport/listZones()``.
    case listZones
    /// ``CloudTransport/createZones(_:)``.
    case createZones
    /// ``CloudTransport/deleteZones(_:)``.
    case deleteZones
    /// ``CloudTransport/fetchDatabaseChanges(since:)``.
    case fetchDatabaseChanges
    /// ``CloudTransport/fetchZoneChanges(in:since:resultsLimit:)``.
    case fetchZoneChanges
    /// ``CloudTransport/modifyRecords(saving:deleting:atomically:)``.
    case modifyRecords
    /// ``CloudTransport/lookupRecords(_:)``.
    case lookupRecords
}

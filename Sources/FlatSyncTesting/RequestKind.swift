/// The kinds of request a test cloud serves: one per `CloudTransport` method, and CKWS's subscription
/// listing, which no method has.
///
/// Counters are kept per kind (``CloudCounters/requestsByKind``) and fault plans can target a kind
/// (``ScriptedFault/kind``, ``RandomFaults/kinds``).
public enum RequestKind: String, CaseIterable, Codable, CodingKeyRepresentable, Hashable, Sendable {
    /// `CloudTransport.listZones()`.
    case listZones
    /// `CloudTransport.createZones(_:)`.
    case createZones
    /// `CloudTransport.deleteZones(_:)`.
    case deleteZones
    /// `CloudTransport.fetchDatabaseChanges(since:)`.
    case fetchDatabaseChanges
    /// `CloudTransport.fetchZoneChanges(in:since:resultsLimit:)`.
    case fetchZoneChanges
    /// `CloudTransport.modifyRecords(saving:deleting:atomically:)`.
    case modifyRecords
    /// `CloudTransport.lookupRecords(_:)`.
    case lookupRecords
    /// `CloudTransport.downloadAsset(_:)`: over CKWS, a GET of an asset's download link.
    case downloadAsset
    /// `CloudTransport.subscribeToChanges(in:)`, and CKWS `subscriptions/modify`.
    case modifySubscriptions
    /// CKWS `subscriptions/list` and `subscriptions/lookup` (the CKWS transport lists before it subscribes).
    case listSubscriptions
}

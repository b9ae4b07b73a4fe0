/// The kinds of request a test cloud serves: one per `CloudTransport` method, and CKWS's subscription
/// listing, asset upload URLs and asset rereferences, which no method has.
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
    /// CKWS `assets/upload`, which a save of an asset made on a device needs first (the in-process clouds
    /// take the asset's bytes with the modify request). The POST of the bytes to the URL it answers is not
    /// counted: it goes to the asset host, not to the database.
    case uploadAssets
    /// CKWS `assets/rereference`, which a save replacing a record that holds an asset the server returned
    /// needs first (the in-process clouds re-attach such an asset within the modify request).
    case rereferenceAssets
}

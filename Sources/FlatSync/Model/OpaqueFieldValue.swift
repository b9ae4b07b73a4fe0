/// A field value of a CloudKit type FlatSync does not interpret — `LOCATION`, `ASSET`, `ASSETID`, lists of
/// them, a type added after this version — kept exactly as CloudKit Web Services sent it.
///
/// A record another client (a native app on the same container, a newer version of this app) wrote may
/// hold such fields. FlatSync never sends them back (a save sends only the fields its device changed), but
/// it keeps them with the record, through snapshots and restarts, so that a host reading the record sees
/// them and nothing is lost on the way. An asset's reads as a ``CloudAsset``.
public struct OpaqueFieldValue: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The CloudKit Web Services type name, such as `LOCATION`, `ASSETID` or `LOCATION_LIST`.
    public var type: String
    /// The field's `value` as JSON text, as the server sent it.
    public var json: String

    /// A value of type `type` whose JSON is `json`.
    public init(type: String, json: String) {
        self.type = type
        self.json = json
    }

    public var description: String { "\(type)(\(json))" }
}

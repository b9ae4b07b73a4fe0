#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One record to delete and how.
public struct RecordDeletion: Hashable, Sendable, Codable {
    /// The record to delete.
    public var id: RecordID
    /// The change tag the client last saw for the record, or `nil` if it never saw one.
    public var changeTag: ChangeTag?
    /// What to do if the server's version differs.
    public var policy: DeletePolicy

    /// A delete of the record `id`, last seen with `changeTag`, under `policy`.
    public init(_ id: RecordID, changeTag: ChangeTag? = nil, policy: DeletePolicy = .ifServerRecordUnchanged) {
        self.id = id
        self.changeTag = changeTag
        self.policy = policy
    }
}

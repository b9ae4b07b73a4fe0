#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One record to save and how.
public struct RecordSave: Hashable, Sendable, Codable {
    /// The record; its ``Record/changeTag`` is the version the client last saw.
    public var record: Record
    /// What to do if the server's version differs.
    public var policy: SavePolicy

    /// A save of `record` under `policy`.
    public init(_ record: Record, policy: SavePolicy = .ifServerRecordUnchanged) {
        self.record = record
        self.policy = policy
    }
}

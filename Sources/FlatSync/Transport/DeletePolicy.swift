#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How the server treats a delete when the record changed since the client saw it.
public enum DeletePolicy: String, Hashable, Sendable, Codable, CaseIterable {
    /// Delete only if the server's change tag equals the one sent (`nil`: the client never saw the
    /// record); otherwise fail with ``CloudError/Code-swift.struct/serverRecordChanged`` carrying the
    /// server's record. Deleting a record that does not exist succeeds.
    case ifServerRecordUnchanged
    /// Delete whatever the server holds. Deleting a record that does not exist succeeds.
    case force
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How the server treats a save when it already has a version of the record.
public enum SavePolicy: String, Hashable, Sendable, Codable, CaseIterable {
    /// Save only if the server's change tag equals the one sent (`nil`: only if the record does not
    /// exist); otherwise fail with ``CloudError/Code-swift.struct/serverRecordChanged`` carrying the
    /// server's record. A save with a tag for a record that no longer exists fails with
    /// ``CloudError/Code-swift.struct/unknownItem``. Only the sent fields change; the record's other
    /// fields — those another client wrote among them — keep their values (CloudKit Web Services'
    /// `update`, and what a native save of a record's changed keys does).
    case ifServerRecordUnchanged
    /// As ``ifServerRecordUnchanged``, but the sent fields replace the record's: a field not sent is
    /// removed (CloudKit Web Services' `replace`). For a save that stands for a delete followed by a new
    /// record, which takes whatever the deleted record held with it.
    case replaceIfServerRecordUnchanged
    /// Save without checking the change tag, writing only the fields sent; other fields keep their
    /// server values. Creates the record if it is missing.
    case changedKeys
    /// Save without checking the change tag, replacing every field. Creates the record if it is missing.
    case allKeys
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What a ``CloudTransport/modifyRecords(saving:deleting:atomically:)`` call did, record by record.
public struct ModifyRecordsResult: Hashable, Sendable {
    /// The saved records as the server now holds them, with their new change tags.
    public var saved: [RecordID: Record]
    /// The records deleted (or already absent).
    public var deleted: Set<RecordID>
    /// The records that failed, with why.
    public var failed: [RecordID: CloudError]

    /// A result; transports build it.
    public init(saved: [RecordID: Record] = [:], deleted: Set<RecordID> = [], failed: [RecordID: CloudError] = [:]) {
        self.saved = saved
        self.deleted = deleted
        self.failed = failed
    }

    /// The failures as one ``CloudError/Code-swift.struct/partialFailure`` error, or `nil` if every
    /// record succeeded.
    public var partialFailure: CloudError? {
        guard !failed.isEmpty else { return nil }
        return CloudError(.partialFailure, "\(failed.count) of the records failed", partialErrors: failed)
    }
}

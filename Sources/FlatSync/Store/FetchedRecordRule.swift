/// What a fetch does with a record the server returned, given what this device has pending for it: one rule
/// for the records of every store, built-in or host (each store then takes or merges the record its own way).
package enum FetchedRecordRule {
    /// What to do with the fetched record.
    package enum Action: Equatable, Sendable {
        /// Nothing: it is the version this device already holds (its own save coming back, or a version it
        /// merged already).
        case ignore
        /// Store the server's version, and its tag.
        case take
        /// Lay this device's pending change over the server's version (by the store's merge rule), keep its
        /// tag, and send the merge whole next time: it may differ from the server's in fields the pending
        /// change does not name.
        case merge
        /// Keep the local delete pending, and remember the version it skipped: covered by the change token, it
        /// will not be fetched again if the delete loses to it.
        case skipForPendingDelete
    }

    /// The action for a fetched record.
    ///
    /// - Parameters:
    ///   - pendingIsDelete: nil when nothing is pending for the record, else whether the latest pending
    ///     change is a delete.
    ///   - tagUnchanged: true when the record's change tag is the one this device last saw.
    ///   - sameContent: true when the record holds what this device holds (asked only when it matters).
    package static func action(
        pendingIsDelete: Bool?, tagUnchanged: Bool, sameContent: () -> Bool
    ) -> Action {
        switch pendingIsDelete {
        case nil: return tagUnchanged && sameContent() ? .ignore : .take
        case false: return tagUnchanged ? .ignore : .merge
        case true: return .skipForPendingDelete
        }
    }
}

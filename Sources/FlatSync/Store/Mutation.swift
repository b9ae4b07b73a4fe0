/// One accepted local mutation as the command log records it: a numbered batch of record changes in
/// one zone. A batch is written as one log entry, so it is durable all or nothing.
package struct Mutation: Hashable, Sendable {
    /// The mutation's number; every change in it carries the same ``RecordChange/sequence``.
    package var sequence: UInt64
    /// The zone the changes are in.
    package var zone: ZoneID
    /// The changes, in the order they were made.
    package var changes: [RecordChange]

    /// Creates a mutation; every change takes the mutation's sequence number.
    package init(sequence: UInt64, zone: ZoneID, changes: [RecordChange]) {
        self.sequence = sequence
        self.zone = zone
        // The store numbers its changes already; copying a large batch only to renumber it is wasted.
        if changes.allSatisfy({ $0.sequence == sequence }) {
            self.changes = changes
            return
        }
        self.changes = changes.map { change in
            var change = change
            change.sequence = sequence
            return change
        }
    }
}

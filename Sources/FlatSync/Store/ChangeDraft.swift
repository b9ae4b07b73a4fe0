/// One record's change as a batch's pass over the item table leaves it: what to make the change from, or
/// the change itself once made.
///
/// Making a change — its record name, its record, the box that holds a history item — is most of the
/// pass's work. The pass keeps drafts instead, and a large batch's
/// changes are made from them afterwards on two threads (``makeChanges(_:sequence:onTwoThreads:)``): each
/// thread takes its own half of the drafts apart (leaving each as ``taken``) and writes its half of the
/// changes.
package enum ChangeDraft<Item: RecordDiffable>: Sendable {
    /// A save of the article's item `new`, which was `old` before the batch.
    case save(articleID: String, old: Item?, new: Item)
    /// A delete of the article's record.
    case delete(articleID: String)
    /// A change already made: a record the batch changed more than once, whose changes were coalesced.
    case made(RecordChange)

    /// The article the change is for.
    var articleID: String {
        switch self {
        case .save(let articleID, _, _), .delete(let articleID): return articleID
        case .made(let change):
            // Every change of a batch is of an item of its zone (its name has the zone's prefix).
            guard let articleID = Item.articleID(fromRecordName: change.recordID.name) else {
                preconditionFailure("a batch's change \(change.recordID) is not of an item of its zone")
            }
            return articleID
        }
    }

    /// The change, as the mutation numbered `sequence` makes it: the save of the new item's record with the
    /// keys that differ from the old one's, or the delete of the record.
    func change(sequence: UInt64) -> RecordChange {
        var draft = self
        return Self.takeChange(from: &draft, sequence: sequence)
    }

    /// ``change(sequence:)``, taken out of the draft at `draft` (left as ``taken``): its items go on into
    /// the change uncopied. Switched over as the moved value; written as a `consuming` method that switched
    /// over `consume self`, it copied the draft first (retaining its strings) and took the copy apart.
    static func takeChange(from draft: UnsafeMutablePointer<ChangeDraft>, sequence: UInt64) -> RecordChange {
        let change: RecordChange
        switch draft.move() {
        case .save(let articleID, let old, let new):
            change = new.saveChange(since: old, articleID: articleID, sequence: sequence)
        case .delete(let articleID):
            change = .delete(Item.recordID(for: articleID), sequence: sequence)
        case .made(let made):
            change = made
        }
        draft.initialize(to: .taken)
        return change
    }

    /// What a draft is left as once its change was taken from it: a delete of no article, which holds no
    /// storage, so that emptying the drafts afterwards releases nothing.
    static var taken: ChangeDraft { .delete(articleID: "") }

    /// The changes of `drafts`, in their order; made half on this thread and half on another when
    /// `onTwoThreads` (see ``ForkJoin``). Each is made from its draft's own values, and `drafts` are left as
    /// ``taken``: copying an item would retain and release its strings.
    static func makeChanges(_ drafts: inout [ChangeDraft], sequence: UInt64, onTwoThreads: Bool) -> [RecordChange] {
        let count = drafts.count
        guard count > 0 else { return [] }
        return drafts.withUnsafeMutableBufferPointer { drafts in
            [RecordChange](unsafeUninitializedCapacity: count) { buffer, initializedCount in
                let changes = UninitializedChanges(start: buffer.baseAddress!)
                guard onTwoThreads, count > 1 else {
                    changes.make(from: drafts, in: 0..<count, sequence: sequence)
                    initializedCount = count
                    return
                }
                let middle = count / 2
                let halves = TakenDrafts(drafts)
                _ = ForkJoin.run(
                    { changes.make(from: halves.drafts, in: 0..<middle, sequence: sequence) },
                    { changes.make(from: halves.drafts, in: middle..<count, sequence: sequence) }
                )
                initializedCount = count
            }
        }
    }
}

/// A batch's drafts while two threads take the changes out of them.
///
/// `@unchecked Sendable`: each thread takes from and writes back to its own range of the drafts only, and
/// the caller, which holds the buffer, reads it again only after both are done.
private struct TakenDrafts<Item: RecordDiffable>: @unchecked Sendable {
    let drafts: UnsafeMutableBufferPointer<ChangeDraft<Item>>

    init(_ drafts: UnsafeMutableBufferPointer<ChangeDraft<Item>>) { self.drafts = drafts }
}

/// The memory of a batch's changes while they are made (by two threads, or by the caller alone).
///
/// `@unchecked Sendable`: the two threads initialize disjoint ranges of it, and the caller reads it only
/// after both are done (``ForkJoin/run(_:_:)`` returns once both pieces ran).
private struct UninitializedChanges: @unchecked Sendable {
    let start: UnsafeMutablePointer<RecordChange>

    /// Makes the changes of `drafts[range]` at the same positions, taking them out of the drafts (each left
    /// as ``ChangeDraft/taken``).
    func make<Item>(from drafts: UnsafeMutableBufferPointer<ChangeDraft<Item>>, in range: Range<Int>, sequence: UInt64)
    {
        let base = drafts.baseAddress!
        for position in range {
            (start + position).initialize(to: ChangeDraft.takeChange(from: base + position, sequence: sequence))
        }
    }
}

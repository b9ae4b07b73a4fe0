/// How a push cuts a zone's changes into `records/modify` requests.
///
/// CloudKit Web Services takes at most 200 operations a request (documented) but documents no limit on a
/// request's bytes; for the native API Apple's guidance is 2 MB a request, and a host record may hold
/// nearly 1 MB (ckws.md, where the byte limit is marked uncertain). So a request holds at most
/// `maximumCount` changes and at most `byteBudget` bytes in all, unless one change alone is larger (it
/// then goes alone): a hundred large records never make one request of a hundred megabytes.
enum RequestBatches {
    /// The bytes of fields one request carries at most (one larger change goes alone): a quarter of the native
    /// API's 2 MB, which leaves room for the JSON around them and for base64 (a third more for bytes).
    static let byteBudget = 512 * 1_024

    /// `changes` in order, cut into requests of at most `maximumCount` changes and at most `byteBudget`
    /// bytes as `size` counts them, but for a change larger than that, which goes alone.
    static func cut<Change>(
        _ changes: [Change], maximumCount: Int, byteBudget: Int, size: (Change) -> Int
    ) -> [[Change]] {
        var batches: [[Change]] = []
        var batch: [Change] = []
        var bytes = 0
        for change in changes {
            let changeBytes = size(change)
            if !batch.isEmpty, batch.count >= maximumCount || bytes + changeBytes > byteBudget {
                batches.append(batch)
                batch = []
                bytes = 0
            }
            batch.append(change)
            bytes += changeBytes
        }
        if !batch.isEmpty { batches.append(batch) }
        return batches
    }
}

/// The rules for article IDs, checked before any mutation is written.
///
/// An article ID is a non-empty string of at most 256 UTF-8 bytes with no control characters.
///
/// An entry's record is named by its article ID (`rl-<articleID>`, `rh-<articleID>`), and CloudKit takes
/// record names of printable ASCII only, at most 255 characters (`CKRecord.ID`). An ID with other
/// characters, or longer than 252 bytes, is kept on the device, but its changes are refused without being
/// sent and parked (``SyncContext/refusedChanges()``): such an entry does not sync.
public enum ArticleID {
    /// The longest article ID accepted, in UTF-8 bytes.
    public static let maximumUTF8Length = 256

    /// Throws ``FlatSyncError/Code-swift.struct/invalidArticleID`` unless `id` is a valid article ID.
    public static func validate(_ id: String) throws(FlatSyncError) {
        if id.isEmpty {
            throw FlatSyncError(.invalidArticleID, "An article ID must not be empty.")
        }
        let length = id.utf8.count
        if length > maximumUTF8Length {
            throw FlatSyncError(
                .invalidArticleID,
                "The article ID is \(length) UTF-8 bytes long; the limit is \(maximumUTF8Length)."
            )
        }
        // ASCII, the usual case, has its control characters below 0x20 and at 0x7F; looking up the general
        // category of every scalar cost more than the rest of a batch mutation's bookkeeping. The bytes are
        // read in place from the string's contiguous buffer (no copy, no iterator); a string with no
        // contiguous UTF-8 (bridged, on Darwin) takes the scalar path.
        let printableASCII = id.utf8.withContiguousStorageIfAvailable { $0.allSatisfy { $0 >= 0x20 && $0 < 0x7F } }
        if printableASCII == true { return }
        for scalar in id.unicodeScalars where scalar.properties.generalCategory == .control {
            let hex = String(scalar.value, radix: 16, uppercase: true)
            throw FlatSyncError(
                .invalidArticleID,
                "The article ID contains the control character U+\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex)."
            )
        }
    }

    /// True when `id` is a valid article ID.
    public static func isValid(_ id: String) -> Bool {
        (try? validate(id)) != nil
    }
}

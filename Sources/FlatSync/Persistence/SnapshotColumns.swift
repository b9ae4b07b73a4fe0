#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The packed columns of a snapshot, each read through a ``ColumnCursor``; it remembers each column's CRC
/// for the file's checksum.
package struct SnapshotColumns: ~Copyable {
    let source: any SnapshotSource
    let ranges: [String: Range<Int>]
    /// Each column's CRC-32, once a cursor has read all of it.
    var checksums: [String: UInt32] = [:]

    init(source: any SnapshotSource, ranges: [String: Range<Int>]) {
        self.source = source
        self.ranges = ranges
    }

    /// True when the snapshot has a column `name`.
    package func has(_ name: String) -> Bool { ranges[name] != nil }

    /// The most items a snapshot with these columns can hold: every item takes at least one byte of the
    /// column `name`. Reserve no more than this for the count a damaged header claims.
    package func itemLimit(_ name: String) -> Int { ranges[name]?.count ?? 0 }

    /// A cursor over the column `name`.
    package func cursor(_ name: String) throws(FlatSyncError) -> ColumnCursor {
        guard let range = ranges[name] else { throw FlatSyncError(.damagedFile, "The snapshot has no column \(name).") }
        return ColumnCursor(source: source, range: range, name: name)
    }

    /// Records that `cursor` read its whole column, failing if values are left over.
    package mutating func finish(_ cursor: consuming ColumnCursor) throws(FlatSyncError) {
        guard cursor.isAtEnd else {
            throw FlatSyncError(.damagedFile, "The column \(cursor.name) holds more values than the snapshot's count.")
        }
        checksums[cursor.name] = cursor.checksum
    }
}

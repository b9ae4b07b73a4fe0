#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A value a store keeps per article and syncs as one record: ``ReadingListEntry`` or
/// ``ReadingHistoryItem``.
///
/// Each type fixes its zone, record type and record-name prefix (see <doc:Architecture>), converts to and from
/// ``Record``, and merges two versions of itself (see <doc:HowSyncWorks>). Merging is commutative, associative and
/// idempotent, so devices converge whatever order changes arrive in.
package protocol SyncedItem: Hashable, Sendable {
    /// The zone the item's records live in.
    static var zone: ZoneID { get }
    /// The record type, such as `ReadingListEntry`.
    static var recordType: String { get }
    /// The prefix of record names, such as `rl-`.
    static var recordNamePrefix: String { get }

    /// The article the item is about.
    var articleID: String { get }
    /// The item as a record without a change tag.
    var record: Record { get }
    /// Reads an item from a record, failing with ``FlatSyncError/Code-swift.struct/malformedRecord``
    /// when a required field is missing or has the wrong type.
    init(record: Record) throws(FlatSyncError)
    /// The item that results from merging two versions of it.
    func merged(with other: Self) -> Self
}

extension SyncedItem {
    /// The ID of the record for an article.
    package static func recordID(for articleID: String) -> RecordID {
        RecordID(zone: zone, name: recordName(for: articleID))
    }

    /// The prefix and the article ID, written into one new string: `+` went through the general append
    /// (growing a copy of the prefix), a fifth of the cost of making a batch's change.
    private static func recordName(for articleID: String) -> String {
        var articleID = articleID
        return articleID.withUTF8 { recordName(articleUTF8: UnsafeRawBufferPointer($0)) }
    }

    /// The record name of the article whose ID is these UTF-8 bytes: the prefix followed by the bytes.
    package static func recordName(articleUTF8 articleID: UnsafeRawBufferPointer) -> String {
        let prefix = recordNamePrefix.utf8
        return String(unsafeUninitializedCapacity: prefix.count + articleID.count) { buffer in
            var index = 0
            for byte in prefix {
                buffer[index] = byte
                index += 1
            }
            for byte in articleID {
                buffer[index] = byte
                index += 1
            }
            return index
        }
    }

    /// The ID of the item's record.
    package var recordID: RecordID { Self.recordID(for: articleID) }

    /// The article ID a record name stands for, or `nil` for a name without the prefix.
    ///
    /// By bytes, not characters: an article ID may begin with a combining mark, which joins the prefix's `-`
    /// into one character, so `hasPrefix` missed the prefix of such a record's name (and replaying the log
    /// dropped the record). The prefix is ASCII, so the bytes after it are a whole string.
    static func articleID(fromRecordName name: String) -> String? {
        let prefix = recordNamePrefix.utf8
        guard name.utf8.starts(with: prefix) else { return nil }
        return String(decoding: name.utf8.dropFirst(prefix.count), as: UTF8.self)
    }

    /// The key under which ``RecordChangeHub`` tells the store's observers (``ReadingList/changes()``,
    /// ``ReadingHistory/changes()``) about the record named `name`: the item type's record type and the
    /// article's ID; `nil` for a name without the prefix.
    static func observedKey(ofRecordNamed name: String) -> (recordType: String, name: String)? {
        articleID(fromRecordName: name).map { (recordType, $0) }
    }
}

/// Readers of typed fields that fail with a clear message, for ``SyncedItem/init(record:)``.
extension Record {
    func requiredString(_ key: String) throws(FlatSyncError) -> String {
        guard let value = fields[key]?.stringValue else { throw missing(key, "string") }
        return value
    }

    func requiredDate(_ key: String) throws(FlatSyncError) -> Date {
        guard let value = fields[key]?.dateValue else { throw missing(key, "timestamp") }
        return value
    }

    func optionalDate(_ key: String) throws(FlatSyncError) -> Date? {
        guard let field = fields[key] else { return nil }
        guard let value = field.dateValue else { throw missing(key, "timestamp") }
        return value
    }

    func optionalString(_ key: String) throws(FlatSyncError) -> String? {
        guard let field = fields[key] else { return nil }
        guard let value = field.stringValue else { throw missing(key, "string") }
        return value
    }

    func int(_ key: String, default defaultValue: Int64 = 0) throws(FlatSyncError) -> Int64 {
        guard let field = fields[key] else { return defaultValue }
        guard let value = field.intValue else { throw missing(key, "integer") }
        return value
    }

    /// Checks the record's type and that its articleID field matches its name.
    func checkedArticleID<Item: SyncedItem>(for item: Item.Type) throws(FlatSyncError) -> String {
        guard type == Item.recordType else {
            throw FlatSyncError(.malformedRecord, "The record \(id) has type \(type), not \(Item.recordType).")
        }
        let articleID = try requiredString("articleID")
        guard id.name == Item.recordNamePrefix + articleID, id.zone == Item.zone else {
            throw FlatSyncError(
                .malformedRecord, "The record \(id) holds the article ID \(articleID), which does not match its name.")
        }
        try checkArticleID(articleID)
        return articleID
    }

    /// Checks that `articleID`, which the record holds, is a valid one (``ArticleID/validate(_:)``); the
    /// error is the record's (`malformedRecord`).
    func checkArticleID(_ articleID: String) throws(FlatSyncError) {
        do throws(FlatSyncError) {
            try ArticleID.validate(articleID)
        } catch {
            throw FlatSyncError(.malformedRecord, "The record \(id) holds an invalid article ID: \(error.message)")
        }
    }

    private func missing(_ key: String, _ type: String) -> FlatSyncError {
        FlatSyncError(.malformedRecord, "The record \(id) has no \(type) field \(key).")
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A value of the host app's own that FlatSync syncs as one CloudKit record: a note, a recipe, a favourite
/// search.
///
/// A type declares where its records live (``zone``), what they are called (``recordType``), the CloudKit
/// type of each field (``fieldTypes``, which also goes into the schema you deploy) and how a value maps to
/// fields and back. Register it when you open the store (``SyncContext/Configuration/recordTypes``, or
/// ``LocalStore/Options/recordTypes`` for a store alone), then read and write its values through
/// ``RecordStore``, with the guarantees of the built-in stores: a write returns once it is durable, changes
/// to one record coalesce field by field, and a ``SyncContext`` sends them, fetches other devices' changes
/// and merges conflicts. Dates are kept to the millisecond, as CloudKit keeps them: a value read back has
/// its dates rounded so.
///
/// ```swift
/// struct Note: SyncableRecord {
///     static let zone = ZoneID.readingList        // a reference must stay in its zone
///     static let recordType = "Note"
///     static let fieldTypes: [String: CloudSchema.FieldType] = [
///         "article": .reference, "text": .string, "created": .timestamp,
///     ]
///
///     var id: String
///     var articleID: String
///     var text: String
///     var created: Date
///
///     init(id: String = UUID().uuidString, articleID: String, text: String, created: Date = .now) {
///         (self.id, self.articleID, self.text, self.created) = (id, articleID, text, created)
///     }
///
///     var fields: [String: FieldValue] {
///         [
///             // Deleting the saved article deletes its notes, here and on every device.
///             "article": .reference(ReadingListEntry.reference(to: articleID, action: .deleteSelf)),
///             "text": .string(text), "created": .date(created),
///         ]
///     }
///
///     init(id: String, fields: RecordFields) throws(FlatSyncError) {
///         self.id = id
///         articleID = try ReadingListEntry.articleID(from: fields.reference("article"))
///         text = try fields.string("text")
///         created = try fields.date("created")
///     }
/// }
/// ```
///
/// **Fields** are those ``FieldValue`` holds: strings, integers (a `Bool` as 0 or 1), doubles, dates,
/// bytes, lists of them, and references to another record *of the same zone* (CloudKit allows no other),
/// with the action ``RecordReference/Action/none`` or ``RecordReference/Action/deleteSelf``. A field the
/// value leaves out of ``fields`` is removed from the record; a field of the record that ``fieldTypes`` does
/// not declare (another client wrote it) is kept and left to the server, until a delete of the record
/// forgets it (a save after the delete makes a new record).
///
/// **Codable values.** A type that is also `Codable` needs no mapping: each stored property but `id` is a
/// field of its name (see <doc:SyncingYourOwnRecords>).
///
/// **Merging.** When this device's change meets a newer version on the server,
/// ``merge(_:_:ancestor:changedFields:)`` decides; by default it calls ``merge(_:_:changedFields:)``, which
/// is three-way and field by field: the fields this device changed since the version it last knew keep
/// this device's values, every other field takes the server's. A rule that needs that version itself (a
/// counter, a set) overrides the first; one that does not, either.
public protocol SyncableRecord: Sendable, Equatable {
    /// The zone the records live in: a built-in zone, or one named with 1–64 ASCII letters, digits, `_`
    /// or `-`, not starting with `_` (CloudKit reserves those). A record may refer only to records of its
    /// own zone.
    static var zone: ZoneID { get }
    /// The CloudKit record type, such as `Note`: a letter, then letters, digits and `_` (CloudKit's rule).
    /// No two registered types may share one in a zone.
    static var recordType: String { get }
    /// The CloudKit type of each field the value writes, by key: the record type's schema. A key is a letter,
    /// then letters, digits and `_` (CloudKit's rule). Declare optional properties too: a `Codable` type's
    /// save is refused for a property missing here even while it is nil.
    static var fieldTypes: [String: CloudSchema.FieldType] { get }
    /// How long a ``SyncContext`` waits after a change before it sends the zone's changes; each new change
    /// of the type starts the wait again, so a burst of edits (typing, a slider) goes out as one request.
    /// Zero, the default, sends at once. A ``SyncContext/syncNow()`` sends without waiting, and a change
    /// that another store in the zone sends at once takes these along.
    static var sendDebounce: Duration { get }

    /// The record's name, unique in its zone (among the records of every type there) and stable for the life
    /// of the value: 1–255 printable ASCII characters, not starting with `_` (CloudKit's rule for record
    /// names), such as a UUID string. A save that meets another type's record of its name on the server (made
    /// on another device) is parked (see ``RefusedChange``).
    var id: String { get }
    /// The value's fields, by key, each of the type ``fieldTypes`` declares. A `Codable` type gets this
    /// from its conformance (each stored property but `id` is a field of its name, a property of a type
    /// CloudKit has no field for as its JSON); it throws ``FlatSyncError/Code-swift.struct/invalidArgument``
    /// for a property that cannot be encoded.
    var fields: [String: FieldValue] { get throws(FlatSyncError) }
    /// Reads a value back from its record's name and fields; throws
    /// ``FlatSyncError/Code-swift.struct/malformedRecord`` when a field is missing or of the wrong type
    /// (``RecordFields`` throws that for you). ``RecordStore/values()`` may call it on two threads at
    /// once, each for its own records, so it must not depend on which thread calls it.
    init(id: String, fields: RecordFields) throws(FlatSyncError)

    /// The value to keep when `mine`, this device's version with its unsent changes, meets `server`, a newer
    /// version another device saved: when a push meets it on the server, and when a fetch brings it while
    /// the change waits to be sent. The default is ``fieldwiseMerge(_:_:changedFields:)``. An override can
    /// call that for the fields it has no rule for. It may be called more than once for one change, so it
    /// must give the same value for the same arguments.
    ///
    /// `changedFields` are the keys of ``fields`` (property names, for a `Codable` type) that this device's
    /// unsent saves changed: each key a save changed counts, even when a later save set it back.
    static func merge(_ mine: Self, _ server: Self, changedFields: Set<String>) -> Self

    /// ``merge(_:_:changedFields:)`` with the common ancestor of the two versions. FlatSync calls this
    /// requirement; the default calls ``merge(_:_:changedFields:)``, so a type overrides one of the two (with
    /// this exact signature, `ancestor` optional: a near miss compiles and is never called). Override this
    /// one when a field's rule needs the ancestor:
    ///
    /// - a counter adds both sides' increments: `server.count + mine.count - ancestor.count`;
    /// - a set keeps what either side added and drops what either removed.
    ///
    /// `ancestor` is the server's version this device's unsent changes stand on: the one they were made
    /// over, or a newer one they were since merged with or sent over. `server` came from it too (or is it,
    /// when it is this device's own write whose answer was lost).
    ///
    /// `ancestor` is nil when this device does not know that version:
    ///
    /// - it made the record (or deleted it and made it again) and the server has another of the name;
    /// - a save of it whose answer was lost, or came from a gateway or a failing server rather than
    ///   CloudKit's own refusal, may lie under `server` or not;
    /// - it saved the record anew whole (for a zone the server lost, or with an owner whose edit beat its
    ///   delete);
    /// - the version does not read as a value;
    /// - the change was logged by a FlatSync that did not keep ancestors.
    ///
    /// A merge without an ancestor cannot tell every change apart: a counter that keeps the larger count
    /// then leaves an increment out rather than count one twice.
    static func merge(_ mine: Self, _ server: Self, ancestor: Self?, changedFields: Set<String>) -> Self
}

extension SyncableRecord {
    /// Zero: changes are sent at once.
    public static var sendDebounce: Duration { .zero }

    /// ``fieldwiseMerge(_:_:changedFields:)``: the fields this device changed keep its values, every other
    /// field takes the server's.
    public static func merge(_ mine: Self, _ server: Self, changedFields: Set<String>) -> Self {
        fieldwiseMerge(mine, server, changedFields: changedFields)
    }

    /// ``merge(_:_:changedFields:)``, without the ancestor.
    public static func merge(_ mine: Self, _ server: Self, ancestor: Self?, changedFields: Set<String>) -> Self {
        merge(mine, server, changedFields: changedFields)
    }

    /// Three-way and field by field: `mine`'s value of each field in `changedFields` (what this device
    /// changed and has not sent), `server`'s of every other; `mine` whole if either's `fields` throws.
    /// The default ``merge(_:_:changedFields:)``, for an override to build on.
    public static func fieldwiseMerge(_ mine: Self, _ server: Self, changedFields: Set<String>) -> Self {
        guard var fields = try? server.fields, let own = try? mine.fields else { return mine }
        for key in changedFields { fields[key] = own[key] }
        return (try? Self(id: mine.id, fields: RecordFields(fields, recordName: mine.id))) ?? mine
    }

    /// The ID of the record of the value named `id`.
    public static func recordID(_ id: String) -> RecordID {
        RecordID(zone: zone, name: id)
    }

    /// A reference to the record of the value named `id`, for a field of another record of the zone. The
    /// record's name is the value's ID, so a reference read back gives the ID as its
    /// ``RecordReference/recordName``.
    public static func reference(to id: String, action: RecordReference.Action = .none) -> RecordReference {
        RecordReference(recordName: id, action: action)
    }
}

extension ReadingListEntry {
    /// A reference to the reading-list entry of an article, for a field of a host record in the
    /// ``ZoneID/readingList`` zone; with ``RecordReference/Action/deleteSelf``, unsaving the article
    /// deletes the record that holds it.
    public static func reference(to articleID: String, action: RecordReference.Action = .none) -> RecordReference {
        RecordReference(recordName: recordID(for: articleID).name, action: action)
    }

    /// The article an entry reference points at (see ``reference(to:action:)``); throws
    /// ``FlatSyncError/Code-swift.struct/malformedRecord`` for a reference to anything else.
    public static func articleID(from reference: RecordReference) throws(FlatSyncError) -> String {
        guard reference.zoneName == nil || reference.zoneName == zone.name,
            let articleID = articleID(fromRecordName: reference.recordName)
        else {
            throw FlatSyncError(.malformedRecord, "The reference \(reference) is not to a reading-list entry.")
        }
        return articleID
    }
}

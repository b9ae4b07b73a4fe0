/// The record types of every store: the two built-in ones (the reading list's and the history's) and the
/// host-defined ones a store was opened with (``LocalStore/Options/recordTypes``), checked and kept without
/// their Swift types, so that the engine below the stores deals in records only.
package struct RecordTypeRegistry: Sendable {
    /// One store's record type.
    package struct Entry: Sendable {
        package let zone: ZoneID
        package let recordType: String
        package let fieldTypes: [String: CloudSchema.FieldType]
        /// Throws ``FlatSyncError/Code-swift.struct/malformedRecord`` when the record does not read as a value.
        package let check: @Sendable (Record) throws(FlatSyncError) -> Void
        /// The merge of this device's version (`mine`, changed in `changedFields` since `ancestor`, when that
        /// is known) with the server's, by the store's rule; nil when either does not read as a value.
        package let merge:
            @Sendable (_ mine: Record, _ server: Record, _ ancestor: Record?, _ changedFields: Set<String>) -> Record?
        /// The record with only the fields the store's values use, or nil when the store keeps every field of
        /// its records (a host's) or the record does not read.
        package let known: @Sendable (Record) -> Record?
        /// The prefix of every record name a built-in store keeps (`rl-`, `rh-`); its zone's other records are
        /// host records. Nil for a host type, whose names are the host's.
        package var claimedNamePrefix: String? = nil
    }

    /// The name prefixes of the built-in stores, by zone: looked up for every record a sync sends or fetches,
    /// without copying an entry.
    private static let builtInPrefixes = builtIn.compactMapValues(\.claimedNamePrefix)

    /// True when the record is a built-in store's, false when it is a host record.
    package static func isBuiltIn(_ id: RecordID) -> Bool {
        guard let prefix = builtInPrefixes[id.zone] else { return false }
        return id.name.utf8.starts(with: prefix.utf8)
    }

    /// The built-in stores' entries, by zone: the reading list's and the history's, which merge by their
    /// items' rules (see <doc:HowSyncWorks>) and keep the fields other clients wrote apart from their items.
    private static let builtIn: [ZoneID: Entry] = [
        ReadingListEntry.zone: builtInEntry(for: ReadingListEntry.self),
        ReadingHistoryItem.zone: builtInEntry(for: ReadingHistoryItem.self),
    ]

    private static func builtInEntry<Item: SyncedItem>(for type: Item.Type) -> Entry {
        Entry(
            zone: Item.zone, recordType: Item.recordType,
            fieldTypes: CloudSchema.flatSync.recordTypes[Item.recordType] ?? [:],
            check: { (record) throws(FlatSyncError) in _ = try Item(record: record) },
            merge: { mine, server, _, _ in
                guard let mine = try? Item(record: mine), let theirs = try? Item(record: server) else { return nil }
                return mine.merged(with: theirs).record
            },
            known: { record in (try? Item(record: record))?.record }, claimedNamePrefix: Item.recordNamePrefix)
    }

    /// The entries by zone, then by record type.
    private let entries: [ZoneID: [String: Entry]]
    /// The zones that hold host records only, sorted: every registered zone but the built-in ones.
    package let hostZones: [ZoneID]

    /// The longest zone name a host may use; CloudKit documents no limit, and a snapshot's file is named
    /// after its zone.
    package static let maximumZoneNameLength = 64

    /// Checks and keeps `types`; throws ``FlatSyncError/Code-swift.struct/invalidArgument`` naming the first
    /// problem: a zone name that is not 1–64 ASCII letters, digits, `_` or `-` not starting with `_`; a record
    /// type that is not a CloudKit name (see ``isCloudKitName(_:)``), built in or registered twice in a zone;
    /// no fields, a field whose name is not a CloudKit name, or one named like FlatSync's own
    /// (``CloudSchema/lastModifiedByField``).
    package init(_ types: [any SyncableRecord.Type]) throws(FlatSyncError) {
        var entries: [ZoneID: [String: Entry]] = [:]
        for type in types {
            let entry = try Self.entry(for: type)
            guard entries[entry.zone]?[entry.recordType] == nil else {
                throw FlatSyncError(
                    .invalidArgument, "The record type \(entry.recordType) is registered twice in zone \(entry.zone).")
            }
            entries[entry.zone, default: [:]][entry.recordType] = entry
        }
        self.entries = entries
        hostZones = entries.keys.filter { !ZoneID.builtIn.contains($0) }.sorted()
    }

    /// True when `name` is one CloudKit takes for a record type or a field: "one or more alphanumeric
    /// characters", starting with a letter, underscores allowed, no spaces (the documentation of
    /// `CKRecord.init(recordType:zoneID:)` and `CKRecord.setObject(_:forKey:)`), read as ASCII.
    package static func isCloudKitName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first.isASCIILetter else { return false }
        return name.utf8.allSatisfy {
            $0.isASCIILetter || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_")
        }
    }

    /// True for an ASCII letter, digit, `_` or `-`.
    private static func isZoneNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    private static func entry<Value: SyncableRecord>(for type: Value.Type) throws(FlatSyncError) -> Entry {
        let zone = Value.zone
        let name = zone.name
        // CloudKit documents zone names as up to 255 ASCII characters not starting with an underscore
        // (CKRecordZone.ID.init(zoneName:ownerName:)); a snapshot's file is named after the zone too.
        guard !name.isEmpty, name.utf8.count <= maximumZoneNameLength,
            name.utf8.allSatisfy(isZoneNameByte), name.utf8.first != UInt8(ascii: "_")
        else {
            throw FlatSyncError(
                .invalidArgument,
                "The zone name \"\(name)\" of \(Value.self) is not 1–\(maximumZoneNameLength) ASCII letters, digits, "
                    + "_ or -, not starting with _.")
        }
        let recordType = Value.recordType
        guard isCloudKitName(recordType), CloudSchema.flatSync.recordTypes[recordType] == nil else {
            throw FlatSyncError(
                .invalidArgument,
                "\(Value.self) may not use the record type \"\(recordType)\": it must be ASCII letters, digits and _, "
                    + "starting with a letter, and not one of FlatSync's.")
        }
        if let key = Value.fieldTypes.keys.sorted().first(where: { !isCloudKitName($0) }) {
            throw FlatSyncError(
                .invalidArgument,
                "\(Value.self) declares the field \"\(key)\": a field name must be ASCII letters, digits and _, "
                    + "starting with a letter.")
        }
        for (key, type) in Value.fieldTypes.sorted(by: { $0.key < $1.key }) {
            if let problem = type.declarationProblem {
                throw FlatSyncError(.invalidArgument, "\(Value.self) declares the field \"\(key)\" \(problem).")
            }
        }
        guard !Value.fieldTypes.isEmpty, Value.fieldTypes[CloudSchema.lastModifiedByField] == nil else {
            throw FlatSyncError(
                .invalidArgument,
                "\(Value.self) must declare at least one field, and none named \(CloudSchema.lastModifiedByField).")
        }
        return Entry(
            zone: zone, recordType: recordType, fieldTypes: Value.fieldTypes,
            check: { (record) throws(FlatSyncError) in _ = try Value(record: record) },
            merge: { local, server, ancestor, changed in
                guard let mine = try? Value(record: local), let theirs = try? Value(record: server) else { return nil }
                // An ancestor that does not read (a field the type requires was not there yet) is not known.
                let common = ancestor.flatMap { try? Value(record: $0) }
                var merged = server
                if let fields = try? RecordStore<Value>.fields(
                    of: Value.merge(mine, theirs, ancestor: common, changedFields: changed), over: server)
                {
                    merged.fields = fields
                } else {
                    // The merged value does not encode (a change logged before its type's fields were checked
                    // as now, say): the fields this device changed keep its values, over the server's record,
                    // rather than the change giving way to the server's version whole.
                    var fields = server.fields
                    let own = local.fields
                    for key in changed { fields[key] = own[key] }
                    merged.fields = fields
                }
                return merged
            },
            known: { _ in nil })
    }

    /// The entry of the store a record belongs to: a built-in store's for a record of its type in its zone,
    /// else a registered host type's, if any.
    package func store(of record: Record) -> Entry? {
        if let builtIn = Self.builtIn[record.id.zone], builtIn.recordType == record.type { return builtIn }
        return entry(for: record)
    }

    /// The entry of a record's host-defined type in its zone, if one is registered.
    package func entry(for record: Record) -> Entry? {
        entries[record.id.zone]?[record.type]
    }

    /// The entry of the host-defined `recordType` in `zone`, if one is registered.
    package func entry(zone: ZoneID, recordType: String) -> Entry? {
        entries[zone]?[recordType]
    }
}

extension SyncableRecord {
    /// Reads a value from its record, checking the type.
    init(record: Record) throws(FlatSyncError) {
        guard record.type == Self.recordType, record.id.zone == Self.zone else {
            throw FlatSyncError(
                .malformedRecord, "The record \(record.id) of type \(record.type) is not a \(Self.recordType).")
        }
        try self.init(id: record.id.name, fields: RecordFields(record.fields, recordName: record.id.name))
    }
}

extension UInt8 {
    /// True for an ASCII letter.
    fileprivate var isASCIILetter: Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self)
    }
}

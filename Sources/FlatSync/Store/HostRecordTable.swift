#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The records of a zone that belong to host-defined stores (see ``SyncableRecord``), and their change
/// tags: what a ``ZoneState`` keeps beside its built-in items.
///
/// Records are kept as fields, never as the host's values: the engine below the ``RecordStore`` API deals
/// in records, fields and bytes only, and a record of a type no store on this device registered (a later
/// version of the app wrote it) is kept whole rather than dropped.
///
/// A record's field values are kept encoded, in the command log's field codec and in the order of its
/// sorted keys, in one byte buffer that every record shares (``RecordFields`` reads a field from there
/// when asked): opening a store copies a snapshot's section into that buffer and checks it, and makes no
/// value, array or dictionary per record.
/// Each record is one fixed-size entry — its name inline up to 22 bytes (``CompactString``), its type and
/// set of keys as numbers, where its fields are in the buffer, its change tag packed in a word — found by
/// name through a ``SlotIndex``.
@usableFromInline package struct HostRecordTable: Sendable {
    /// One record, without its fields' bytes (see ``HostRecordTable/fields(of:)``).
    @usableFromInline package struct Entry: Sendable {
        fileprivate var compactName: CompactString
        /// The record type, as its number in ``HostRecordTable/types``.
        @usableFromInline package var type: UInt32
        /// The field keys, as their number in ``HostRecordTable/shapes``.
        fileprivate var shape: UInt32
        /// Where the record's field values (in its shape's key order) are in ``HostRecordTable/arena``.
        fileprivate var start: Int
        fileprivate var end: Int
        /// The last change tag seen from the server: 0 for none, else packed
        /// (``ChangeTagTable/packedWord(_:)``), or ``HostRecordTable/unpackedTag`` when the table's
        /// `unpackedTags` holds it.
        fileprivate var tagWord: UInt64 = 0

        /// The record's name.
        @usableFromInline package var name: String { compactName.string }
    }

    /// The tag word of an entry whose tag does not pack (no packed tag has a byte of 0x80 or more).
    private static let unpackedTag = UInt64.max

    /// The zone of the records (nil until the first is stored).
    private var zone: ZoneID?
    /// Every record, in no set order.
    @usableFromInline package private(set) var entries: [Entry] = []
    /// Each entry's field values, one after another, in its shape's key order.
    private var arena: [UInt8] = []
    /// The bytes of `arena` that no entry uses any more (fields replaced or removed).
    private var garbage = 0
    /// The record types the entries name, each once.
    private var types: [String] = []
    /// The sets of field keys (each sorted) the entries name, each once.
    private var shapes: [[String]] = []
    /// Finds an entry by name (a hash of its name's bytes, see ``HistoryTable/hash(of:)``).
    private var index = SlotIndex()
    /// The tags of entries that do not pack into a word, by name.
    private var unpackedTags: [String: ChangeTag] = [:]
    /// The tags of records this zone no longer has: a record deleted locally keeps its tag until the
    /// server confirms the delete, because the delete is sent with it.
    private var looseTags: [String: ChangeTag] = [:]
    /// The names of the records whose `deleteSelf` reference points at a record of their own zone, by the
    /// target's name: kept as records are set, so that a delete finds what it takes along without reading
    /// every record.
    private var dependentsByTarget: [String: Set<String>] = [:]

    package init() {}

    /// True when the table holds no record and no tag.
    package var isEmpty: Bool { entries.isEmpty && looseTags.isEmpty }

    /// The number of records.
    @usableFromInline package var count: Int { entries.count }

    /// The number of `recordType` in ``types``, if an entry ever had that type.
    @usableFromInline package func typeNumber(_ recordType: String) -> UInt32? {
        types.firstIndex(of: recordType).map { UInt32($0) }
    }

    /// The record type of an entry.
    package func recordType(of entry: Entry) -> String { types[Int(entry.type)] }

    /// An entry's fields, for a value to read without building a dictionary.
    package func fields(of entry: Entry) -> RecordFields {
        fields(of: entry, name: entry.name)
    }

    /// An entry's fields, given its name (to make the name's `String` once).
    package func fields(of entry: Entry, name: String) -> RecordFields {
        fields(of: entry, name: name, in: encodedFields())
    }

    /// The shapes and bytes every entry's fields read from, as one object (see ``EncodedRecordFields``).
    @usableFromInline package func encodedFields() -> EncodedRecordFields {
        EncodedRecordFields(shapes: shapes, bytes: arena)
    }

    /// An entry's fields, read from `encoded` (what ``encodedFields()`` returned for this table).
    @usableFromInline package func fields(of entry: Entry, name: String, in encoded: EncodedRecordFields)
        -> RecordFields
    {
        RecordFields(encoded: encoded, shape: Int(entry.shape), range: entry.start..<entry.end, recordName: name)
    }

    /// An entry's record, without its change tag.
    package func record(of entry: Entry) -> Record {
        Record(
            id: RecordID(zone: zone ?? ZoneID(""), name: entry.name), type: recordType(of: entry),
            fields: fields(of: entry).all)
    }

    /// The number of a type, adding it.
    private mutating func number(ofType type: String) -> UInt32 {
        if let known = types.firstIndex(of: type) { return UInt32(known) }
        types.append(type)
        return UInt32(types.count - 1)
    }

    /// The number of a set of keys, adding it.
    private mutating func number(ofShape keys: [String]) -> UInt32 {
        if let known = shapes.lastIndex(of: keys) { return UInt32(known) }
        shapes.append(keys)
        return UInt32(shapes.count - 1)
    }

    /// The fewest entries for which ``values(of:)`` makes values on two threads: below it, the hand-off
    /// costs more than the second core saves.
    @usableFromInline package static let valuesOnTwoThreadsMinimum = 4_096

    /// How many pieces ``values(of:)`` cuts a large table into for its two threads to take in turn: the
    /// second thread ran about half as fast as the calling one when each took half (measured on a 2-core
    /// VM, 10k records), so each takes pieces until none are left.
    @usableFromInline static let valuesPieces = 16

    /// Every record of `Value`'s type that reads as a value, in no set order.
    ///
    /// A large table's values are made on two threads, each piece of the entries into its own part of the
    /// result (see ``ForkJoin``): a cold start reads every record, and a phone has a second core.
    @inlinable package func values<Value: SyncableRecord>(of _: Value.Type) -> [Value] {
        let count = count
        // An empty array's storage need not have an address.
        guard let type = typeNumber(Value.recordType), count > 0 else { return [] }
        // Each value is made in its place in the array rather than appended.
        return [Value](unsafeUninitializedCapacity: count) { buffer, initialized in
            let result = ValuesBuffer(base: buffer.baseAddress!)
            guard count >= Self.valuesOnTwoThreadsMinimum, ForkJoin.isWorthForking else {
                initialized = makeValues(Value.self, type: type, entries: 0..<count, into: result)
                return
            }
            let pieces = Self.valuesPieces
            let bounds = { @Sendable (piece: Int) in count * piece / pieces }
            let made = ForkJoin.map(pieces: pieces) { piece in
                makeValues(Value.self, type: type, entries: bounds(piece)..<bounds(piece + 1), into: result)
            }
            // Each piece's values move down to follow the ones before, without a copy of their strings.
            for (piece, made) in made.enumerated() {
                if initialized < bounds(piece) {
                    (result.base + initialized).moveInitialize(from: result.base + bounds(piece), count: made)
                }
                initialized += made
            }
        }
    }

    /// Makes the values of the entries at `positions` that have type `type` and read as values, at
    /// `result`'s positions from `positions.lowerBound` on, and returns how many it made.
    @inlinable func makeValues<Value: SyncableRecord>(
        _: Value.Type, type: UInt32, entries positions: Range<Int>, into result: ValuesBuffer<Value>
    ) -> Int {
        // Its own object for the fields to refer to: two threads retaining one object would contend for it.
        let encoded = encodedFields()
        var made = 0
        for position in positions where entries[position].type == type {
            let entry = entries[position]
            let name = entry.name
            guard let value = try? Value(id: name, fields: fields(of: entry, name: name, in: encoded)) else {
                continue
            }
            (result.base + positions.lowerBound + made).initialize(to: value)
            made += 1
        }
        return made
    }

    /// Where ``values(of:)`` makes its values: the result array's storage, which two threads fill at once.
    @usableFromInline struct ValuesBuffer<Value>: @unchecked Sendable {
        // @unchecked: a pointer, and each piece initializes its own range of it (``makeValues``), which no
        // other piece touches; `ForkJoin.map` returns only after every piece is done.
        @usableFromInline let base: UnsafeMutablePointer<Value>

        @usableFromInline init(base: UnsafeMutablePointer<Value>) { self.base = base }
    }

    // MARK: - Finding by name

    private static func hash(of name: CompactString) -> UInt32 { HistoryTable.hash(of: name) }

    /// The position of the entry named `name` and its slot in the index, with the name's hash.
    private func find(_ name: CompactString) -> (position: Int?, slot: Int?, hash: UInt32) {
        let hash = Self.hash(of: name)
        let found = index.find(hash: hash) { entries[$0].compactName == name }
        return (found.position, found.slot, hash)
    }

    private func position(of name: String) -> Int? {
        entries.isEmpty ? nil : find(CompactString(name)).position
    }

    /// The entry of the record named `name`.
    package func entry(_ name: String) -> Entry? {
        position(of: name).map { entries[$0] }
    }

    /// True when the table has a record named `name`.
    package func contains(_ name: String) -> Bool { position(of: name) != nil }

    // MARK: - Changing

    /// The record named `name`, without its change tag; setting nil removes it (its tag stays).
    package subscript(name: String) -> Record? {
        get { entry(name).map { record(of: $0) } }
        set {
            guard let record = newValue else {
                remove(name)
                return
            }
            zone = zone ?? record.id.zone
            let fields = record.fields
            let keys = fields.keys.sorted()
            let start = arena.count
            var writer = BinaryWriter(capacity: 64)
            for key in keys { writer.write(fields[key]!, tags: .commandLog) }
            arena.append(contentsOf: writer.bytes)
            let compact = CompactString(name)
            var entry = Entry(
                compactName: compact, type: number(ofType: record.type), shape: number(ofShape: keys), start: start,
                end: arena.count)
            let found = find(compact)
            if let position = found.position {
                let old = entries[position]
                entry.tagWord = old.tagWord
                garbage += old.end - old.start
                unindexDependents(of: old)
                entries[position] = entry
            } else {
                if let tag = looseTags.removeValue(forKey: name) { entry.tagWord = packedWord(tag, name: name) }
                index.grow(toHold: entries.count + 1)
                index.insert(hash: found.hash, position: entries.count)
                entries.append(entry)
            }
            indexDependents(named: name, targets: ownerTargets(in: RecordReference.all(in: fields.values)))
            compactIfWasteful()
        }
    }

    /// Every record, without change tags.
    package var records: [Record] { entries.map { record(of: $0) } }

    private mutating func remove(_ name: String) {
        guard !entries.isEmpty else { return }
        let found = find(CompactString(name))
        guard let position = found.position, let slot = found.slot else { return }
        let removed = entries[position]
        unindexDependents(of: removed)
        index.remove(slot: slot)
        if let tag = tag(of: removed) { looseTags[name] = tag }
        unpackedTags[name] = nil
        garbage += removed.end - removed.start
        let last = entries.removeLast()
        if position < entries.count {
            index.move(hash: Self.hash(of: last.compactName), from: entries.count, to: position)
            entries[position] = last
        }
        compactIfWasteful()
    }

    /// Copies the fields still in use to a new buffer when more than half of it is unused.
    private mutating func compactIfWasteful() {
        guard garbage > 4096, garbage * 2 > arena.count else { return }
        var compacted: [UInt8] = []
        compacted.reserveCapacity(arena.count - garbage)
        for position in entries.indices {
            let start = compacted.count
            compacted.append(contentsOf: arena[entries[position].start..<entries[position].end])
            entries[position].start = start
            entries[position].end = compacted.count
        }
        arena = compacted
        garbage = 0
    }

    // MARK: - Change tags

    private func tag(of entry: Entry) -> ChangeTag? {
        switch entry.tagWord {
        case 0: return nil
        case Self.unpackedTag: return unpackedTags[entry.name]
        case let word: return ChangeTagTable.tag(packedIn: word)
        }
    }

    /// The word that stands for `tag` in an entry named `name`, keeping a tag that does not pack aside.
    private mutating func packedWord(_ tag: ChangeTag?, name: String) -> UInt64 {
        guard let tag else {
            unpackedTags[name] = nil
            return 0
        }
        if let word = ChangeTagTable.packedWord(tag) {
            unpackedTags[name] = nil
            return word
        }
        unpackedTags[name] = tag
        return Self.unpackedTag
    }

    /// The change tag of the record named `name`, whether the table has the record or not.
    package func changeTag(of name: String) -> ChangeTag? {
        if let position = position(of: name) { return tag(of: entries[position]) }
        return looseTags.isEmpty ? nil : looseTags[name]
    }

    /// Sets the change tag of the record named `name`, or forgets it (nil).
    package mutating func setChangeTag(_ tag: ChangeTag?, of name: String) {
        if let position = position(of: name) {
            entries[position].tagWord = packedWord(tag, name: name)
        } else {
            looseTags[name] = tag
        }
    }

    /// Every change tag, by record name.
    package var changeTagsByName: [String: ChangeTag] {
        var tags = looseTags
        for entry in entries { if let tag = tag(of: entry) { tags[entry.name] = tag } }
        return tags
    }

    /// The name of every record and of every record with a tag.
    package var allNames: Set<String> {
        Set(entries.map(\.name)).union(looseTags.keys)
    }

    // MARK: - References

    /// The names of the records whose `deleteSelf` reference points at the record named `target` in their
    /// own zone: the records CloudKit deletes with it.
    package func dependents(of target: String) -> [String] {
        (dependentsByTarget[target] ?? []).filter { $0 != target }.sorted()
    }

    /// True when some record's `deleteSelf` reference points at a record of its zone.
    package var hasDependents: Bool { !dependentsByTarget.isEmpty }

    /// The name of every record a `deleteSelf` reference of the zone points at.
    package var ownerNames: Dictionary<String, Set<String>>.Keys { dependentsByTarget.keys }

    /// The targets of `references`' `deleteSelf` references within the table's zone.
    private func ownerTargets(in references: [RecordReference]) -> Set<String> {
        guard let zone else { return [] }
        var targets = Set<String>()
        for reference in references where reference.action == .deleteSelf && !reference.leaves(zone) {
            targets.insert(reference.recordName)
        }
        return targets
    }

    private func ownerTargets(of entry: Entry) -> Set<String> {
        ownerTargets(in: RecordReference.all(in: fields(of: entry).all.values))
    }

    private mutating func indexDependents(named name: String, targets: Set<String>) {
        for target in targets { dependentsByTarget[target, default: []].insert(name) }
    }

    private mutating func unindexDependents(of entry: Entry) {
        guard !dependentsByTarget.isEmpty else { return }
        for target in ownerTargets(of: entry) {
            dependentsByTarget[target]?.remove(entry.name)
            if dependentsByTarget[target]?.isEmpty == true { dependentsByTarget[target] = nil }
        }
    }

    /// The names of `targets` and of every record that a chain of `deleteSelf` references ties to one of
    /// them, each once, targets first: what deleting the targets deletes.
    package func cascade(from targets: [String]) -> [String] {
        guard !dependentsByTarget.isEmpty else { return targets }
        return targets + dependentsWithOwners(of: targets).map(\.name)
    }

    /// ``cascade(from:)`` with, for each record past the targets, its owner (see
    /// ``dependentsWithOwners(of:)``); nil for the targets.
    package func cascadeWithOwners(from targets: [String]) -> [(name: String, owner: String?)] {
        targets.map { ($0, nil) } + dependentsWithOwners(of: targets).map { ($0.name, $0.owner) }
    }

    /// The records past `targets` in ``cascade(from:)``, each with the record whose delete takes it: one it
    /// refers to (`deleteSelf`) that the cascade reached first.
    package func dependentsWithOwners(of targets: [String]) -> [(name: String, owner: String)] {
        guard !dependentsByTarget.isEmpty else { return [] }
        var seen = Set(targets)
        var found: [(name: String, owner: String)] = []
        func visit(_ owner: String) {
            for dependent in dependents(of: owner) where seen.insert(dependent).inserted {
                found.append((dependent, owner))
            }
        }
        for target in targets { visit(target) }
        var next = 0
        while next < found.count {
            visit(found[next].name)
            next += 1
        }
        return found
    }
}

extension HostRecordTable: Equatable {
    /// Equal when they hold the same records and tags, in whatever order.
    @usableFromInline package static func == (lhs: HostRecordTable, rhs: HostRecordTable) -> Bool {
        guard lhs.entries.count == rhs.entries.count, lhs.looseTags == rhs.looseTags else { return false }
        return lhs.entries.allSatisfy { entry in
            guard let other = rhs.entry(entry.name) else { return false }
            return rhs.tag(of: other) == lhs.tag(of: entry)
                && rhs.record(of: other).hasSameContent(as: lhs.record(of: entry))
        }
    }
}

extension HostRecordTable {
    /// The table as a snapshot section (``SnapshotFile/hostRecordTable``): the record types, the sets of
    /// keys, the tags of records the zone no longer has (name and tag), then per record its name, its
    /// change tag (empty for none), the numbers of its type and its keys, and the byte count and bytes of
    /// its values in the command log's field codec. Strings are a varint byte count and UTF-8 bytes.
    package func encoded() -> Data {
        encodedSection().section
    }

    /// How many records apart ``encodedSection()`` notes where a record starts: often enough that a large
    /// section splits into many runs for two threads to take in turn, and for little (a few bytes per
    /// thousand records).
    package static let recordOffsetStride = 1_024

    /// The section (``encoded()``), and where every ``recordOffsetStride``th record starts in it
    /// (``SnapshotFile/hostRecordOffsets``): the byte offsets of records `stride`, `2 × stride` and so on,
    /// as varints, or nil when there are no more records than that.
    ///
    /// The offsets let a cold start read the section in many runs at once, none of which has to step over
    /// the records before it first (see ``decodeWithChecksum(_:zone:recordOffsets:)``).
    package func encodedSection() -> (section: Data, recordOffsets: Data?) {
        var writer = BinaryWriter(capacity: arena.count - garbage + entries.count * 24 + 64)
        var offsets = BinaryWriter()
        writer.write(varint: UInt64(types.count))
        for type in types { writer.write(type) }
        writer.write(varint: UInt64(shapes.count))
        for keys in shapes {
            writer.write(varint: UInt64(keys.count))
            for key in keys { writer.write(key) }
        }
        writer.write(varint: UInt64(looseTags.count))
        for name in looseTags.keys.sorted() {
            writer.write(name)
            writer.write(looseTags[name]!.rawValue)
        }
        writer.write(varint: UInt64(entries.count))
        arena.withUnsafeBytes { arena in
            for (position, entry) in entries.enumerated() {
                if position > 0 && position % Self.recordOffsetStride == 0 {
                    offsets.write(varint: UInt64(writer.bytes.count))
                }
                entry.compactName.withUTF8 { utf8 in
                    writer.write(varint: UInt64(utf8.count))
                    writer.write(raw: utf8)
                }
                writer.write(tag(of: entry)?.rawValue ?? "")
                writer.write(varint: UInt64(entry.type))
                writer.write(varint: UInt64(entry.shape))
                writer.write(varint: UInt64(entry.end - entry.start))
                writer.write(raw: UnsafeRawBufferPointer(rebasing: arena[entry.start..<entry.end]))
            }
        }
        return (writer.data, offsets.bytes.isEmpty ? nil : offsets.data)
    }

    /// Reads what ``encoded()`` wrote for the records of `zone`, checking every value as it goes without
    /// making values of them; throws ``FlatSyncError/Code-swift.struct/damagedFile`` for anything else.
    package static func decode(_ bytes: [UInt8], zone: ZoneID) throws(FlatSyncError) -> HostRecordTable {
        try decodeWithChecksum(bytes, zone: zone).table
    }

    /// The fewest records ``decodeWithChecksum(_:zone:recordOffsets:)`` reads on two threads: below it, the hand-off
    /// costs more than the second core saves.
    static let readOnTwoThreadsMinimum = 4_096

    /// What ``decode(_:zone:)`` reads, and the CRC-32 of `bytes` (``CRC32``).
    ///
    /// A large section is read on two cores, as a cold start reads every record and a phone has a second
    /// core: first its records, in runs that the two threads take in turn; then the name index, which needs
    /// every record, beside the checksum, which needs none of them.
    ///
    /// - Parameter recordOffsets: where every ``recordOffsetStride``th record starts, as
    ///   ``encodedSection()`` wrote them, or nil for a section written without them (before FlatSync kept
    ///   them), whose records one thread reads; its next snapshot has them. Offsets need no trust: each run
    ///   must end where the next one starts.
    package static func decodeWithChecksum(
        _ bytes: [UInt8], zone: ZoneID, recordOffsets: [UInt8]? = nil
    ) throws(FlatSyncError) -> (table: HostRecordTable, checksum: UInt32) {
        var table = HostRecordTable()
        table.zone = zone
        // The section's bytes become the values' buffer: each entry points at its values where they are.
        table.arena = bytes
        let (count, entriesStart) = try withReader(bytes) { (reader) throws(FlatSyncError) in
            try table.readHeader(&reader)
        }
        let offsets = try recordOffsets.map { (offsets) throws(FlatSyncError) in
            try Self.recordOffsets(offsets, records: count, entriesStart: entriesStart, sectionSize: bytes.count)
        }
        if count == 0 {
            // No records, only tags: nothing to read on two threads, and an empty array's storage need not
            // have an address.
            try table.buildIndex(hashes: [])
            table.garbage = bytes.count
            return (table, bytes.withUnsafeBytes { CRC32.checksum($0) })
        }
        let onTwoThreads = count >= readOnTwoThreadsMinimum && ForkJoin.isWorthForking
        let pieces = Self.pieces(records: count, entriesStart: entriesStart, offsets: onTwoThreads ? offsets : nil)
        let header = table
        var hashes = [UInt32](repeating: 0, count: count)
        var reads: [PieceRead] = []
        // Each run makes its entries in their places in the table's array: no copy of them afterwards.
        let entries = hashes.withUnsafeMutableBufferPointer { hashes in
            [Entry](unsafeUninitializedCapacity: count) { buffer, initialized in
                let output = DecodedEntries(entries: buffer.baseAddress!, hashes: hashes.baseAddress!)
                if pieces.count == 1 {
                    reads = [header.read(pieces[0], of: bytes, into: output)]
                } else {
                    reads = ForkJoin.map(pieces: pieces.count) { piece in
                        header.read(pieces[piece], of: bytes, into: output)
                    }
                }
                if reads.allSatisfy({ $0.failure == nil }) {
                    initialized = count
                } else {
                    for (piece, read) in zip(pieces, reads) {
                        (output.entries + piece.records.lowerBound).deinitialize(count: read.made)
                    }
                }
            }
        }
        if let failure = reads.lazy.compactMap(\.failure).first { throw failure }
        for (read, next) in zip(reads, pieces.dropFirst()) where read.end != next.start {
            throw FlatSyncError(.damagedFile, "The host records section's records do not follow one another.")
        }
        table.entries = entries
        for read in reads {
            table.unpackedTags.merge(read.unpackedTags) { $1 }
            table.dependentsByTarget.merge(read.dependentsByTarget) { $0.union($1) }
        }
        let (index, checksum) = indexAndChecksum(
            of: entries, hashes: hashes, bytes: bytes, onTwoThreads: onTwoThreads)
        guard let index else { throw FlatSyncError(.damagedFile, "A host record is listed twice.") }
        table.index = index
        try table.checkLooseTags()
        table.garbage = bytes.count - reads.reduce(0) { $0 + $1.valueBytes }
        return (table, checksum)
    }

    /// The record offsets of ``encodedSection()``, checked against the section they belong to: one per
    /// ``recordOffsetStride`` records after the first stride, each after the one before, all inside the
    /// records.
    private static func recordOffsets(
        _ bytes: [UInt8], records: Int, entriesStart: Int, sectionSize: Int
    ) throws(FlatSyncError) -> [Int] {
        var offsets: [Int] = []
        try withReader(bytes) { (reader) throws(FlatSyncError) in
            while !reader.isAtEnd {
                let offset = try reader.readVarint()
                guard offset > UInt64(offsets.last ?? entriesStart), offset < UInt64(sectionSize) else {
                    throw FlatSyncError(.damagedFile, "A host record offset, \(offset), is out of place.")
                }
                offsets.append(Int(offset))
            }
        }
        guard offsets.count == max(0, records - 1) / recordOffsetStride else {
            throw FlatSyncError(
                .damagedFile, "The section has \(records) host records but \(offsets.count) record offsets.")
        }
        return offsets
    }

    /// The runs a section of `records` records is read in: one per ``recordOffsetStride`` records when
    /// `offsets` says where each starts, else one.
    private static func pieces(records: Int, entriesStart: Int, offsets: [Int]?) -> [Piece] {
        let starts = [entriesStart] + (offsets ?? [])
        return starts.indices.map { run in
            let first = run * recordOffsetStride
            let last = run == starts.count - 1
            return Piece(
                records: first..<(last ? records : first + recordOffsetStride), start: starts[run], endsSection: last)
        }
    }

    /// How many pieces ``indexAndChecksum(of:hashes:bytes:onTwoThreads:)`` cuts the checksum into: enough
    /// that the thread not building the index takes most of them, whichever core runs faster.
    private static let checksumPieces = 8

    /// The name index of `entries` (nil when two have the same name) and the CRC-32 of `bytes`, on two
    /// threads at once when `onTwoThreads`: the index is one piece and the checksum several, and each
    /// thread takes the next piece as it finishes one.
    private static func indexAndChecksum(
        of entries: [Entry], hashes: [UInt32], bytes: [UInt8], onTwoThreads: Bool
    ) -> (SlotIndex?, UInt32) {
        @Sendable func index() -> SlotIndex? {
            var index = SlotIndex()
            guard index.build(hashes: hashes, same: { entries[$0].compactName == entries[$1].compactName }) else {
                return nil
            }
            return index
        }
        guard onTwoThreads else { return (index(), bytes.withUnsafeBytes { CRC32.checksum($0) }) }
        enum Result: Sendable {
            case index(SlotIndex?)
            case checksum(UInt32, length: Int)
        }
        let bounds = { @Sendable (piece: Int) in bytes.count * piece / checksumPieces }
        // The index first: it is the longest piece, so the other thread starts on the checksum at once.
        let results = ForkJoin.map(pieces: 1 + checksumPieces) { piece -> Result in
            guard piece > 0 else { return .index(index()) }
            let range = bounds(piece - 1)..<bounds(piece)
            return .checksum(
                bytes.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[range])) },
                length: range.count)
        }
        var index: SlotIndex?
        var checksum: UInt32 = 0
        for result in results {
            switch result {
            case .index(let built): index = built
            case .checksum(let piece, let length): checksum = CRC32.combine(checksum, piece, length: length)
            }
        }
        return (index, checksum)
    }

    /// A run of records in a section, which one thread reads (``decodeWithChecksum(_:zone:recordOffsets:)``).
    private struct Piece: Sendable {
        /// Which of the section's records it reads.
        var records: Range<Int>
        /// Where its first record starts.
        var start: Int
        /// True when its last record is the section's last.
        var endsSection: Bool
    }

    /// What reading a ``Piece`` found, besides its entries.
    private struct PieceRead: Sendable {
        /// The number of entries made (all of the piece's unless it failed).
        var made = 0
        var failure: FlatSyncError?
        /// Where its last record ends.
        var end = 0
        var unpackedTags: [String: ChangeTag] = [:]
        var dependentsByTarget: [String: Set<String>] = [:]
        /// The bytes of the entries' values.
        var valueBytes = 0
    }

    /// Where the pieces of a section put their entries and the hashes of their names.
    private struct DecodedEntries: @unchecked Sendable {
        // @unchecked: pointers into the table's new arrays, of which each run writes only its own records'
        // places; `ForkJoin.map` returns only after every run is done.
        let entries: UnsafeMutablePointer<Entry>
        let hashes: UnsafeMutablePointer<UInt32>
    }

    /// Reads `piece` of `bytes`, a section whose header this table holds, into `output`.
    private func read(_ piece: Piece, of bytes: [UInt8], into output: DecodedEntries) -> PieceRead {
        var read = PieceRead()
        // A table of its own for the tags that do not pack and the references it meets.
        var part = self
        part.arena = []
        do throws(FlatSyncError) {
            try Self.withReader(bytes) { (reader) throws(FlatSyncError) in
                try reader.skip(byteCount: piece.start)
                try part.readEntries(
                    &reader, records: piece.records, into: output, made: &read.made, valueBytes: &read.valueBytes)
                read.end = reader.offset
                guard !piece.endsSection || reader.isAtEnd else {
                    throw FlatSyncError(
                        .damagedFile, "The host records section has \(reader.remaining) bytes after its end.")
                }
            }
        } catch {
            read.failure = error
        }
        read.unpackedTags = part.unpackedTags
        read.dependentsByTarget = part.dependentsByTarget
        return read
    }

    /// Runs `body` with a reader over `bytes`.
    private static func withReader<T>(
        _ bytes: [UInt8], _ body: (inout BinaryReader) throws(FlatSyncError) -> T
    ) throws(FlatSyncError) -> T {
        let result = bytes.withUnsafeBytes { (buffer) -> Result<T, FlatSyncError> in
            var reader = BinaryReader(buffer)
            return Result { () throws(FlatSyncError) in try body(&reader) }
        }
        return try result.get()
    }

    /// Reads the types, the sets of keys and the loose tags, and returns the number of records that follow
    /// and where the first starts.
    private mutating func readHeader(_ reader: inout BinaryReader) throws(FlatSyncError) -> (count: Int, start: Int) {
        for _ in 0..<(try reader.readCount()) { types.append(try reader.readString()) }
        for _ in 0..<(try reader.readCount()) {
            var keys: [String] = []
            for _ in 0..<(try reader.readCount()) { keys.append(try reader.readString()) }
            guard zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) else {
                throw FlatSyncError(.damagedFile, "A host record's keys are out of order: \(keys).")
            }
            shapes.append(keys)
        }
        for _ in 0..<(try reader.readCount()) {
            let name = try reader.readString()
            looseTags[name] = ChangeTag(rawValue: try reader.readString())
        }
        let count = try reader.readCount()
        return (count, reader.offset)
    }

    /// Reads the records `records` of the section, making each one's entry at its place in `output` and
    /// counting them in `made` (so that a failure can unmake them) and their values' bytes in `valueBytes`.
    private mutating func readEntries(
        _ reader: inout BinaryReader, records: Range<Int>, into output: DecodedEntries, made: inout Int,
        valueBytes: inout Int
    ) throws(FlatSyncError) {
        let shapeSizes = shapes.map(\.count)
        var references: [RecordReference] = []
        for position in records {
            let (name, hash) = try reader.readStringBytes { utf8, isASCII in
                (CompactString(validUTF8: utf8), HistoryTable.hash(utf8: utf8, isASCII: isASCII))
            }
            // The tag packs into the entry's word without a `String` (CloudKit's do); an empty one is none.
            let tag = try reader.withStringBytes { (utf8) -> (word: UInt64, whole: String?) in
                if utf8.isEmpty { return (0, nil) }
                if let word = ChangeTagTable.packedWord(utf8: utf8) { return (word, nil) }
                return (0, String(decoding: utf8, as: UTF8.self))
            }
            let type = try reader.readVarint()
            let shape = try reader.readVarint()
            guard type < types.count, shape < shapeSizes.count else {
                throw FlatSyncError(.damagedFile, "The host record \(name) has type \(type) and keys \(shape).")
            }
            let length = try reader.readCount()
            let start = reader.offset
            for _ in 0..<shapeSizes[Int(shape)] {
                try reader.checkFieldValue(tags: .commandLog, references: &references)
            }
            guard reader.offset == start + length else {
                throw FlatSyncError(.damagedFile, "The values of host record \(name) are not \(length) bytes.")
            }
            var entry = Entry(
                compactName: name, type: UInt32(type), shape: UInt32(shape), start: start, end: reader.offset,
                tagWord: tag.word)
            if let whole = tag.whole { entry.tagWord = packedWord(ChangeTag(rawValue: whole), name: entry.name) }
            if !references.isEmpty {
                indexDependents(named: entry.name, targets: ownerTargets(in: references))
                references.removeAll()
            }
            output.hashes[position] = hash
            (output.entries + position).initialize(to: entry)
            made += 1
            valueBytes += entry.end - entry.start
        }
    }

    private mutating func buildIndex(hashes: [UInt32]) throws(FlatSyncError) {
        let entries = entries
        guard index.build(hashes: hashes, same: { entries[$0].compactName == entries[$1].compactName }) else {
            throw FlatSyncError(.damagedFile, "A host record is listed twice.")
        }
        try checkLooseTags()
    }

    /// Throws when a loose tag (of a record this zone no longer has) names a record it has.
    private func checkLooseTags() throws(FlatSyncError) {
        for (name, _) in looseTags where contains(name) {
            throw FlatSyncError(.damagedFile, "The host record \(name) is listed twice.")
        }
    }

    /// Reads the section the first version wrote (``SnapshotFile/hostRecords``): the number of names, then
    /// per name whether a record follows, the record's type and each field's key and value (keys sorted),
    /// and its change tag (empty for none).
    package static func decodeFirstVersion(_ data: Data, zone: ZoneID) throws(FlatSyncError) -> HostRecordTable {
        var table = HostRecordTable()
        table.zone = zone
        var hashes: [UInt32] = []
        try data.withBinaryReader { (reader) throws(FlatSyncError) in
            var keys: [String] = []
            var references: [RecordReference] = []
            for _ in 0..<(try reader.readCount()) {
                let name = try reader.readString()
                let hasRecord = try reader.readByte()
                guard hasRecord <= 1 else {
                    throw FlatSyncError(.damagedFile, "A host record's presence byte is \(hasRecord).")
                }
                if hasRecord == 1 {
                    let type = table.number(ofType: try reader.readString())
                    keys.removeAll()
                    let start = table.arena.count
                    for _ in 0..<(try reader.readCount()) {
                        keys.append(try reader.readString())
                        let valueStart = reader.offset
                        try reader.checkFieldValue(tags: .commandLog, references: &references)
                        data.withUnsafeBytes { table.arena.append(contentsOf: $0[valueStart..<reader.offset]) }
                    }
                    guard zip(keys, keys.dropFirst()).allSatisfy({ $0 < $1 }) else {
                        throw FlatSyncError(.damagedFile, "The fields of host record \(name) are out of order.")
                    }
                    let compact = CompactString(name)
                    table.entries.append(
                        Entry(
                            compactName: compact, type: type, shape: table.number(ofShape: keys), start: start,
                            end: table.arena.count))
                    hashes.append(Self.hash(of: compact))
                    if !references.isEmpty {
                        table.indexDependents(named: name, targets: table.ownerTargets(in: references))
                        references.removeAll()
                    }
                }
                let tagText = try reader.readString()
                let tag = tagText.isEmpty ? nil : ChangeTag(rawValue: tagText)
                if hasRecord == 1 {
                    table.entries[table.entries.count - 1].tagWord = table.packedWord(tag, name: name)
                } else if let tag {
                    table.looseTags[name] = tag
                }
            }
        }
        try table.buildIndex(hashes: hashes)
        return table
    }
}

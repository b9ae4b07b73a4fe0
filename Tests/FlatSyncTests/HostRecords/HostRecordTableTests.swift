import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// The table that keeps a zone's host records as encoded fields, and its snapshot section: pure, no disk.
@Suite("Host record table")
struct HostRecordTableTests {
    private static let zone = ZoneID("Recipes")

    private static func record(_ name: String, _ fields: [String: FieldValue], type: String = "Recipe") -> Record {
        Record(id: RecordID(zone: zone, name: name), type: type, fields: fields)
    }

    /// A table with what the section must carry: short and long names (inline and not), a name that is not
    /// ASCII, tags that pack and one that does not, a loose tag, two types, two sets of keys, every kind of
    /// value and a `deleteSelf` reference.
    private static func sampleTable() -> HostRecordTable {
        var table = HostRecordTable()
        table["r1"] = record("r1", ["title": .string("Soup"), "servings": .int(4)])
        table["a-name-longer-than-twenty-two-bytes"] = record(
            "a-name-longer-than-twenty-two-bytes", ["title": .string("Bread"), "servings": .int(2)])
        table["crème"] = record("crème", ["title": .string("Brûlée"), "servings": .int(6)])
        table["s1"] = record(
            "s1",
            [
                "recipe": .reference(RecordReference(recordName: "r1", action: .deleteSelf)),
                "text": .string("Chop"), "when": .date(Date(timeIntervalSinceReferenceDate: 12.5)),
                "weight": .double(0.25), "photo": .bytes(Data([0, 1, 2])),
                "tags": .list([.string("quick"), .string("hot")]),
            ], type: "Step")
        table.setChangeTag(ChangeTag(rawValue: "abc123"), of: "r1")
        table.setChangeTag(ChangeTag(rawValue: "a tag too long to pack in a word"), of: "crème")
        table.setChangeTag(ChangeTag(rawValue: "gone1"), of: "deleted")
        return table
    }

    @Test func recordsReadBackAsTheyWereSet() throws {
        let table = Self.sampleTable()
        #expect(table.count == 4)
        #expect(table["r1"]?.fields == ["title": .string("Soup"), "servings": .int(4)])
        #expect(table["crème".precomposedStringWithCanonicalMapping]?.fields["title"] == .string("Brûlée"))
        #expect(table.changeTag(of: "crème")?.rawValue == "a tag too long to pack in a word")
        #expect(table.changeTag(of: "deleted")?.rawValue == "gone1")
        #expect(table.dependents(of: "r1") == ["s1"])
        let step = try #require(table.entry("s1"))
        let fields = table.fields(of: step)
        #expect(try fields.string("text") == "Chop")
        #expect(try fields.double("weight") == 0.25)
        #expect(try fields.bytes("photo") == Data([0, 1, 2]))
        #expect(try fields.list("tags") == [.string("quick"), .string("hot")])
        #expect(try fields.reference("recipe").recordName == "r1")
        #expect(throws: FlatSyncError.self) { try fields.int("text") }
        #expect(throws: FlatSyncError.self) { try fields.string("missing") }
        #expect(fields.all.count == 6)
    }

    @Test func theSectionRoundTrips() throws {
        let table = Self.sampleTable()
        let decoded = try HostRecordTable.decode([UInt8](table.encoded()), zone: Self.zone)
        #expect(decoded == table)
        #expect(decoded.changeTag(of: "crème")?.rawValue == "a tag too long to pack in a word")
        #expect(decoded.changeTag(of: "deleted")?.rawValue == "gone1")
        #expect(decoded.dependents(of: "r1") == ["s1"], "references are indexed as the section is read")
        // A decoded table takes changes like any other.
        var changed = decoded
        changed["r1"] = nil
        changed["r3"] = Self.record("r3", ["title": .string("Stew")])
        #expect(changed.changeTag(of: "r1")?.rawValue == "abc123", "a removed record keeps its tag")
        #expect(try HostRecordTable.decode([UInt8](changed.encoded()), zone: Self.zone) == changed)
    }

    @Test func replacingRecordsOverAndOverKeepsEveryValue() throws {
        var table = HostRecordTable()
        for round in 0..<400 {
            for index in 0..<20 {
                let name = "r\(index)"
                table[name] = Self.record(
                    name, ["title": .string("Round \(round) of \(name)"), "servings": .int(Int64(round))])
            }
            if round % 3 == 0 { table["r\(round % 20)"] = nil }
        }
        for index in 0..<20 where table.contains("r\(index)") {
            #expect(try table.fields(of: table.entry("r\(index)")!).int("servings") >= 398)
        }
        #expect(try HostRecordTable.decode([UInt8](table.encoded()), zone: Self.zone) == table)
    }

    /// The section as the first version wrote it (issue 32's first slice): still read.
    @Test func theFirstVersionsSectionIsStillRead() throws {
        let table = Self.sampleTable()
        var writer = BinaryWriter()
        let names = table.allNames.sorted()
        writer.write(varint: UInt64(names.count))
        for name in names {
            writer.write(name)
            if let record = table[name] {
                writer.write(UInt8(1))
                writer.write(record.type)
                let keys = record.fields.keys.sorted()
                writer.write(varint: UInt64(keys.count))
                for key in keys {
                    writer.write(key)
                    writer.write(record.fields[key]!, tags: .commandLog)
                }
            } else {
                writer.write(UInt8(0))
            }
            writer.write(table.changeTag(of: name)?.rawValue ?? "")
        }
        let decoded = try HostRecordTable.decodeFirstVersion(writer.data, zone: Self.zone)
        #expect(decoded == table)
        #expect(decoded.dependents(of: "r1") == ["s1"])
    }

    @Test func aDamagedSectionThrowsATypedError() throws {
        let bytes = [UInt8](Self.sampleTable().encoded())
        // Every truncation, and every byte flipped, throws or reads; none crashes.
        expectDamageToThrowOrRead(bytes, zone: Self.zone, every: 1)
        // A name listed twice.
        var table = HostRecordTable()
        table["r1"] = Self.record("r1", ["title": .string("Soup")])
        var twice = BinaryWriter()
        twice.write(varint: 1)
        twice.write("Recipe")
        twice.write(varint: 1)
        twice.write(varint: 1)
        twice.write("title")
        twice.write(varint: 0)
        twice.write(varint: 2)
        for _ in 0..<2 {
            twice.write("r1")
            twice.write("")
            twice.write(varint: 0)
            twice.write(varint: 0)
            var value = BinaryWriter()
            value.write(FieldValue.string("Soup"), tags: .commandLog)
            twice.write(varint: UInt64(value.bytes.count))
            twice.write(raw: value.bytes)
        }
        let error = #expect(throws: FlatSyncError.self) { try HostRecordTable.decode(twice.bytes, zone: Self.zone) }
        #expect(error?.code == .damagedFile)
    }
}

/// A table large enough that its section is read, its index built and its values made on two threads
/// (``HostRecordTable/readOnTwoThreadsMinimum``, ``HostRecordTable/valuesOnTwoThreadsMinimum``): the
/// result must be the one thread's, record for record.
@Suite("Host record table, large")
struct LargeHostRecordTableTests {
    private static let zone = ZoneID("Recipes")
    private static let count = 6_000

    /// Records of two types spread over every run: names short, long and not ASCII, tags that pack and
    /// tags that do not, `deleteSelf` references from the second half to the first, records that lack a
    /// field, and loose tags.
    private static func largeTable() -> HostRecordTable {
        var table = HostRecordTable()
        for index in 0..<count {
            let name =
                switch index % 7 {
                case 0: "crème-\(index)"
                case 1: "a-name-longer-than-twenty-two-bytes-\(index)"
                default: "r\(index)"
                }
            var fields: [String: FieldValue] = ["title": .string("Dish \(index)"), "servings": .int(Int64(index))]
            var type = "Recipe"
            if index % 11 == 0 {
                type = "Step"
                fields["recipe"] = .reference(RecordReference(recordName: "r\(index - count / 2)", action: .deleteSelf))
            }
            if index % 13 == 0 { fields["servings"] = nil }
            table[name] = Record(id: RecordID(zone: zone, name: name), type: type, fields: fields)
            if index % 3 == 0 { table.setChangeTag(ChangeTag(rawValue: "tag\(index)"), of: name) }
            if index % 17 == 0 {
                table.setChangeTag(ChangeTag(rawValue: "a tag too long to pack, number \(index)"), of: name)
            }
        }
        for index in 0..<5 { table.setChangeTag(ChangeTag(rawValue: "gone\(index)"), of: "deleted\(index)") }
        return table
    }

    @Test func aLargeSectionReadsAsItWasWritten() throws {
        let table = Self.largeTable()
        #expect(Self.count >= HostRecordTable.readOnTwoThreadsMinimum)
        #expect(Self.count >= HostRecordTable.valuesOnTwoThreadsMinimum)
        let (section, offsets) = table.encodedSection()
        let bytes = [UInt8](section)
        let (decoded, checksum) = try HostRecordTable.decodeWithChecksum(
            bytes, zone: Self.zone, recordOffsets: offsets.map(Array.init))
        #expect(checksum == bytes.withUnsafeBytes { CRC32.checksum($0) })
        #expect(decoded == table)
        #expect(decoded.count == Self.count)
        // Without offsets (a section written before FlatSync kept them), one thread reads the same.
        #expect(try HostRecordTable.decode(bytes, zone: Self.zone) == table)
        for index in stride(from: 0, to: Self.count, by: 17) {
            let name =
                index % 7 == 0
                ? "crème-\(index)" : index % 7 == 1 ? "a-name-longer-than-twenty-two-bytes-\(index)" : "r\(index)"
            #expect(decoded.changeTag(of: name) == table.changeTag(of: name))
        }
        #expect(decoded.changeTag(of: "deleted3")?.rawValue == "gone3")
        // References read in the second half point at records read in the first.
        #expect(decoded.dependents(of: "r\(3_036 - Self.count / 2)") == ["r3036"])
        #expect(decoded.cascade(from: ["r\(3_036 - Self.count / 2)"]).count == 2)
        // It takes changes like a table built one record at a time.
        var changed = decoded
        changed["r2"] = nil
        changed["new"] = Record(id: RecordID(zone: Self.zone, name: "new"), type: "Recipe", fields: [:])
        #expect(changed.count == Self.count)
        #expect(try HostRecordTable.decode([UInt8](changed.encoded()), zone: Self.zone) == changed)
    }

    @Test func valuesMadeOnTwoThreadsAreEveryReadableRecordOfTheType() throws {
        let table = try HostRecordTable.decode([UInt8](Self.largeTable().encoded()), zone: Self.zone)
        let values = table.values(of: TestRecipe.self)
        // Steps are another type; recipes without servings do not read.
        let expected = (0..<Self.count).filter { $0 % 11 != 0 && $0 % 13 != 0 }
        #expect(values.count == expected.count)
        #expect(Set(values.map(\.servings)) == Set(expected.map(Int64.init)))
        #expect(values.allSatisfy { $0.title == "Dish \($0.servings)" })
    }

    @Test func aDamagedLargeSectionThrowsATypedErrorFromAnyRun() throws {
        // A truncation or a flipped byte every kilobyte or so: in one run without offsets, in every run of
        // 1,024 records with them.
        let (section, offsets) = Self.largeTable().encodedSection()
        expectDamageToThrowOrRead([UInt8](section), zone: Self.zone, every: 1_009)
        expectDamageToThrowOrRead(
            [UInt8](section), zone: Self.zone, every: 1_009, recordOffsets: offsets.map(Array.init))
    }

    /// The varints of `offsets`.
    private static func offsetBytes(_ offsets: [Int]) -> [UInt8] {
        var writer = BinaryWriter()
        for offset in offsets { writer.write(varint: UInt64(offset)) }
        return writer.bytes
    }

    /// The offsets `encodedSection()` wrote.
    private static func offsets(in bytes: Data) throws -> [Int] {
        try bytes.withBinaryReader { (reader) throws(FlatSyncError) in
            var offsets: [Int] = []
            while !reader.isAtEnd { offsets.append(Int(try reader.readVarint())) }
            return offsets
        }
    }

    /// Where each record of a section starts, found by walking it as ``HostRecordTable/encoded()`` lays it
    /// out.
    private static func recordStarts(in bytes: [UInt8]) throws -> [Int] {
        try Data(bytes).withBinaryReader { (reader) throws(FlatSyncError) in
            for _ in 0..<(try reader.readCount()) { _ = try reader.readString() }
            for _ in 0..<(try reader.readCount()) {
                for _ in 0..<(try reader.readCount()) { _ = try reader.readString() }
            }
            for _ in 0..<(try reader.readCount()) { _ = (try reader.readString(), try reader.readString()) }
            var starts: [Int] = []
            for _ in 0..<(try reader.readCount()) {
                starts.append(reader.offset)
                _ = (try reader.readString(), try reader.readString(), try reader.readVarint(), try reader.readVarint())
                try reader.skip(byteCount: try reader.readCount())
            }
            return starts
        }
    }

    @Test func recordOffsetsSplitTheReadIntoRunsThatMeet() throws {
        let table = Self.largeTable()
        let (section, written) = table.encodedSection()
        let bytes = [UInt8](section)
        let offsets = try Self.offsets(in: try #require(written))
        // 6,000 records: where records 1,024, 2,048, 3,072, 4,096 and 5,120 start.
        #expect(offsets.count == (Self.count - 1) / HostRecordTable.recordOffsetStride)
        let starts = try Self.recordStarts(in: bytes)
        #expect(offsets == stride(from: 1_024, to: Self.count, by: 1_024).map { starts[$0] })
        let (decoded, checksum) = try HostRecordTable.decodeWithChecksum(
            bytes, zone: Self.zone, recordOffsets: Self.offsetBytes(offsets))
        #expect(decoded == table)
        #expect(checksum == bytes.withUnsafeBytes { CRC32.checksum($0) })
        #expect(decoded.dependents(of: "r\(3_036 - Self.count / 2)") == ["r3036"])
        // Offsets that do not fit the records are damage, whichever way they are wrong.
        let wrong: [(String, [Int])] = [
            ("one short", Array(offsets.dropLast())),
            ("one too many", offsets + [bytes.count - 1]),
            ("inside a record", offsets.enumerated().map { $0.offset == 2 ? $0.element + 1 : $0.element }),
            ("out of order", [offsets[1], offsets[0]] + offsets.dropFirst(2)),
            ("past the end", Array(offsets.dropLast()) + [bytes.count]),
            ("before the records", [1] + offsets.dropFirst()),
        ]
        for (what, offsets) in wrong {
            let error = #expect(throws: FlatSyncError.self, "\(what)") {
                try HostRecordTable.decodeWithChecksum(bytes, zone: Self.zone, recordOffsets: Self.offsetBytes(offsets))
            }
            #expect(error?.code == .damagedFile, "\(what)")
        }
        // At the start of another record: each run reads, but they do not meet.
        let next = try #require(starts.firstIndex(of: offsets[1])) + 1
        let misplaced = #expect(throws: FlatSyncError.self) {
            try HostRecordTable.decodeWithChecksum(
                bytes, zone: Self.zone,
                recordOffsets: Self.offsetBytes([offsets[0], starts[next]] + offsets.dropFirst(2)))
        }
        #expect(misplaced?.message.contains("do not follow one another") == true)
        let cut = #expect(throws: FlatSyncError.self) {
            try HostRecordTable.decodeWithChecksum(bytes, zone: Self.zone, recordOffsets: [0x80])
        }
        #expect(cut?.code == .damagedFile, "a varint cut short")
    }

    @Test func aSnapshotReadsItsRecordsWithOrWithoutOffsets() throws {
        var state = ZoneState<HostZoneItem>()
        state.hostRecords = Self.largeTable()
        let file = SnapshotFile(state, zone: Self.zone)
        #expect(file.hostRecordOffsets != nil)
        let read = try SnapshotFile.decodeState(
            of: HostZoneItem.self, zone: Self.zone, from: try file.encoded(), path: "test")
        #expect(read.hostRecords == state.hostRecords)
        // As written before FlatSync kept offsets.
        var older = file
        older.hostRecordOffsets = nil
        older.updateChecksum()
        let readOlder = try SnapshotFile.decodeState(
            of: HostZoneItem.self, zone: Self.zone, from: try older.encoded(), path: "test")
        #expect(readOlder.hostRecords == state.hostRecords)
        // The checksum covers the offsets.
        var damaged = file
        damaged.hostRecordOffsets = Data(Self.offsetBytes(try Self.offsets(in: file.hostRecordOffsets!).map { $0 + 1 }))
        let error = #expect(throws: FlatSyncError.self) {
            try SnapshotFile.decodeState(
                of: HostZoneItem.self, zone: Self.zone, from: try damaged.encoded(), path: "test")
        }
        #expect(error?.code == .damagedFile)
        // A small table has none.
        var small = ZoneState<HostZoneItem>()
        small.hostRecords["r1"] = Record(
            id: RecordID(zone: Self.zone, name: "r1"), type: "Recipe", fields: ["title": .string("Soup")])
        #expect(SnapshotFile(small, zone: Self.zone).hostRecordOffsets == nil)
    }

    @Test func aRecordListedInTwoRunsIsDamage() throws {
        var table = HostRecordTable()
        for index in 0..<Self.count {
            table["r\(index)"] = Record(
                id: RecordID(zone: Self.zone, name: "r\(index)"), type: "Recipe", fields: ["title": .string("x")])
        }
        let (section, offsets) = table.encodedSection()
        var bytes = [UInt8](section)
        // Rename the last record to the first one's name: both are "r" and four digits long.
        let last = try #require(bytes.lastRange(of: Array("r\(Self.count - 1)".utf8)))
        bytes.replaceSubrange(last, with: Array("r1000".utf8))
        let first = try #require(bytes.firstRange(of: Array("r1000".utf8)))
        #expect(first.lowerBound < bytes.count / 2 && last.lowerBound > bytes.count / 2)
        // Read in runs, so that the two are in different runs.
        let error = #expect(throws: FlatSyncError.self) {
            try HostRecordTable.decodeWithChecksum(bytes, zone: Self.zone, recordOffsets: offsets.map(Array.init))
        }
        #expect(error?.code == .damagedFile)
    }
}

/// Checks that `bytes` (a host-record section, read with `recordOffsets`) cut short at every `every`th
/// length throws, and that with every `every`th byte flipped it throws
/// ``FlatSyncError/Code-swift.struct/damagedFile`` or reads.
private func expectDamageToThrowOrRead(_ bytes: [UInt8], zone: ZoneID, every: Int, recordOffsets: [UInt8]? = nil) {
    for length in stride(from: 0, to: bytes.count, by: every) {
        #expect(throws: FlatSyncError.self) {
            try HostRecordTable.decodeWithChecksum(Array(bytes[0..<length]), zone: zone, recordOffsets: recordOffsets)
        }
    }
    for position in stride(from: 0, to: bytes.count, by: every) {
        var damaged = bytes
        damaged[position] ^= 0xFF
        do {
            _ = try HostRecordTable.decodeWithChecksum(damaged, zone: zone, recordOffsets: recordOffsets)
        } catch {
            #expect(error.code == .damagedFile)
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate func lastRange(of other: [UInt8]) -> Range<Int>? {
        guard other.count <= count else { return nil }
        for start in stride(from: count - other.count, through: 0, by: -1)
        where self[start..<start + other.count].elementsEqual(other) {
            return start..<start + other.count
        }
        return nil
    }
}

/// Tables with no records: what a zone whose records were all deleted keeps.
@Suite("Host record table, empty")
struct EmptyHostRecordTableTests {
    private static let zone = ZoneID("Recipes")

    @Test func aTableWhoseRecordsWereAllDeletedReadsAndHasNoValues() throws {
        var table = HostRecordTable()
        table["r1"] = Record(
            id: RecordID(zone: Self.zone, name: "r1"), type: "Recipe",
            fields: ["title": .string("Soup"), "servings": .int(4)])
        table.setChangeTag(ChangeTag(rawValue: "t1"), of: "r1")
        #expect(table.values(of: TestRecipe.self).map(\.id) == ["r1"])
        table["r1"] = nil
        #expect(table.values(of: TestRecipe.self).isEmpty, "the type is still known, with no record of it")
        let bytes = [UInt8](table.encoded())
        let (decoded, checksum) = try HostRecordTable.decodeWithChecksum(bytes, zone: Self.zone)
        #expect(checksum == bytes.withUnsafeBytes { CRC32.checksum($0) })
        #expect(decoded == table)
        #expect(decoded.count == 0)
        #expect(decoded.changeTag(of: "r1")?.rawValue == "t1", "the deleted record's tag stays until sent")
        #expect(decoded.values(of: TestRecipe.self).isEmpty)
    }
}

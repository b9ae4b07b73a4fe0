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
        for length in 0..<bytes.count {
            #expect(throws: FlatSyncError.self) {
                try HostRecordTable.decode(Array(bytes[0..<length]), zone: Self.zone)
            }
        }
        for position in bytes.indices {
            var damaged = bytes
            damaged[position] ^= 0xFF
            do {
                _ = try HostRecordTable.decode(damaged, zone: Self.zone)
            } catch {
                #expect(error.code == .damagedFile)
            }
        }
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

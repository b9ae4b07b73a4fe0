import Foundation
import Testing

@testable import FlatSync

/// Records, changes and the command log reach a store's value only through ``StoredRecordContent``: a type
/// of this test's own, which no layer below the stores knows, goes through them like the built-in items.
@Suite struct StoredRecordContentTests {
    /// A store's value of the test's own: two fields, changed keys as a mask over them.
    private struct Pin: StoredRecordContent, Equatable {
        var label: String
        var weight: Int64

        static let keys = ["label", "weight"]
        static let keySets = RecordKeySets(keys)
        static var recordKeySets: RecordKeySets? { keySets }

        var recordFields: [String: FieldValue] { ["label": .string(label), "weight": .int(weight)] }

        func hasSameRecordFields(as other: Pin) -> Bool { self == other }

        func record(_ name: String) -> Record {
            Record(id: RecordID(zone: ZoneID("pins"), name: name), type: "Pin", content: .stored(self))
        }
    }

    @Test func aRecordHoldingAValueStandsForItsFields() {
        let pin = Pin(label: "home", weight: 3)
        let record = pin.record("p1")
        #expect(record.content.stored(as: Pin.self) == pin)
        #expect(record.content.stored(as: ReadingListEntry.self) == nil)
        #expect(record.fields == ["label": .string("home"), "weight": .int(3)])
        #expect(record["weight"] == .int(3) && record["nothing"] == nil)
        #expect(record.content.fieldCount == 2 && !record.content.hasOwnLogForm)
        // Equal to the same fields held as a dictionary, in either order, and hashed alike.
        let asFields = Record(id: record.id, type: "Pin", fields: pin.recordFields)
        #expect(record == asFields && asFields == record && record.hashValue == asFields.hashValue)
        #expect(record != Pin(label: "home", weight: 4).record("p1"))
        // A value of another type with the same fields is the same content too.
        let entry = ReadingListEntry(articleID: "a", dateAdded: Date(timeIntervalSinceReferenceDate: 5))
        let entryFields = Record(id: record.id, type: "Pin", fields: entry.recordFields)
        let entryContent = Record(id: record.id, type: "Pin", content: .stored(entry))
        #expect(entryContent == entryFields && entryContent != record)
    }

    /// A value with no log form of its own is written as its fields and read back as them: equal to the
    /// change that was written.
    @Test func aValueWithoutALogFormIsLoggedAsItsFields() throws {
        let change = RecordChange.save(
            content: Pin(label: "work", weight: -9), type: "Pin", id: RecordID(zone: ZoneID("pins"), name: "p2"),
            keyMask: 0b10, sequence: 4)
        #expect(change.changedKeys == ["weight"] && change.keyMask == 0b10)
        let event = CommandLogEvent.mutation(Mutation(sequence: 4, zone: ZoneID("pins"), changes: [change]))
        let decoded = try CommandLogEvent.decode(event.encoded())
        guard case .mutation(let mutation) = decoded, let read = mutation.changes.first else {
            Issue.record("read back \(decoded)")
            return
        }
        #expect(read == change)
        #expect(read.record?.content.stored(as: Pin.self) == nil && read.record?.fields == change.record?.fields)
        #expect(read.changedKeys == ["weight"] && read.keyMask == nil)
    }

    @Test func masksOfOneTypeUniteAndASetTakesOverWhenTheRecordChanges() {
        let id = RecordID(zone: ZoneID("pins"), name: "p3")
        let first = RecordChange.save(
            content: Pin(label: "a", weight: 1), type: "Pin", id: id, keyMask: 0b01, sequence: 1)
        let second = RecordChange.save(
            content: Pin(label: "a", weight: 2), type: "Pin", id: id, keyMask: 0b10, sequence: 2)
        let united = first.coalesced(with: second)
        #expect(united.keyMask == 0b11 && united.changedKeys == ["label", "weight"] && united.sequence == 2)
        // A record of fields over a mask: the keys become a set, read over the record they came with.
        var replaced = first
        replaced.operation = .save(Record(id: id, type: "Pin", fields: ["label": .string("b")]))
        #expect(replaced.keyMask == nil && replaced.changedKeys == ["label"])
        // A save of fields followed by a masked save unites as sets.
        let fields = RecordChange.save(
            Record(id: id, type: "Pin", fields: ["x": .int(1)]), changedKeys: ["x"], sequence: 1)
        #expect(fields.coalesced(with: second).changedKeys == ["x", "weight"])
        #expect(second.coalesced(with: fields).changedKeys == ["x", "weight"])
    }

    /// The log finds the store that reads an operation by its byte: each store's operations are its own,
    /// and none is the log's.
    @Test func everyLogOperationHasOneReader() throws {
        var claimed: [UInt8: String] = [:]
        for type in StoredRecordContentTypes.all {
            #expect(type.hasOwnLogForm == !type.logOperations.isEmpty)
            for operation in type.logOperations {
                #expect(claimed[operation] == nil && ![1, 2, 5].contains(operation))
                claimed[operation] = "\(type)"
                #expect(StoredRecordContentTypes.readingLogOperation(operation).map { "\($0)" } == "\(type)")
            }
        }
        #expect(claimed[4] == "ReadingHistoryItem" && claimed[3] == "ReadingHistoryItem")
        for operation in UInt8.min...UInt8.max where claimed[operation] == nil {
            #expect(StoredRecordContentTypes.readingLogOperation(operation) == nil)
        }
    }
}

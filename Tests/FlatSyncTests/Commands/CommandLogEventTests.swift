import Foundation
import Testing

import FlatSyncTesting

@testable import FlatSync

@Suite struct CommandLogEventTests {
    private typealias F = Fixtures

    private static let date = Date(timeIntervalSinceReferenceDate: 812_345_678.25)

    static let events: [CommandLogEvent] = [
        .mutation(
            Mutation(
                sequence: 7,
                zone: .readingHistory,
                changes: [
                    .save(
                        Record(
                            id: F.id("rh-a", in: .readingHistory),
                            type: "ReadingHistoryItem",
                            fields: ["articleID": .string("a ✓ ü"), "readCount": .int(-3), "lastVisited": .date(date)],
                            changeTag: ChangeTag("tag-1")
                        ),
                        changedKeys: ["readCount", "lastVisited"]
                    ),
                    .delete(F.id("rh-b", in: .readingHistory)),
                ]
            )
        ),
        .sealed(.readingList), .unsealed(.readingHistory),
        .acknowledged(CommandID(12), [F.id("a"), F.id("b")]),
        .clearedZone(.readingHistory, sequence: 8), .clearedAll(sequence: 300),
        .restored(
            Command(
                id: CommandID(3),
                zone: .readingList,
                kind: .modifyRecords,
                changes: [F.id("x"): F.save("x", ["n": .int(Int64.max)]).withSequence(4)]
            )
        ),
        .applied(.readingList, [F.delete("y").withSequence(9), F.save("z", ["n": .int(Int64.min)]).withSequence(10)]),
        .counters(nextSequence: 1 << 40, nextCommandID: 5),
    ]

    @Test(arguments: events)
    func everyEventRoundTrips(event: CommandLogEvent) throws {
        #expect(try CommandLogEvent.decode(event.encoded()) == event)
    }

    @Test func truncatedEventsFailWithATypedErrorAtEveryLength() {
        for event in Self.events {
            let bytes = event.encoded()
            for length in 0..<bytes.count {
                #expect(throws: FlatSyncError.self) { try CommandLogEvent.decode(bytes.prefix(length)) }
            }
        }
    }

    @Test func randomBytesNeverCrashTheDecoder() {
        var random = SeededRandomNumberGenerator(seed: 99)
        for _ in 0..<20_000 {
            let bytes = Data((0..<Int.random(in: 0..<40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
            _ = try? CommandLogEvent.decode(bytes)
        }
        // Also mutate valid encodings one byte at a time.
        for event in Self.events {
            let bytes = event.encoded()
            for index in bytes.indices {
                var damaged = bytes
                damaged[index] ^= 0x5A
                _ = try? CommandLogEvent.decode(damaged)
            }
        }
    }

    /// Equal records encode to equal bytes whatever order their dictionaries hold their keys in: fields
    /// and changed keys are written sorted by key, exactly as this reference writer does.
    @Test func recordsEncodeWithTheirKeysSorted() throws {
        func reference(_ change: RecordChange) -> [UInt8] {
            var writer = BinaryWriter()
            let record = try! #require(change.record)
            writer.write(UInt8(1))
            writer.write(record.id)
            writer.write(record.type)
            writer.write(record.changeTag?.rawValue)
            writer.write(varint: UInt64(record.fields.count))
            for key in record.fields.keys.sorted() {
                writer.write(key)
                switch record.fields[key]! {
                case .string(let value): writer.write(UInt8(1)); writer.write(value)
                case .int(let value): writer.write(UInt8(2)); writer.write(signed: value)
                case .date(let value): writer.write(UInt8(3)); writer.write(value)
                }
            }
            writer.write(varint: UInt64(change.changedKeys.count))
            for key in change.changedKeys.sorted() { writer.write(key) }
            return writer.bytes
        }
        var random = SeededRandomNumberGenerator(seed: 5)
        let keys = ["articleID", "readCount", "lastVisited", "z", "a", "deviceID", "likingStatus", "ü", "A", "articleSeen"]
        for _ in 0..<200 {
            let chosen = keys.shuffled(using: &random).prefix(Int.random(in: 0...keys.count, using: &random))
            var fields: [String: FieldValue] = [:]
            for key in chosen { fields[key] = [.int(7), .string("s"), .date(Self.date)].randomElement(using: &random)! }
            // The same fields inserted in another order, into a table of another size.
            var other = [String: FieldValue](minimumCapacity: 40)
            for key in chosen.reversed() { other[key] = fields[key] }
            let changedKeys = Set(chosen.prefix(3))
            let record = Record(id: F.id("rh-a", in: .readingHistory), type: "ReadingHistoryItem", fields: fields)
            let first = RecordChange.save(record, changedKeys: changedKeys)
            var second = first
            second.operation = .save(Record(id: record.id, type: record.type, fields: other))
            var writer = BinaryWriter()
            writer.write(first, sequence: false)
            #expect(writer.bytes == reference(first))
            var otherWriter = BinaryWriter()
            otherWriter.write(second, sequence: false)
            #expect(otherWriter.bytes == writer.bytes)
        }
    }

    @Test func anUnknownKindIsReportedAsNewerFormat() {
        expectError(.unsupportedFormatVersion) { try CommandLogEvent.decode(Data([200])) }
    }
}

extension RecordChange {
    func withSequence(_ sequence: UInt64) -> RecordChange {
        var copy = self
        copy.sequence = sequence
        return copy
    }
}

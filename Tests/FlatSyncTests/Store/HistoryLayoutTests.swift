import Foundation
import Testing

@testable import FlatSync

/// The compact in-memory layout of the history: ``CompactString``, ``ReadingHistoryItem``'s stored form,
/// ``HistoryTable`` and the streamed snapshot reader.
@Suite struct HistoryLayoutTests {
    static let date = Date(timeIntervalSinceReferenceDate: 800_000_000)

    /// Article IDs at the edges of the layout: empty, inline (up to 22 bytes), just too long to be inline,
    /// the longest valid, multi-byte text on both sides of the limit, and canonically equivalent pairs.
    static let articleIDs: [String] = [
        "", "a", "A1b2C3d4E5f6G7h8I9j0kL", String(repeating: "x", count: 21), String(repeating: "y", count: 22),
        String(repeating: "z", count: 23), String(repeating: "w", count: 256), "日本語の記事", "é-précomposé",
        "e\u{301}-de\u{301}compose\u{301}", String(repeating: "é", count: 11), String(repeating: "é", count: 12),
        "🙂🙃🙂🙃🙂", String(repeating: "🙂", count: 64), "history-article-000123",
    ]

    // MARK: - CompactString

    @Test func compactStringsRoundTripAndKeepShortOnesInline() {
        for id in Self.articleIDs {
            let compact = CompactString(id)
            #expect(compact.string == id)
            #expect(compact.utf8Count == id.utf8.count)
            #expect(compact.isASCII == id.utf8.allSatisfy { $0 < 0x80 })
            if case .inline = compact.storage {
                #expect(id.utf8.count <= CompactString.inlineCapacity, "\(id) inline")
            } else {
                #expect(id.utf8.count > CompactString.inlineCapacity, "\(id) on the heap")
            }
            let fromBytes = Array(id.utf8).withUnsafeBytes { CompactString(validUTF8: $0) }
            #expect(fromBytes == compact && fromBytes.string == id)
        }
        #expect(MemoryLayout<CompactString>.size == 24)
    }

    @Test func compactStringsCompareAndHashAsStringsDo() {
        for a in Self.articleIDs {
            for b in Self.articleIDs {
                let (x, y) = (CompactString(a), CompactString(b))
                #expect((x == y) == (a == b), "\(a) == \(b)")
                #expect((x < y) == (a < b), "\(a) < \(b)")
                if x == y { #expect(x.hashValue == y.hashValue, "\(a) hashes as \(b)") }
            }
        }
        // The precomposed and decomposed forms are one article, as they were as dictionary keys.
        #expect(CompactString("é") == CompactString("e\u{301}"))
    }

    /// ASCII text equals only its own bytes, also where `String` calls a non-ASCII spelling equal to it
    /// (three characters have an ASCII canonical form): equality, hashing and order agree, and the history
    /// and its change tags keep both as two records, each found by its own spelling.
    @Test func asciiTextEqualsOnlyItsOwnBytes() {
        // Short ones are inline, long ones (over 22 bytes) on the heap.
        let long = String(repeating: "a", count: 22)
        let pairs = [("K", "\u{212A}"), ("a;b", "a\u{037E}b"), ("`x", "\u{1FEF}x"), ("K" + long, "\u{212A}" + long)]
        for (ascii, other) in pairs {
            #expect(ascii == other, "as Strings they are equal")
            let (x, y) = (CompactString(ascii), CompactString(other))
            #expect(x != y)
            #expect((x < y) != (y < x), "exactly one comes first")
            Array(other.utf8).withUnsafeBytes { #expect(!x.equals(utf8: $0, otherIsASCII: false)) }
            Array(ascii.utf8).withUnsafeBytes { #expect(!y.equals(utf8: $0, otherIsASCII: true)) }
            var table = HistoryTable()
            table[ascii] = ReadingHistoryItem(articleID: ascii, readCount: 1)
            table[other] = ReadingHistoryItem(articleID: other, readCount: 2)
            #expect(table.count == 2)
            #expect(table[ascii]?.readCount == 1 && table[other]?.readCount == 2)
            table.setChangeTag(ChangeTag("t1"), of: "rh-" + ascii)
            table.setChangeTag(ChangeTag("t2"), of: "rh-" + other)
            #expect(table.changeTag(of: "rh-" + ascii) == ChangeTag("t1"))
            #expect(table.changeTag(of: "rh-" + other) == ChangeTag("t2"))
            var tags = ChangeTagTable()
            tags["rl-" + ascii] = ChangeTag("t1")
            tags["rl-" + other] = ChangeTag("t2")
            #expect(tags.count == 2 && tags["rl-" + ascii] == ChangeTag("t1"))
        }
    }

    // MARK: - ReadingHistoryItem

    /// Items with every field at its extremes.
    static func extremeItems() -> [ReadingHistoryItem] {
        let dates: [Date?] = [
            nil, Date(timeIntervalSinceReferenceDate: 0), .distantPast, .distantFuture,
            Date(timeIntervalSinceReferenceDate: -1e15), Date(timeIntervalSinceReferenceDate: .infinity),
            Date(timeIntervalSinceReferenceDate: -.infinity), date.addingTimeInterval(0.001),
        ]
        let integers: [Int64] = [0, 1, -1, .min, .max]
        let devices: [String?] = [nil, "", "phone", "5F0C1A62-4D0B-4A8E-9C3B-2E7D9A1B6C44", "設備-🙂"]
        let flags: [ReadingHistoryItem.Flags] = [[], [.read, .seen, .offensive, .consumed, .pruningDisabled]]
        var items: [ReadingHistoryItem] = []
        for (index, id) in articleIDs.enumerated() {
            for variant in 0..<dates.count {
                items.append(
                    ReadingHistoryItem(
                        articleID: id, lastVisited: dates[variant], firstSeen: dates[(variant + 3) % dates.count],
                        maxVersionSeen: integers[(index + variant) % integers.count],
                        readCount: integers[(index + 2 * variant + 1) % integers.count],
                        deviceID: devices[(index + variant) % devices.count],
                        liking: ReadingHistoryItem.Liking.allCases[variant % 3],
                        likingChangedAt: dates[(variant + 5) % dates.count],
                        flags: flags[variant % 2].union(ReadingHistoryItem.Flags(rawValue: variant == 7 ? .min : 0))
                    ))
            }
        }
        return items
    }

    @Test func everyFieldRoundTripsThroughTheCompactLayout() {
        for item in Self.extremeItems() {
            let copy = ReadingHistoryItem(
                articleID: item.articleID, lastVisited: item.lastVisited, firstSeen: item.firstSeen,
                maxVersionSeen: item.maxVersionSeen, readCount: item.readCount, deviceID: item.deviceID,
                liking: item.liking, likingChangedAt: item.likingChangedAt, flags: item.flags
            )
            #expect(copy == item)
            #expect(copy.hashValue == item.hashValue)
            var changed = item
            changed.articleID = "other"
            changed.articleID = item.articleID
            changed.lastVisited = item.lastVisited
            #expect(changed == item)
        }
        let nan = ReadingHistoryItem(articleID: "n", lastVisited: Date(timeIntervalSinceReferenceDate: .nan))
        #expect(nan.lastVisited == nil, "a NaN date stands for none")
        #expect(nan == ReadingHistoryItem(articleID: "n"))
        #expect(MemoryLayout<ReadingHistoryItem>.stride <= 72)
    }

    /// A read count below 2³² and flags in 16 bits are kept inline; anything wider goes to a box with the
    /// device, and back inline once it fits again, so that equal items are stored alike.
    @Test func wideReadCountsAndFlagsLeaveTheInlineFieldsAndComeBack() {
        let wideCounts: [Int64] = [-1, Int64(UInt32.max) + 1, .min, .max]
        let wideFlags: [ReadingHistoryItem.Flags] = [
            .init(rawValue: 1 << 16), .init(rawValue: -1), .init(rawValue: .min), [.read, .init(rawValue: 1 << 40)],
        ]
        for device in [nil, "phone"] as [String?] {
            let inline = ReadingHistoryItem(
                articleID: "a", readCount: Int64(UInt32.max), deviceID: device,
                flags: [.read, .init(rawValue: 1 << 15)])
            #expect(inline.hasInlineCounts)
            #expect(inline.readCount == Int64(UInt32.max) && inline.flags.rawValue == 1 | 1 << 15)
            for count in wideCounts {
                var item = inline
                item.readCount = count
                #expect(!item.hasInlineCounts, "\(count)")
                #expect(item.readCount == count && item.flags == inline.flags && item.deviceID == device)
                item.deviceID = "tablet"
                #expect(item.readCount == count && item.deviceID == "tablet")
                item.deviceID = device
                item.readCount = inline.readCount
                #expect(item.hasInlineCounts, "back inline from \(count)")
                #expect(item == inline && item.hashValue == inline.hashValue)
            }
            for flags in wideFlags {
                var item = inline
                item.flags = flags
                #expect(!item.hasInlineCounts, "\(flags.rawValue)")
                #expect(item.flags == flags && item.readCount == inline.readCount && item.deviceID == device)
                item.readCount = 3
                #expect(item.flags == flags && item.readCount == 3)
                let built = ReadingHistoryItem(articleID: "a", readCount: 3, deviceID: device, flags: flags)
                #expect(item == built && item.hashValue == built.hashValue)
                item.flags = inline.flags
                item.readCount = inline.readCount
                #expect(item.hasInlineCounts, "back inline from \(flags.rawValue)")
                #expect(item == inline)
            }
        }
        // A merge of a wide item with an inline one keeps the wide values (maxima, union).
        let wide = ReadingHistoryItem(articleID: "a", readCount: .max, flags: .init(rawValue: 1 << 20))
        let merged = wide.merged(with: ReadingHistoryItem(articleID: "a", readCount: 5, flags: .read))
        #expect(merged.readCount == .max && merged.flags == [.read, .init(rawValue: 1 << 20)])
    }

    /// A device name among the first 64 a process sees is kept in an item as its number, so that copying the
    /// item retains nothing; the number reads back as the very same name, and compares as the name does.
    @Test func sharedDeviceNamesAreKeptAsNumbers() {
        let name = DeviceName.named("layout-phone")
        let item = ReadingHistoryItem(articleID: "a", deviceID: "layout-phone")
        // The table is the process's: other tests may have filled it, in which case the name is not shared.
        #expect(item.hasSharedDevice == (name.sharedIndex != nil))
        #expect(item.deviceID == "layout-phone" && item.hasDevice)
        if let index = name.sharedIndex {
            #expect(DeviceName.shared(at: index) === name && item.device === name)
        }
        var other = ReadingHistoryItem(articleID: "a", deviceID: "layout-tablet")
        #expect(!other.hasSameDevice(as: item) && other != item)
        other.deviceID = "layout-phone"
        #expect(other.hasSameDevice(as: item) && other == item && other.hashValue == item.hashValue)
        other.deviceID = nil
        #expect(!other.hasDevice && !other.hasSameDevice(as: item) && other != item)
        #expect(other.hasSameDevice(as: ReadingHistoryItem(articleID: "b")))
        // In a box with a wide read count, the device is the name itself and still compares by value.
        var wide = item
        wide.readCount = .max
        #expect(!wide.hasSharedDevice && wide.hasDevice && wide.hasSameDevice(as: item))
        wide.readCount = item.readCount
        #expect(wide.hasSharedDevice == item.hasSharedDevice && wide == item)
    }

    /// Names made from many tasks at once each get their own number, and the number reads back as the name.
    /// (Few names, so that the process's table keeps room for the other tests' devices.)
    @Test func sharedNamesMadeAtOnceGetTheirOwnNumbers() async {
        let names = await withTaskGroup(of: [DeviceName].self) { group in
            for task in 0..<4 {
                group.addTask { (0..<3).map { DeviceName.named("layout-device-\(task)-\($0)") } }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let shared = names.compactMap(\.sharedIndex)
        #expect(Set(shared).count == shared.count, "one number per shared name")
        for name in names {
            if let index = name.sharedIndex { #expect(DeviceName.shared(at: index) === name, "\(name.value)") }
            #expect(DeviceName.named(name.value).sharedIndex == name.sharedIndex)
        }
    }

    /// A name beyond the 64 shared ones (``DeviceName/unshared(_:)`` makes that form) is held by reference:
    /// items holding two such objects of one ID are equal and hash alike, and differ from another device's,
    /// shared or not.
    @Test func deviceNamesBeyondTheSharedOnesAreHeldByReference() {
        func item(_ device: DeviceName?) -> ReadingHistoryItem {
            var item = ReadingHistoryItem(articleID: "a", readCount: 2)
            item.setDevice(device)
            return item
        }
        let first = item(.unshared("layout-laptop"))
        let second = item(.unshared("layout-laptop"))
        #expect(!first.hasSharedDevice && first.hasDevice && first.deviceID == "layout-laptop")
        #expect(first.device !== second.device)
        #expect(first.hasSameDevice(as: second) && first == second && first.hashValue == second.hashValue)
        let shared = item(.named("layout-laptop"))
        #expect(first.hasSameDevice(as: shared) && first == shared && first.hashValue == shared.hashValue)
        let another = item(.unshared("layout-desktop"))
        #expect(!first.hasSameDevice(as: another) && first != another)
        #expect(!first.hasSameDevice(as: item(nil)) && first != item(nil))
        // The changed-key mask sees the same device as unchanged, another as changed.
        #expect(second.changedRecordKeyMask(since: first) == 0)
        #expect(another.changedRecordKeyMask(since: first) == 1 << 6)
        #expect(MemoryLayout<ReadingHistoryItem>.stride <= 72)
    }

    // MARK: - HistoryTable

    @Test func theTableBehavesLikeADictionaryAndReadsNewestFirst() {
        var random = SeededRandomNumberGenerator(seed: 11)
        var table = HistoryTable()
        var model: [String: ReadingHistoryItem] = [:]
        let ids = (0..<300).map { "article-\($0)" } + Self.articleIDs
        for step in 0..<6_000 {
            let id = ids.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<6:
                let item = ReadingHistoryItem(
                    articleID: id,
                    lastVisited: Bool.random(using: &random)
                        ? Self.date.addingTimeInterval(Double(Int.random(in: 0..<50, using: &random))) : nil,
                    firstSeen: Bool.random(using: &random) ? Self.date : nil, readCount: Int64(step))
                #expect(table.updateValue(item, forKey: id) == model.updateValue(item, forKey: id))
            case 6..<9:
                #expect(table.removeValue(forKey: id) == model.removeValue(forKey: id))
            default:
                let ordered = table.orderedItems()
                let expected = model.values.sorted { HistoryTable.precedes($0, $1) }
                #expect(ordered == expected, "step \(step)")
            }
            #expect(table[id] == model[id])
            #expect(table.count == model.count)
        }
        #expect(Set(table.keys) == Set(model.keys))
        var other = HistoryTable()
        for item in model.values.shuffled(using: &random) { other[item.articleID] = item }
        #expect(other == table)
        // Canonically equivalent IDs find the same item.
        table["é"] = ReadingHistoryItem(articleID: "é", readCount: 7)
        #expect(table["e\u{301}"]?.readCount == 7)
    }

    @Test func aReadSharesTheTablesArrayUntilTheTableChanges() {
        var table = HistoryTable()
        for index in 0..<100 {
            table["a\(index)"] = ReadingHistoryItem(articleID: "a\(index)", lastVisited: Self.date + Double(index))
        }
        let first = table.orderedItems()
        let second = table.orderedItems()
        #expect(first.withUnsafeBufferPointer { $0.baseAddress } == second.withUnsafeBufferPointer { $0.baseAddress })
        #expect(first.first?.articleID == "a99" && first.last?.articleID == "a0")
        table["a0"] = ReadingHistoryItem(articleID: "a0", lastVisited: Self.date + 1_000)
        #expect(first.first?.articleID == "a99", "what a caller holds does not change")
        #expect(table.orderedItems().first?.articleID == "a0")
    }

    @Test func aSnapshotLoadRebuildsTheSameTable() {
        let items = Self.extremeItems()
        var table = HistoryTable()
        for item in items { table[item.articleID] = item }
        var loader = HistoryTable.SnapshotLoader(count: table.count)
        for item in table.orderedItems() { loader.append(item) }
        var loaded = loader.finish()
        #expect(loaded == table)
        #expect(loaded.isOrdered, "items in order load in order")
        // Duplicates (which no snapshot FlatSync writes holds): the later one wins, as one by one.
        var duplicates = HistoryTable.SnapshotLoader(count: 3)
        duplicates.append(ReadingHistoryItem(articleID: "d", readCount: 1))
        duplicates.append(ReadingHistoryItem(articleID: "e", readCount: 2))
        duplicates.append(ReadingHistoryItem(articleID: "d", readCount: 3))
        loaded = duplicates.finish()
        #expect(loaded.count == 2 && loaded["d"]?.readCount == 3 && loaded["e"]?.readCount == 2)
    }

    // MARK: - Snapshots

    @Test func extremeItemsRoundTripThroughASnapshot() throws {
        var state = ZoneState<ReadingHistoryItem>()
        for item in Self.extremeItems() { state.items[item.articleID] = item }
        state.setChangeTag(ChangeTag("t1"), of: "rh-é")
        state.setChangeTag(ChangeTag("t2"), of: "rh-" + String(repeating: "w", count: 256))
        let data = try SnapshotFile(state).encoded()
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "t")
        #expect(decoded.items == state.items)
        #expect(decoded.changeTagsByName == state.changeTagsByName)
        for item in state.items.values {
            let read = try #require(decoded.items[item.articleID])
            #expect(read.articleID.utf8.elementsEqual(item.articleID.utf8), "the bytes of \(item.articleID) come back")
        }
    }

    /// Values larger than the reader's 16 KB buffer, and many values across its refills.
    @Test func valuesLargerThanTheReadBufferRoundTrip() throws {
        var state = ZoneState<ReadingHistoryItem>()
        let huge = String(repeating: "device-", count: 5_000)
        for index in 0..<3_000 {
            let item = ReadingHistoryItem(
                articleID: "article-\(index)", lastVisited: Self.date + Double(index),
                deviceID: index % 1_000 == 0 ? huge + "\(index)" : "d\(index % 7)")
            state.items[item.articleID] = item
        }
        let data = try SnapshotFile(state).encoded()
        let decoded = try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "t")
        #expect(decoded.items == state.items)
    }

    @Test func aStreamedSnapshotChecksTheWholeFile() throws {
        var state = ZoneState<ReadingHistoryItem>()
        for index in 0..<2_000 {
            state.items["a\(index)"] = ReadingHistoryItem(articleID: "a\(index)", readCount: Int64(index))
        }
        let data = try SnapshotFile(state).encoded()
        // A flipped bit deep inside a column that still decodes (bit 1 of a read count's varint byte) is found
        // by the checksum alone.
        var file = try PropertyListDecoder().decode(SnapshotFile.self, from: data)
        var counts = [UInt8](try #require(file.columns["readCount"]))
        counts[counts.count / 2] ^= 0x02
        file.columns["readCount"] = Data(counts)
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        let damaged = try encoder.encode(file)
        expectError(.damagedFile) {
            try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: damaged, path: "t")
        }
        #expect(try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "t").items == state.items)
    }

    /// A count larger than the columns hold (here with a checksum that matches it) is damage, and the
    /// reader reserves room only for what the bytes can hold.
    @Test func aCountPastTheColumnsIsDamage() throws {
        var state = ZoneState<ReadingHistoryItem>()
        for index in 0..<10 { state.items["a\(index)"] = ReadingHistoryItem(articleID: "a\(index)") }
        var file = SnapshotFile(state)
        file.itemCount = 500  // under the file's size, over what its columns hold
        file.updateChecksum()
        let data = try file.encoded()
        expectError(.damagedFile) {
            try SnapshotFile.decodeState(of: ReadingHistoryItem.self, from: data, path: "t")
        }
    }

    @Test func checksumsOfPiecesCombineIntoTheChecksumOfTheWhole() {
        var random = SeededRandomNumberGenerator(seed: 3)
        for length in [0, 1, 7, 8, 9, 100, 4_096, 70_000] {
            let a = (0..<Int.random(in: 0..<300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let b = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let whole = CRC32.checksum(Data(a + b))
            #expect(CRC32.combine(CRC32.checksum(Data(a)), CRC32.checksum(Data(b)), length: b.count) == whole)
        }
    }
}

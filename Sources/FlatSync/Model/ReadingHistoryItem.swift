#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the user did with one article: visits, reads, likes, and the flags News keeps.
public struct ReadingHistoryItem: SyncedItem, Identifiable, CustomStringConvertible {
    /// Whether the user liked or disliked the article.
    public enum Liking: Int64, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
        case none = 0
        case liked = 1
        case disliked = 2

        public var description: String {
            switch self {
            case .none: return "none"
            case .liked: return "liked"
            case .disliked: return "disliked"
            }
        }
    }

    /// Sticky flags: once set on any device, they stay set everywhere.
    public struct Flags: OptionSet, Hashable, Sendable {
        /// The flags as bits.
        public var rawValue: Int64
        /// Flags from their bits.
        public init(rawValue: Int64) { self.rawValue = rawValue }

        /// The user opened and read the article.
        public static let read = Flags(rawValue: 1 << 0)
        /// The article was shown to the user.
        public static let seen = Flags(rawValue: 1 << 1)
        /// The user reported the article as offensive.
        public static let offensive = Flags(rawValue: 1 << 2)
        /// The user finished the article.
        public static let consumed = Flags(rawValue: 1 << 3)
        /// The item must never be pruned.
        public static let pruningDisabled = Flags(rawValue: 1 << 4)

        /// The flags a record carries (``fields``); other bits stay on this device.
        static let recorded: Flags = [.read, .seen, .offensive, .consumed, .pruningDisabled]

        /// Each flag with the record field that stores it (written only when set).
        static let fields: [(Flags, String)] = [
            (.read, "articleRead"), (.seen, "articleSeen"), (.offensive, "offensive"),
            (.consumed, "articleConsumed"), (.pruningDisabled, "pruningDisabled"),
        ]
    }

    // The fields, laid out for memory: 72 bytes an item with no allocation of its own for an article ID of
    // up to 22 UTF-8 bytes (a `String` keeps only 15 inline), dates as plain seconds with NaN for none (a
    // `Date?` takes 16 bytes), the device in 8 bytes as the number of a name shared with every other item
    // of the same device (a reference to it beyond the first 64 devices a process sees), the read count and
    // flags in 6 bytes when they fit (a read count below 2³², flags in the low 16 bits: every item News
    // makes). The history holds 100,000 of these in one array, and a read hands that array out without
    // copying it.

    /// The article ID, inline when it is short.
    package private(set) var compactArticleID: CompactString
    /// The device, or a box holding it with a read count or flags too wide for their inline fields.
    private var deviceSlot: DeviceSlot
    /// `lastVisited` in seconds since 2001, NaN for none.
    package private(set) var lastVisitedTime: Double
    /// `firstSeen` in seconds since 2001, NaN for none.
    package private(set) var firstSeenTime: Double
    /// `likingChangedAt` in seconds since 2001, NaN for none.
    package private(set) var likingChangedAtTime: Double
    /// The highest article version seen.
    public var maxVersionSeen: Int64
    /// ``readCount`` when it fits 32 bits unsigned; 0 when the slot holds it.
    private var inlineReadCount: UInt32
    /// ``flags`` when they fit 16 bits; 0 when the slot holds them.
    private var inlineFlags: UInt16
    /// Liked, disliked or neither.
    public var liking: Liking

    /// The 8 bytes beside the inline fields: no device, the number of a shared device name (see
    /// ``DeviceName/sharedIndex``: copying the item retains nothing for it), a device name beyond the shared
    /// ones, or — for the rare item whose read count or flags do not fit inline — a box of its own with all
    /// three. An item has one form only (see ``store(readCount:flags:device:)``), so that equal items are
    /// stored alike.
    private enum DeviceSlot: Sendable {
        case none
        case shared(UInt32)
        case device(DeviceName)
        case wide(WideFields)

        /// The slot of an item with inline counts whose device is `device`.
        init(_ device: DeviceName?) {
            guard let device else {
                self = .none
                return
            }
            self = device.sharedIndex.map(DeviceSlot.shared) ?? .device(device)
        }
    }

    /// A read count, flags and device of an item whose read count or flags are too wide to be inline.
    private final class WideFields: Sendable {
        let readCount: Int64
        let flags: Flags
        let device: DeviceName?

        init(readCount: Int64, flags: Flags, device: DeviceName?) {
            self.readCount = readCount
            self.flags = flags
            self.device = device
        }
    }

    /// The device of the latest visit, shared with the device's other items.
    package private(set) var device: DeviceName? {
        get {
            switch deviceSlot {
            case .none: return nil
            case .shared(let index): return DeviceName.shared(at: index)
            case .device(let device): return device
            case .wide(let wide): return wide.device
            }
        }
        set {
            if case .wide(let wide) = deviceSlot {
                deviceSlot = .wide(WideFields(readCount: wide.readCount, flags: wide.flags, device: newValue))
            } else {
                deviceSlot = DeviceSlot(newValue)
            }
        }
    }

    /// How many times the article was opened (merges take the maximum, as News does).
    public var readCount: Int64 {
        get {
            if case .wide(let wide) = deviceSlot { return wide.readCount }
            return Int64(inlineReadCount)
        }
        set {
            if hasInlineCounts, let inline = UInt32(exactly: newValue) {
                inlineReadCount = inline
            } else {
                store(readCount: newValue, flags: flags, device: device)
            }
        }
    }

    /// The sticky flags.
    public var flags: Flags {
        get {
            if case .wide(let wide) = deviceSlot { return wide.flags }
            return Flags(rawValue: Int64(inlineFlags))
        }
        set {
            if hasInlineCounts, let inline = UInt16(exactly: newValue.rawValue) {
                inlineFlags = inline
            } else {
                store(readCount: readCount, flags: newValue, device: device)
            }
        }
    }

    /// Stores the three in their one form: inline when both numbers fit, else in a box.
    private mutating func store(readCount: Int64, flags: Flags, device: DeviceName?) {
        if let count = UInt32(exactly: readCount), let bits = UInt16(exactly: flags.rawValue) {
            inlineReadCount = count
            inlineFlags = bits
            deviceSlot = DeviceSlot(device)
        } else {
            inlineReadCount = 0
            inlineFlags = 0
            deviceSlot = .wide(WideFields(readCount: readCount, flags: flags, device: device))
        }
    }

    /// True when the item has a device (without reaching the shared name).
    package var hasDevice: Bool {
        switch deviceSlot {
        case .none: return false
        case .shared, .device: return true
        case .wide(let wide): return wide.device != nil
        }
    }

    /// True when both items have the same device, or neither has one. Two shared names are compared by
    /// their numbers, without reaching the names: this runs for every change a batch makes, on two threads.
    package func hasSameDevice(as other: ReadingHistoryItem) -> Bool {
        switch (deviceSlot, other.deviceSlot) {
        case (.none, .none): return true
        case (.shared(let mine), .shared(let theirs)): return mine == theirs
        default: return DeviceName.same(device, other.device)
        }
    }

    /// True when the item keeps its device as a shared name's number (tests check the layout).
    package var hasSharedDevice: Bool {
        if case .shared = deviceSlot { return true }
        return false
    }

    /// True when the item keeps its read count and flags inline (tests check the layout).
    package var hasInlineCounts: Bool {
        if case .wide = deviceSlot { return false }
        return true
    }

    /// The device of the latest visit.
    public var deviceID: String? {
        get { device?.value }
        set { device = newValue.map(DeviceName.named) }
    }

    /// The article.
    public var articleID: String {
        get { compactArticleID.string }
        set { compactArticleID = CompactString(newValue) }
    }

    /// The last time the user opened the article, if ever.
    public var lastVisited: Date? {
        get { Self.date(lastVisitedTime) }
        set { lastVisitedTime = Self.time(newValue) }
    }

    /// The first time the article was seen or visited.
    public var firstSeen: Date? {
        get { Self.date(firstSeenTime) }
        set { firstSeenTime = Self.time(newValue) }
    }

    /// When ``liking`` was last set; the later setting wins a conflict, so an unlike syncs too.
    public var likingChangedAt: Date? {
        get { Self.date(likingChangedAtTime) }
        set { likingChangedAtTime = Self.time(newValue) }
    }

    /// An item; an article nobody has visited or marked has only its ID.
    ///
    /// A date whose `timeIntervalSinceReferenceDate` is NaN stands for no date.
    public init(
        articleID: String,
        lastVisited: Date? = nil,
        firstSeen: Date? = nil,
        maxVersionSeen: Int64 = 0,
        readCount: Int64 = 0,
        deviceID: String? = nil,
        liking: Liking = .none,
        likingChangedAt: Date? = nil,
        flags: Flags = []
    ) {
        self.init(
            compactArticleID: CompactString(articleID), lastVisitedTime: Self.time(lastVisited),
            firstSeenTime: Self.time(firstSeen), maxVersionSeen: maxVersionSeen, readCount: readCount,
            device: deviceID.map(DeviceName.named), liking: liking, likingChangedAtTime: Self.time(likingChangedAt),
            flags: flags
        )
    }

    /// An item from its stored form, as a snapshot holds it.
    package init(
        compactArticleID: CompactString,
        lastVisitedTime: Double,
        firstSeenTime: Double,
        maxVersionSeen: Int64,
        readCount: Int64,
        device: DeviceName?,
        liking: Liking,
        likingChangedAtTime: Double,
        flags: Flags
    ) {
        self.compactArticleID = compactArticleID
        self.deviceSlot = .none
        self.lastVisitedTime = lastVisitedTime.isNaN ? .nan : lastVisitedTime
        self.firstSeenTime = firstSeenTime.isNaN ? .nan : firstSeenTime
        self.likingChangedAtTime = likingChangedAtTime.isNaN ? .nan : likingChangedAtTime
        self.maxVersionSeen = maxVersionSeen
        self.inlineReadCount = 0
        self.inlineFlags = 0
        self.liking = liking
        store(readCount: readCount, flags: flags, device: device)
    }

    private static func date(_ time: Double) -> Date? {
        time.isNaN ? nil : Date(timeIntervalSinceReferenceDate: time)
    }

    private static func time(_ date: Date?) -> Double {
        date?.timeIntervalSinceReferenceDate ?? .nan
    }

    /// What ``ReadingHistory/items()`` orders by, newest first: `lastVisited`, else `firstSeen`, else the
    /// distant past, in seconds since 2001.
    package var recencyTime: Double {
        !lastVisitedTime.isNaN
            ? lastVisitedTime : !firstSeenTime.isNaN ? firstSeenTime : Self.distantPastTime
    }

    private static let distantPastTime = Date.distantPast.timeIntervalSinceReferenceDate

    /// The article ID.
    public var id: String { articleID }
    /// True once the article was read on any device.
    public var isRead: Bool { flags.contains(.read) }
    /// True once the article was shown on any device.
    public var isSeen: Bool { flags.contains(.seen) }
    /// True when the latest liking is a like.
    public var isLiked: Bool { liking == .liked }
    /// True when the latest liking is a dislike.
    public var isDisliked: Bool { liking == .disliked }

    /// The history's zone.
    public static let zone = ZoneID.readingHistory
    /// The CloudKit record type of an item.
    public static let recordType = "ReadingHistoryItem"
    /// What an item's record name starts with, before its article ID.
    public static let recordNamePrefix = "rh-"

    /// The item as a `ReadingHistoryItem` record (see <doc:Architecture>). Flags are int fields written only when set.
    ///
    /// The record keeps the item and builds its field dictionary only when its fields are read.
    public var record: Record {
        var canonical = self
        canonical.flags.formIntersection(Flags.recorded)
        return Record(id: recordID, type: Self.recordType, content: .stored(canonical))
    }

    /// The fields of ``record``.
    package var recordFields: [String: FieldValue] {
        // Sized for a visited item (about ten fields) up front: a literal of the four fields always present
        // was rehashed into a larger table for most records. (Room for all 13 would double the table.)
        var fields = [String: FieldValue](minimumCapacity: 12)
        fields["articleID"] = .string(articleID)
        fields["maxVersionSeen"] = .int(maxVersionSeen)
        fields["readCount"] = .int(readCount)
        fields["likingStatus"] = .int(liking.rawValue)
        if let lastVisited { fields["lastVisited"] = .date(lastVisited) }
        if let firstSeen { fields["firstSeen"] = .date(firstSeen) }
        if let deviceID { fields["deviceID"] = .string(deviceID) }
        if let likingChangedAt { fields["likingChangedAt"] = .date(likingChangedAt) }
        for (flag, key) in Flags.fields where flags.contains(flag) { fields[key] = .int(1) }
        return fields
    }

    /// One field of ``record``.
    package func recordField(_ key: String) -> FieldValue? {
        switch key {
        case "articleID": return .string(articleID)
        case "maxVersionSeen": return .int(maxVersionSeen)
        case "readCount": return .int(readCount)
        case "likingStatus": return .int(liking.rawValue)
        case "lastVisited": return lastVisited.map(FieldValue.date)
        case "firstSeen": return firstSeen.map(FieldValue.date)
        case "deviceID": return deviceID.map(FieldValue.string)
        case "likingChangedAt": return likingChangedAt.map(FieldValue.date)
        default:
            guard let flag = Flags.fields.first(where: { $0.1 == key })?.0 else { return nil }
            return flags.contains(flag) ? .int(1) : nil
        }
    }

    /// True when ``record`` of both items holds the same fields: every field equal, flags compared only in
    /// the bits records carry.
    package func hasSameRecordFields(as other: ReadingHistoryItem) -> Bool {
        func same(_ a: Double, _ b: Double) -> Bool { a.isSameStoredValue(as: b) }
        return maxVersionSeen == other.maxVersionSeen && readCount == other.readCount && liking == other.liking
            && flags.intersection(Flags.recorded) == other.flags.intersection(Flags.recorded)
            && same(lastVisitedTime, other.lastVisitedTime) && same(firstSeenTime, other.firstSeenTime)
            && same(likingChangedAtTime, other.likingChangedAtTime) && hasSameDevice(as: other)
            && compactArticleID == other.compactArticleID
    }

    /// Reads an item from its record, throwing ``FlatSyncError/Code-swift.struct/malformedRecord`` when a
    /// required field is missing or has another type.
    public init(record: Record) throws(FlatSyncError) {
        // A record made by ``record`` holds the item: take it after the same checks as the fields' path.
        if let item = record.content.stored(as: ReadingHistoryItem.self), record.type == Self.recordType,
            record.id.zone == Self.zone, Self.isRecordName(record.id.name, of: item.compactArticleID)
        {
            try record.checkArticleID(item.articleID)
            self = item
            return
        }
        let articleID = try record.checkedArticleID(for: Self.self)
        let lastVisited = try record.optionalDate("lastVisited")
        let firstSeen = try record.optionalDate("firstSeen")
        let maxVersionSeen = try record.int("maxVersionSeen")
        let readCount = try record.int("readCount")
        let deviceID = try record.optionalString("deviceID")
        guard let liking = Liking(rawValue: try record.int("likingStatus")) else {
            throw FlatSyncError(.malformedRecord, "The record \(record.id) has an unknown likingStatus.")
        }
        let likingChangedAt = try record.optionalDate("likingChangedAt")
        var flags: Flags = []
        for (flag, key) in Flags.fields where try record.int(key) != 0 { flags.insert(flag) }
        self.init(
            articleID: articleID, lastVisited: lastVisited, firstSeen: firstSeen, maxVersionSeen: maxVersionSeen,
            readCount: readCount, deviceID: deviceID, liking: liking, likingChangedAt: likingChangedAt, flags: flags
        )
    }

    /// True when `name` is the record name of `articleID`, byte for byte.
    package static func isRecordName(_ name: String, of articleID: CompactString) -> Bool {
        var name = name
        return name.withUTF8 { articleBytes(ofRecordName: UnsafeRawBufferPointer($0)).map(articleID.hasBytes) ?? false }
    }

    /// The article ID's bytes in a record name (after `rh-`), nil for a name without the prefix. By bytes,
    /// as ``SyncedItem/articleID(fromRecordName:)`` reads a name, without making a `String`.
    package static func articleBytes(ofRecordName name: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard name.count >= 3, name[0] == 0x72, name[1] == 0x68, name[2] == 0x2D else { return nil }  // "rh-"
        return UnsafeRawBufferPointer(rebasing: name[3...])
    }

    /// Calls `body` with the record name of the article whose ID is these bytes, made on the stack: a
    /// `String` of it (25 bytes for a News ID, too long to be inline) would be an allocation.
    package static func withRecordName<R>(articleUTF8 id: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R)
        -> R
    {
        withUnsafeTemporaryAllocation(byteCount: id.count + 3, alignment: 1) { name in
            (name[0], name[1], name[2]) = (0x72, 0x68, 0x2D)  // "rh-"
            UnsafeMutableRawBufferPointer(rebasing: name[3...]).copyMemory(from: id)
            return body(UnsafeRawBufferPointer(name))
        }
    }

    /// Makes `device` the device of the latest visit.
    package mutating func setDevice(_ device: DeviceName?) {
        self.device = device
    }

    /// Field-wise merge (see <doc:HowSyncWorks>): the later `lastVisited` (with its device), the earliest
    /// `firstSeen`, the highest `maxVersionSeen` and `readCount`, every flag set on either side, and the
    /// liking set most recently. Ties break on the values themselves, so the merge is commutative,
    /// associative and idempotent.
    public func merged(with other: ReadingHistoryItem) -> ReadingHistoryItem {
        var result = self
        let mineVisit = (lastVisited ?? .distantPast, deviceID ?? "")
        let theirVisit = (other.lastVisited ?? .distantPast, other.deviceID ?? "")
        if theirVisit > mineVisit {
            result.lastVisited = other.lastVisited
            result.device = other.device
        }
        switch (firstSeen, other.firstSeen) {
        case (let mine?, let theirs?): result.firstSeen = min(mine, theirs)
        case (nil, let theirs): result.firstSeen = theirs
        case (_, nil): break
        }
        result.maxVersionSeen = max(maxVersionSeen, other.maxVersionSeen)
        result.readCount = max(readCount, other.readCount)
        result.flags.formUnion(other.flags)
        let mineLiking = (likingChangedAt ?? .distantPast, liking.rawValue)
        let theirLiking = (other.likingChangedAt ?? .distantPast, other.liking.rawValue)
        if theirLiking > mineLiking {
            result.liking = other.liking
            result.likingChangedAt = other.likingChangedAt
        }
        return result
    }

    public static func == (lhs: ReadingHistoryItem, rhs: ReadingHistoryItem) -> Bool {
        func same(_ a: Double, _ b: Double) -> Bool { a.isSameStoredValue(as: b) }
        return lhs.maxVersionSeen == rhs.maxVersionSeen && lhs.readCount == rhs.readCount
            && lhs.flags == rhs.flags && lhs.liking == rhs.liking && same(lhs.lastVisitedTime, rhs.lastVisitedTime)
            && same(lhs.firstSeenTime, rhs.firstSeenTime) && same(lhs.likingChangedAtTime, rhs.likingChangedAtTime)
            && lhs.hasSameDevice(as: rhs) && lhs.compactArticleID == rhs.compactArticleID
    }

    public func hash(into hasher: inout Hasher) {
        func time(_ value: Double) -> Double? { value.isNaN ? nil : value }
        hasher.combine(compactArticleID)
        hasher.combine(time(lastVisitedTime))
        hasher.combine(time(firstSeenTime))
        hasher.combine(maxVersionSeen)
        hasher.combine(readCount)
        hasher.combine(deviceID)
        hasher.combine(liking)
        hasher.combine(time(likingChangedAtTime))
        hasher.combine(flags)
    }

    public var description: String {
        var parts = [articleID]
        if let lastVisited { parts.append("visited \(lastVisited.formatted(.iso8601))") }
        if isRead { parts.append("read") }
        if liking != .none { parts.append(liking.description) }
        return parts.joined(separator: ", ")
    }
}

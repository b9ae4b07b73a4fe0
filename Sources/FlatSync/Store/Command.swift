/// Identifies a command in the queue; later commands have larger IDs.
package struct CommandID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The command's number; commands are numbered in the order they were created.
    package var rawValue: UInt64

    /// Wraps a command number.
    package init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    package static func < (lhs: CommandID, rhs: CommandID) -> Bool { lhs.rawValue < rhs.rawValue }
    package var description: String { "#\(rawValue)" }
}

/// A pending command: modify records in a zone, or remove records from it (News:
/// `FCModifyRecordsCommand`, `FCRemoveRecordsCommand`).
///
/// A command in the queue holds each record at most once. It leaves the queue only when the server
/// acknowledged every record in it.
package struct Command: Hashable, Sendable, Identifiable {
    /// Modify or remove.
    package enum Kind: UInt8, Hashable, Sendable, CustomStringConvertible {
        /// Save records.
        case modifyRecords = 1
        /// Delete records.
        case removeRecords = 2

        package var description: String { self == .modifyRecords ? "modify" : "remove" }
    }

    /// Identifies the command in its queue.
    package let id: CommandID
    /// The zone every record of the command lives in.
    package let zone: ZoneID
    /// Whether the command saves or deletes its records.
    package let kind: Kind
    /// The command's record changes in the order they joined it, nil where one left (acknowledged, moved
    /// to a command of the other kind, replaced by a newer change when a round ended, or a damaged log's
    /// second change of a record). The queue's index of pending records holds each record's
    /// position here, so a change joins its command without a second hash table keyed by record: one
    /// lookup per change instead of two, which were most of the cost of queueing a large batch.
    package private(set) var slots: [RecordChange?]
    /// The number of records in the command.
    package private(set) var recordCount: Int

    /// An empty command.
    package init(id: CommandID, zone: ZoneID, kind: Kind) {
        self.init(id: id, zone: zone, kind: kind, slots: [])
    }

    /// A command holding `slots` (a restored one; the queue drops a record's earlier change if it holds two).
    package init(id: CommandID, zone: ZoneID, kind: Kind, slots: [RecordChange?]) {
        self.id = id
        self.zone = zone
        self.kind = kind
        self.slots = slots
        recordCount = slots.indices.reduce(0) { $0 + (Self.isFilled(slots[$1]) ? 1 : 0) }
    }

    /// The command's record changes by record ID: a dictionary built for each call (to look up one record,
    /// use ``PendingCommands/change(of:in:)``).
    package var changes: [RecordID: RecordChange] {
        var changes: [RecordID: RecordChange] = [:]
        changes.reserveCapacity(recordCount)
        for case let change? in slots { changes[change.recordID] = change }
        return changes
    }

    /// The changes in the order they were made (by sequence, then record ID).
    package var orderedChanges: [RecordChange] {
        slots.compactMap { $0 }.sorted { ($0.sequence, $0.recordID) < ($1.sequence, $1.recordID) }
    }

    /// Two commands are equal when they have the same ID, zone, kind and changes, wherever their changes sit.
    package static func == (lhs: Command, rhs: Command) -> Bool {
        lhs.id == rhs.id && lhs.zone == rhs.zone && lhs.kind == rhs.kind && lhs.recordCount == rhs.recordCount
            && lhs.changes == rhs.changes
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(zone)
        hasher.combine(kind)
    }

    // MARK: - Changing slots (the queue keeps its index of positions in step)

    /// Adds a change at the end, at position `slots.count`.
    mutating func append(_ change: consuming RecordChange) {
        slots.append(consume change)
        recordCount += 1
    }

    /// Replaces the change at `slot`.
    mutating func replace(at slot: Int, with change: consuming RecordChange) {
        precondition(Self.isFilled(slots[slot]), "replacing a change that left its command")
        slots[slot] = consume change
    }

    /// Marks the save at `slot` as replacing its record, or not (see ``RecordChange/replacesRecord``).
    mutating func markReplacing(at slot: Int, _ replaces: Bool = true) {
        slots[slot]!.replacesRecord = replaces
    }

    /// Takes the change at `slot` out, leaving nil.
    mutating func remove(at slot: Int) {
        precondition(Self.isFilled(slots[slot]), "removing a change that left its command")
        slots[slot] = nil
        recordCount -= 1
    }

    /// Makes room for `count` more changes.
    mutating func reserveCapacity(forMore count: Int) {
        slots.reserveCapacity(slots.count + count)
    }

    /// True when most slots are empty, so the queue should close the gaps (``compacted()``).
    var isSparse: Bool { slots.count >= 32 && recordCount * 2 < slots.count }

    /// The command with its gaps closed: its changes in the same order, at new positions.
    func compacted() -> Command {
        Command(id: id, zone: zone, kind: kind, slots: slots.filter(Self.isFilled))
    }

    /// Whether a slot holds a change. (Matched: comparing with nil copied the change.)
    private static func isFilled(_ slot: RecordChange?) -> Bool {
        if case .some = slot { return true }
        return false
    }
}

extension RecordChange {
    /// The kind of command that carries this change.
    var commandKind: Command.Kind { isDelete ? .removeRecords : .modifyRecords }
}

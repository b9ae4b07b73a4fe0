/// Identifies a command in the queue; later commands have larger IDs.
public struct CommandID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The command's number; commands are numbered in the order they were created.
    public var rawValue: UInt64

    /// Wraps a command number.
    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public static func < (lhs: CommandID, rhs: CommandID) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "#\(rawValue)" }
}

/// A pending command: modify records in a zone, or remove records from it (News:
/// `FCModifyRecordsCommand`, `FCRemoveRecordsCommand`).
///
/// A command holds each record at most once. It leaves the queue only when the server acknowledged
/// every record in it.
public struct Command: Hashable, Sendable, Identifiable {
    /// Modify or remove.
    public enum Kind: UInt8, Hashable, Sendable, CustomStringConvertible {
        /// Save records.
        case modifyRecords = 1
        /// Delete records.
        case removeRecords = 2

        public var description: String { self == .modifyRecords ? "modify" : "remove" }
    }

    /// Identifies the command in its queue.
    public let id: CommandID
    /// The zone every record of the command lives in.
    public let zone: ZoneID
    /// Whether the command saves or deletes its records.
    public let kind: Kind
    /// The command's record changes by record ID.
    public internal(set) var changes: [RecordID: RecordChange]

    package init(id: CommandID, zone: ZoneID, kind: Kind, changes: [RecordID: RecordChange] = [:]) {
        self.id = id
        self.zone = zone
        self.kind = kind
        self.changes = changes
    }

    /// The changes in the order they were made (by sequence, then record ID).
    public var orderedChanges: [RecordChange] {
        changes.values.sorted { ($0.sequence, $0.recordID) < ($1.sequence, $1.recordID) }
    }

    /// The number of records in the command.
    public var recordCount: Int { changes.count }
}

extension RecordChange {
    /// The kind of command that carries this change.
    var commandKind: Command.Kind { isDelete ? .removeRecords : .modifyRecords }
}

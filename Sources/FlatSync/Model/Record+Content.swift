extension Record {
    /// What a record's fields are held as.
    ///
    /// A history item's record is made for every history mutation, written to the command log, queued, and
    /// read back from the log at every open; as a `[String: FieldValue]` each of those steps built, hashed or
    /// took apart a dictionary of about ten fields. A record made from an item keeps the item instead (in the
    /// form its fields describe: only the flags records carry) and builds the dictionary only when someone
    /// asks for ``Record/fields``. Both forms compare and hash by the fields they stand for. The item is
    /// boxed, so that a record stays small: a record is copied through every step of a sync.
    ///
    /// A reading-list entry's record keeps its entry the same way, so that an add or a remove builds no
    /// dictionary of four fields for the log to take apart again.
    package enum Content: Sendable {
        /// Fields by key.
        case fields([String: FieldValue])
        /// The fields of ``ReadingHistoryItem/record``.
        indirect case historyItem(ReadingHistoryItem)
        /// The fields of ``ReadingListEntry/record``.
        indirect case readingListEntry(ReadingListEntry)

        /// The fields by key.
        package var fields: [String: FieldValue] {
            switch self {
            case .fields(let fields): return fields
            case .historyItem(let item): return item.recordFields
            case .readingListEntry(let entry): return entry.recordFields
            }
        }

        /// How many fields ``fields`` holds.
        package var fieldCount: Int {
            switch self {
            case .fields(let fields): return fields.count
            case .historyItem(let item): return item.recordFields.count
            case .readingListEntry(let entry): return entry.title == nil ? 3 : 4
            }
        }

        /// Calls `body` with each field of ``fields``, in no set order; a reading-list entry's without building
        /// the dictionary.
        package func forEachField(_ body: (String, FieldValue) -> Void) {
            switch self {
            case .fields(let fields): for (key, value) in fields { body(key, value) }
            case .historyItem(let item): for (key, value) in item.recordFields { body(key, value) }
            case .readingListEntry(let entry): entry.forEachRecordField(body)
            }
        }

        /// True for a history item (see ``historyItem``).
        package var isHistoryItem: Bool {
            if case .historyItem = self { return true }
            return false
        }

        /// The history item, when the content is one.
        package var historyItem: ReadingHistoryItem? {
            if case .historyItem(let item) = self { return item }
            return nil
        }

        /// The value of one field.
        package func field(_ key: String) -> FieldValue? {
            switch self {
            case .fields(let fields): return fields[key]
            case .historyItem(let item): return item.recordField(key)
            case .readingListEntry(let entry): return entry.recordField(key)
            }
        }
    }
}

extension Record.Content: Equatable {
    /// Equal when they stand for equal fields.
    package static func == (lhs: Record.Content, rhs: Record.Content) -> Bool {
        switch (lhs, rhs) {
        case (.fields(let a), .fields(let b)): return a == b
        case (.historyItem(let a), .historyItem(let b)): return a.hasSameRecordFields(as: b)
        case (.readingListEntry(let a), .readingListEntry(let b)): return a.hasSameRecordFields(as: b)
        default: return lhs.fields == rhs.fields
        }
    }
}

extension Record {
    /// What a record's fields are held as: a dictionary, or a store's own value (see
    /// ``StoredRecordContent``).
    ///
    /// A history item's record is made for every history mutation, written to the command log, queued, and
    /// read back from the log at every open; as a `[String: FieldValue]` each of those steps built, hashed or
    /// took apart a dictionary of about ten fields. A record a store makes keeps the store's value instead
    /// and builds the dictionary only when someone asks for ``Record/fields``. Both forms compare and hash
    /// by the fields they stand for. The value is boxed, so that a record stays small: a record is copied
    /// through every step of a sync.
    package enum Content: Sendable {
        /// Fields by key.
        case fields([String: FieldValue])
        /// The fields of a store's value (see ``StoredRecordContentBox``).
        case stored(RecordContentBox)

        /// Content that is a store's value.
        package static func stored<Value: StoredRecordContent>(_ value: consuming Value) -> Content {
            .stored(StoredRecordContentBox(value))
        }

        /// The fields by key.
        package var fields: [String: FieldValue] {
            switch self {
            case .fields(let fields): return fields
            case .stored(let box): return box.fields
            }
        }

        /// How many fields ``fields`` holds.
        package var fieldCount: Int {
            switch self {
            case .fields(let fields): return fields.count
            case .stored(let box): return box.fieldCount
            }
        }

        /// Calls `body` with each field of ``fields``, in no set order; a store's value's without building
        /// the dictionary.
        package func forEachField(_ body: (String, FieldValue) -> Void) {
            switch self {
            case .fields(let fields): for (key, value) in fields { body(key, value) }
            case .stored(let box): box.forEachField(body)
            }
        }

        /// The store's value, when the content is one of type `Value`.
        package func stored<Value: StoredRecordContent>(as type: Value.Type) -> Value? {
            guard case .stored(let box) = self, let typed = box as? StoredRecordContentBox<Value> else { return nil }
            return typed.value
        }

        /// The box of the store's value, when the content is one.
        package var box: RecordContentBox? {
            if case .stored(let box) = self { return box }
            return nil
        }

        /// True when the content is a store's value that the command log writes in the store's own form.
        package var hasOwnLogForm: Bool {
            if case .stored(let box) = self { return box.hasOwnLogForm }
            return false
        }

        /// The value of one field.
        package func field(_ key: String) -> FieldValue? {
            switch self {
            case .fields(let fields): return fields[key]
            case .stored(let box): return box.field(key)
            }
        }
    }
}

extension Record.Content: Equatable {
    /// Equal when they stand for equal fields.
    package static func == (lhs: Record.Content, rhs: Record.Content) -> Bool {
        switch (lhs, rhs) {
        case (.fields(let a), .fields(let b)): return a == b
        case (.stored(let a), .stored(let b)): return a.hasSameFields(as: b)
        default: return lhs.fields == rhs.fields
        }
    }
}

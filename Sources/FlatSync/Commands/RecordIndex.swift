/// A dictionary keyed by record ID that keeps each key's hash beside it: the command queue's index of where
/// each record's change lives.
///
/// A `[RecordID: Value]` compares the key it looks for with every key in its probe sequence, and comparing
/// two record names reads both strings' storage: in a queue of 100,000 records, a new record's lookup
/// missed the cache at almost every probe. Here a probe compares the stored hashes first, and only equal
/// hashes compare the IDs. Growing the table hashes the stored hashes, not the names.
struct RecordIndex<Value> {
    /// A record ID and the hash of its name (``RecordID`` hashes its name alone).
    private struct Key: Hashable {
        let id: RecordID
        let hash: Int

        init(_ id: RecordID) {
            self.id = id
            self.hash = id.name.hashValue
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.hash == rhs.hash && lhs.id == rhs.id
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(hash)
        }
    }

    private var storage: [Key: Value] = [:]

    /// An empty index.
    init() {}

    /// The number of records indexed.
    var count: Int { storage.count }

    /// The value of a record, or nil; setting nil removes it.
    subscript(id: RecordID) -> Value? {
        get { storage[Key(id)] }
        set { storage[Key(id)] = newValue }
    }

    /// Stores `value` for a record, returning the value it replaced (one lookup).
    @discardableResult
    mutating func updateValue(_ value: Value, forKey id: RecordID) -> Value? {
        storage.updateValue(value, forKey: Key(id))
    }

    /// Makes room for `capacity` records.
    mutating func reserveCapacity(_ capacity: Int) {
        storage.reserveCapacity(capacity)
    }
}

extension RecordIndex: Sendable where Value: Sendable {}

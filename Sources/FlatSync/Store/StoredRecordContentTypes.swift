/// The types whose values records hold in a form of their own (see ``StoredRecordContent``): the built-in
/// stores' items. The command log finds the type that reads a save in its own form by the save's operation
/// byte.
package enum StoredRecordContentTypes {
    /// Every such type.
    package static let all: [any StoredRecordContent.Type] = [ReadingListEntry.self, ReadingHistoryItem.self]

    /// The type that reads each operation byte, by byte: an array, since the log looks one up for every
    /// change it reads.
    private static let byOperation: [(any StoredRecordContent.Type)?] = {
        var table: [(any StoredRecordContent.Type)?] = Array(repeating: nil, count: 256)
        for type in all {
            for operation in type.logOperations {
                // 1, 2, 5, 6, 7 and 8 are the log's own saves and deletes.
                precondition(![1, 2, 5, 6, 7, 8].contains(operation), "operation \(operation) is the log's own")
                precondition(table[Int(operation)] == nil, "two stores read operation \(operation)")
                table[Int(operation)] = type
            }
        }
        return table
    }()

    /// The type that reads saves written under `operation`, if any.
    package static func readingLogOperation(_ operation: UInt8) -> (any StoredRecordContent.Type)? {
        byOperation[Int(operation)]
    }
}

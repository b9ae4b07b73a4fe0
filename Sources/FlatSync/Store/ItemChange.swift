#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A change to one article's item, as the batch APIs take them: ``ReadingListChange`` or
/// ``ReadingHistoryChange``.
package protocol ItemChange: Sendable {
    associatedtype Item: RecordDiffable
    /// The article the change is about.
    var articleID: String { get }
    /// The item after the change, given the item before it.
    func applied(to item: Item?, now: Date, device: DeviceName) -> Item?
}

extension ReadingListChange: ItemChange {
    package func applied(to entry: ReadingListEntry?, now: Date, device: DeviceName) -> ReadingListEntry? {
        applied(to: entry, now: now)
    }
}

extension ReadingHistoryChange: ItemChange {}

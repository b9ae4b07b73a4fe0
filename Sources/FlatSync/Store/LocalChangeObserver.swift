#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Hears about local changes once they are durable; the sync engine schedules sends this way.
package protocol LocalChangeObserver: Sendable {
    /// A change in `zone` is durable: send it after `debounce`, or after the zone's own (the history's,
    /// else at once) when nil.
    func localChangeDidBecomeDurable(in zone: ZoneID, debounce: Duration?) async
}

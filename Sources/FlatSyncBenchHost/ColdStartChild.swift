import FlatSync
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The child process that measures the memory of a 100k cold start: it opens a device directory, reads
/// the history once and prints one JSON line of ``Output``.
///
/// It runs as `flatsync-bench-host DIR`, a host that links FlatSync and nothing else — the process the
/// memory targets are about — and as `flatsync-bench --cold-start-child DIR`, a host that also links the
/// CloudKit Web Services transport (FoundationNetworking, on Linux libcurl and its TLS chain).
package enum ColdStartChild {
    /// What the child prints.
    package struct Output: Codable, Sendable {
        package var items: Int
        package var milliseconds: Double
        package var peakResidentMegabytes: Double
        /// What `ru_maxrss` says, which on Linux includes the parent's peak (see ``peakResidentMegabytes()``).
        package var ruMaxrssMegabytes: Double
        /// VmRSS before the store was opened: the process itself.
        package var residentMegabytesBeforeOpen: Double
        /// VmRSS with the store open, after the first read was let go.
        package var openStoreResidentMegabytes: Double
        /// Dirty memory before the store was opened (see ``dirtyMegabytes()``).
        package var dirtyMegabytesBeforeOpen: Double
        /// Dirty memory with the store open, after the first read was let go.
        package var openStoreDirtyMegabytes: Double
    }

    /// The option that makes `flatsync-bench` the child.
    package static let argument = "--cold-start-child"

    /// In the child: open, read, report. The store is not closed (closing would write a snapshot); the
    /// lock goes with the process.
    package static func main(directory: String) async throws {
        let before = residentMegabytes()
        let dirtyBefore = dirtyMegabytes()
        var store: LocalStore?
        var items: [ReadingHistoryItem] = []
        let clock = ContinuousClock()
        let start = clock.now
        let opened = try LocalStore(directory: URL(fileURLWithPath: directory))
        items = await opened.history.items()
        store = opened
        let elapsed = clock.now - start
        let count = items.count
        let peak = peakResidentMegabytes()
        items = []
        // Whatever the open store holds now is what it keeps while the app runs.
        _ = await store?.history.count()
        let open = residentMegabytes()
        let dirtyOpen = dirtyMegabytes()
        withExtendedLifetime(store) {}
        let output = Output(
            items: count,
            milliseconds: elapsed.seconds * 1_000,
            peakResidentMegabytes: peak, ruMaxrssMegabytes: ruMaxrssMegabytes(),
            residentMegabytesBeforeOpen: before, openStoreResidentMegabytes: open,
            dirtyMegabytesBeforeOpen: dirtyBefore, openStoreDirtyMegabytes: dirtyOpen
        )
        print(String(decoding: try JSONEncoder().encode(output), as: UTF8.self))
    }
}

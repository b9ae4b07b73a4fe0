#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension SyncContext {
    /// How a context syncs.
    public struct Configuration: Sendable {
        /// When a mutation counts as done. Default: ``Durability/fsync``.
        public var durability: Durability = .fsync
        /// The device's ID in history items; `nil` keeps the one saved in the directory (a random UUID made on first
        /// open), which is what most hosts want: a copy of the directory (a backup restored on a second device) gets a
        /// new one when it first opens (``SyncEvent/deviceIDChanged(from:to:)`` says so). An ID given here must be
        /// unique to the device, and is kept in a copy too: the engine recognises its own writes on the server by it,
        /// so two devices sharing an ID would take each other's changes for their own.
        public var deviceID: String?
        /// Time for debounces and retries.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// The time stamped on entries and history items.
        public var currentDate: @Sendable () -> Date = { Date() }
        /// How long history changes wait before they are sent; each new change pushes it back.
        public var historyDebounce: Duration = .seconds(5)
        /// The most records in one modify request (never more than the transport accepts).
        public var batchSize = 100
        /// The most records one fetch page asks for. A transport may ask for fewer: CloudKit Web Services
        /// answers at most 200 records per response, so its transport asks for no more than that.
        public var fetchResultsLimit = 400
        /// How long to wait after a failure.
        public var retryPolicy = RetryPolicy.default
        /// Seeds the retry jitter, for tests that need it to repeat; `nil` seeds from the system.
        public var randomSeed: UInt64?
        /// How long after a local change the snapshot is written.
        public var snapshotDelay: Duration = .seconds(1)
        /// How long history items are kept, and which seed a fresh zone.
        public var historyRetention = HistoryRetention.default
        /// The host-defined record types to sync beside the reading list and history (see
        /// ``SyncableRecord``); read and write them through ``SyncContext/records(_:)``.
        public var recordTypes: [any SyncableRecord.Type] = []
        /// Where the store's file-system calls go: the real file system, or a test double.
        package var fileSystem = FileSystem.posix
        /// The fewest fetched records a long fetch takes in at once before its last page: a few pages'
        /// worth, so that a large zone's first fetch keeps its progress without a snapshot for every page.
        /// Tests make it small, so that short fetches come in parts too.
        package var fetchPartRecords = 1_000

        /// The default configuration: `fsync` durability, the continuous clock, a 5 s history debounce.
        public init() {}

        /// A configuration with a clock (a `TestClock` in tests) and the rest as defaults.
        public init(clock: any Clock<Duration>) {
            self.clock = clock
        }

        /// The CloudKit schema the context writes: FlatSync's own stores' and ``recordTypes``'.
        public var schema: CloudSchema { .flatSync(adding: recordTypes) }

        var storeOptions: LocalStore.Options {
            var options = LocalStore.Options(
                durability: durability, deviceID: deviceID, clock: clock, currentDate: currentDate,
                snapshotDelay: snapshotDelay, historyRetention: historyRetention, recordTypes: recordTypes
            )
            options.fileSystem = fileSystem
            return options
        }
    }
}

/// How far a local change must travel before the mutation that made it returns.
///
/// Choose the level when you open a device directory. Both levels keep every acknowledged change when the
/// process is killed; they differ in what a power loss or an operating-system crash can take away.
///
/// | level | a mutation returns after its log entry is… | survives a killed process | survives power loss |
/// |---|---|---|---|
/// | ``fsync`` | flushed to stable storage | yes | yes |
/// | ``buffered`` | handed to the kernel with `write(2)` | yes | no |
///
/// Concurrent mutations share one flush (group commit), so ``fsync`` costs about one disk flush per burst
/// of callers, not one per mutation.
public enum Durability: String, Sendable, Hashable, Codable, CaseIterable {
    /// The default. A mutation returns after its log entry has been flushed to stable storage with
    /// `fsync` (`fcntl(F_FULLFSYNC)` on Apple platforms, whose plain `fsync` may leave the data in the
    /// drive's cache).
    ///
    /// An acknowledged change survives the process being killed, an operating-system crash and a power
    /// loss.
    case fsync

    /// A mutation returns after its log entry has been written to the file with `write(2)`, without
    /// waiting for a flush to stable storage.
    ///
    /// The entry sits in the kernel's page cache, so an acknowledged change survives the process being
    /// killed or crashing, but an operating-system crash or a power loss can lose the most recent changes.
    /// That is the promise of SQLite's write-ahead log with `synchronous=NORMAL` (GRDB's default), at a
    /// small fraction of the cost of ``fsync``.
    case buffered
}

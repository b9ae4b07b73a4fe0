import FlatSync
import Foundation

/// Opening a device directory that another demo process may hold for a moment (a `watch` syncing, a
/// `sync` in another terminal).
enum DeviceDirectory {
    /// How long a command waits for another process to let go of the device directory.
    static let lockWait: Duration = .seconds(10)

    /// Runs `open`, trying again while the directory is locked by another process, for up to ``lockWait``;
    /// then the `storeLocked` error goes to the user.
    static func open<T>(_ open: () async throws -> T) async throws -> T {
        let clock = ContinuousClock()
        let deadline = clock.now + lockWait
        while true {
            do {
                return try await open()
            } catch let error as FlatSyncError where error.code == .storeLocked && clock.now < deadline {
                try await clock.sleep(for: .milliseconds(50))
            }
        }
    }
}

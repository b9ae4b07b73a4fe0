import Synchronization

/// A device ID that every history item last visited by that device shares: an item holds 8 bytes for it
/// instead of a `String?`'s 16, and all of them hold one copy of the ID.
package final class DeviceName: Sendable {
    /// The device ID.
    package let value: String

    private init(_ value: String) {
        self.value = value
    }

    /// The shared name for `value`: the same object every time for the first 64 distinct IDs a process
    /// sees (a user has a handful of devices), a new one each time beyond them, so that a stream of
    /// made-up IDs cannot grow the cache without bound.
    package static func named(_ value: String) -> DeviceName {
        cache.withLock { cache in
            if let name = cache[value] { return name }
            let name = DeviceName(value)
            if cache.count < 64 { cache[value] = name }
            return name
        }
    }

    private static let cache = Mutex<[String: DeviceName]>([:])

    /// True when both name the same device.
    package static func same(_ a: DeviceName?, _ b: DeviceName?) -> Bool {
        a === b || a?.value == b?.value
    }
}

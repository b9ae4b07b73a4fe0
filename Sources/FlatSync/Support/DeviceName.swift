import Synchronization

/// A device ID that every history item last visited by that device shares: an item holds 8 bytes for it
/// instead of a `String?`'s 16, and all of them hold one copy of the ID.
///
/// The first 64 distinct IDs a process sees are *shared* names, kept for the life of the process and
/// numbered (``sharedIndex``): an item holds the number, not a reference, so copying an item retains and
/// releases nothing for its device. (Every item of a burst holds the store's own device; copies of it on two
/// threads at once, each retaining and releasing that one object, left the second thread almost nothing to
/// gain.)
package final class DeviceName: Sendable {
    /// The device ID.
    package let value: String
    /// The name's number among the shared names (see ``shared(at:)``), or nil for a name made once there
    /// were 64 of them.
    package let sharedIndex: UInt32?

    private init(_ value: String, sharedIndex: UInt32?) {
        self.value = value
        self.sharedIndex = sharedIndex
    }

    /// How many shared names a process keeps: a user has a handful of devices, and a stream of made-up IDs
    /// must not grow the table without bound.
    private static let sharedCapacity = 64

    /// The shared name for `value`: the same object every time for the first 64 distinct IDs a process
    /// sees, a new one each time beyond them.
    package static func named(_ value: String) -> DeviceName {
        cache.withLock { cache in
            if let name = cache[value] { return name }
            guard cache.count < sharedCapacity else { return DeviceName(value, sharedIndex: nil) }
            let index = cache.count
            let name = DeviceName(value, sharedIndex: UInt32(index))
            cache[value] = name
            // Before the name is returned, so that no one holds its number before the slot holds it.
            sharedNames.publish(name, at: index)
            return name
        }
    }

    /// A name for `value` made as one beyond the shared ones is (no number, not kept): tests reach that form
    /// without filling the process's table.
    package static func unshared(_ value: String) -> DeviceName {
        DeviceName(value, sharedIndex: nil)
    }

    /// The shared name numbered `index` (a ``sharedIndex``), found without a lock.
    package static func shared(at index: UInt32) -> DeviceName {
        sharedNames.name(at: Int(index))
    }

    private static let cache = Mutex<[String: DeviceName]>([:])
    private static let sharedNames = SharedNames(capacity: sharedCapacity)

    /// True when both name the same device.
    package static func same(_ a: DeviceName?, _ b: DeviceName?) -> Bool {
        a === b || a?.value == b?.value
    }
}

/// The shared device names by number, readable without taking the cache's lock (records are made on two
/// threads at once, each reading the device of every item).
///
/// `@unchecked Sendable`: each slot is written once, under the cache's lock, by a releasing atomic store
/// made before the name's number is handed to anyone, and read by acquiring atomic loads; the names it
/// points to are never freed (the cache holds them for the life of the process).
private final class SharedNames: @unchecked Sendable {
    private let slots: UnsafeMutablePointer<Atomic<UInt>>
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        slots = .allocate(capacity: capacity)
        for index in 0..<capacity { (slots + index).initialize(to: Atomic(0)) }
    }

    func publish(_ name: DeviceName, at index: Int) {
        precondition(index < capacity, "a shared device name beyond the table")
        slots[index].store(UInt(bitPattern: Unmanaged.passUnretained(name).toOpaque()), ordering: .releasing)
    }

    func name(at index: Int) -> DeviceName {
        precondition(index < capacity, "a shared device name beyond the table")
        let bits = slots[index].load(ordering: .acquiring)
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else {
            preconditionFailure("a shared device name read before it was published")
        }
        return Unmanaged<DeviceName>.fromOpaque(pointer).takeUnretainedValue()
    }
}

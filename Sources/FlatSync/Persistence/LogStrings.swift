#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Strings that recur from one log entry to the next, shared instead of read again: zone names and device
/// IDs (see ``BinaryReader/readString(reusing:)``), and the device IDs' ``DeviceName``s.
package struct LogStrings {
    var strings: [String] = []
    private var devices: [DeviceName] = []
    /// The devices the entry being read has numbered so far (see ``InternedWriter/writeNumbered(_:)``).
    private var entryDevices: [DeviceName] = []

    package init() {}

    /// Forgets the numbered devices of the entry read before: each entry numbers its own.
    mutating func startEntry() {
        entryDevices.removeAll(keepingCapacity: true)
    }

    /// Reads a device as operation 4 writes it.
    mutating func readNumberedDevice(_ reader: inout BinaryReader) throws(FlatSyncError) -> DeviceName? {
        switch try reader.readVarint() {
        case 0:
            return nil
        case 1:
            let name = device(try reader.readString(reusing: &strings))
            entryDevices.append(name)
            return name
        case let reference:
            let number = reference - 2
            guard number < UInt64(entryDevices.count) else {
                throw FlatSyncError(
                    .damagedFile, "A history record names device \(number) of the \(entryDevices.count) its entry has.")
            }
            return entryDevices[Int(number)]
        }
    }

    /// The shared name of a device ID read from the log.
    mutating func device(_ id: String) -> DeviceName {
        if let name = devices.first(where: { $0.value == id }) { return name }
        let name = DeviceName.named(id)
        devices.insert(name, at: 0)
        if devices.count > 4 { devices.removeLast() }
        return name
    }
}

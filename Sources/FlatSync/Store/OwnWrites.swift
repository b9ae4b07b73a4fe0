#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What tells this device's own versions of a record from everyone else's: the mark each save carries
/// (``Record/lastModifiedBy``), `<session>@<deviceID>`, names the device and the session that sent it,
/// and the device remembers the sessions it sent from (``LocalStore``'s `writer-sessions` file).
///
/// A version this device wrote is one it had seen, so a delete that meets it may delete it after all (a
/// save whose answer was lost). The device ID alone said so of versions the device cannot have seen: a
/// directory restored from a backup, or copied to a second device, carries the ID, but not the sessions
/// that wrote after the backup, or on the other copy. Their versions now count as someone else's, and an
/// edit in them beats a delete that never saw it.
package struct OwnWrites: Sendable {
    /// This device's ID.
    package let deviceID: String
    /// The sessions this device remembers sending from.
    package var sessions: Set<String>

    package init(deviceID: String, sessions: Set<String>) {
        self.deviceID = deviceID
        self.sessions = sessions
    }

    /// True when this device wrote `record` in a session it remembers; also for a version marked with the
    /// device ID alone, as FlatSync marked them before sessions (which only this directory's past wrote).
    package func wrote(_ record: Record) -> Bool {
        guard let mark = record.lastModifiedBy else { return false }
        if mark == deviceID { return true }
        guard let at = mark.firstIndex(of: "@"), mark[mark.index(after: at)...] == deviceID else { return false }
        return sessions.contains(String(mark[..<at]))
    }

    /// The mark of a save sent in `session` by the device `deviceID`.
    package static func mark(session: String, deviceID: String) -> String {
        "\(session)@\(deviceID)"
    }
}

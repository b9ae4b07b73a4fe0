#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What tells this device's own versions of a record from everyone else's. Each save carries a mark
/// (``Record/lastModifiedBy``), `<session>:<sequence>@<deviceID>`: the device, the run of the store that
/// sent it (a session, remembered in the directory's `writer-sessions` file, with the number of its run's
/// first mutation, before the run logs a mutation or makes a request), and the number of the newest
/// mutation the store had made when it sent the save (so at least that of anything the save holds).
///
/// A version this device wrote is one it had seen, so a delete that meets it may delete it after all (a
/// save whose answer was lost). The device ID alone said so of versions the device cannot have seen: a
/// directory restored from a backup, or copied to a second device, carries the ID. A version counts as
/// this device's own only when its session is this run's, or an earlier one the directory remembers and
/// its mutation is older than any later session the directory remembers began with (and than this run's
/// first): a mutation made after a backup (or a copy) was taken, in the run that was open then, has a
/// number the restored directory (or the copy) had not reached when its first run that changed or sent
/// anything began. Its versions count as someone else's, and an edit in them beats a delete that never saw
/// it, however many runs later the delete is sent.
package struct OwnWrites: Sendable {
    /// This device's ID.
    package let deviceID: String
    /// The sessions this device remembers, each with the number of the first mutation it cannot have made
    /// as far as this directory knows (where a later session began).
    package var sessions: [String: UInt64]
    /// This run's session, once it has one.
    package var currentSession: String?

    package init(deviceID: String, sessions: [String: UInt64], currentSession: String? = nil) {
        self.deviceID = deviceID
        self.sessions = sessions
        self.currentSession = currentSession
    }

    /// True when this device wrote `record` in this run, or in an earlier session it remembers from a
    /// mutation made before the sessions after it began; also for a version marked with the device ID alone,
    /// as FlatSync marked them before sessions (which only this directory's past wrote).
    package func wrote(_ record: Record) -> Bool {
        guard let mark = record.lastModifiedBy else { return false }
        if mark == deviceID { return true }
        guard let at = mark.firstIndex(of: "@"), mark[mark.index(after: at)...] == deviceID,
            let colon = mark[..<at].firstIndex(of: ":"), let sequence = UInt64(mark[mark.index(after: colon)..<at])
        else { return false }
        let session = String(mark[..<colon])
        if session == currentSession { return true }
        guard let bound = sessions[session] else { return false }
        return sequence < bound
    }

    /// The mark of a save sent in `session` by the device `deviceID`, holding mutations up to `sequence`.
    package static func mark(session: String, sequence: UInt64, deviceID: String) -> String {
        "\(session):\(sequence)@\(deviceID)"
    }
}

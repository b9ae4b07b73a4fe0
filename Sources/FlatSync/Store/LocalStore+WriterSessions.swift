#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The sessions this device sent saves from (see ``OwnWrites``): one made for each run of the store that
/// sends, noted durably before any record carries it.
extension LocalStore {
    /// The file of the sessions, one per line, oldest first.
    static let writerSessionsFileName = "writer-sessions"
    /// How many sessions the file keeps: one per run of the store that sent anything. A version written in
    /// a session older than that, its answer lost and the version unfetched ever since, counts as someone
    /// else's: a delete this device made after it then loses to it, and the record comes back.
    static let rememberedWriterSessions = 4_096

    /// What tells this device's own versions from others'. Read from the file on first use; while it cannot
    /// be read, only this run's session counts (a version of an earlier one then counts as someone else's).
    package func ownWrites() -> OwnWrites {
        if let ownWritesCache { return ownWritesCache }
        guard let sessions = try? readWriterSessions() else {
            // Not kept: the next call reads again.
            return OwnWrites(deviceID: deviceID, sessions: [], firstSequenceOfRun: firstSequenceOfRun)
        }
        let own = OwnWrites(deviceID: deviceID, sessions: Set(sessions), firstSequenceOfRun: firstSequenceOfRun)
        ownWritesCache = own
        return own
    }

    /// This run's session, which its saves' marks name (see ``OwnWrites``): made and written to the sessions
    /// file, durably, on first use, before any request can carry it.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be read or written.
    package func writerSession() throws(FlatSyncError) -> String {
        if let session = ownWritesCache?.currentSession { return session }
        var sessions = try readWriterSessions()
        let session = String(UInt64.random(in: .min ... .max), radix: 16)
        sessions.append(session)
        sessions = Array(sessions.suffix(Self.rememberedWriterSessions))
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            Data(sessions.map { $0 + "\n" }.joined().utf8),
            to: directory.appendingPathComponent(Self.writerSessionsFileName))
        var own = ownWritesCache ?? OwnWrites(deviceID: deviceID, sessions: [], firstSequenceOfRun: firstSequenceOfRun)
        own.sessions.formUnion(sessions)
        own.currentSession = session
        ownWritesCache = own
        return session
    }

    /// The sessions in the file, oldest first; none when there is no file. A line that is not a session
    /// (the file damaged) is left out: a version of that session then counts as someone else's.
    private func readWriterSessions() throws(FlatSyncError) -> [String] {
        let path = directory.appendingPathComponent(Self.writerSessionsFileName).path
        guard let data = try options.fileSystem.readFile(path) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init).filter { line in
            !line.isEmpty && line.count <= 16 && line.allSatisfy(\.isHexDigit)
        }
    }
}

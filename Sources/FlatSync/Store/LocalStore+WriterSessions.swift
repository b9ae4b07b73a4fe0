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
    /// How many sessions the file keeps. A version written in a session older than that, met unanswered and
    /// unfetched ever since, counts as someone else's: its edit then beats this device's delete (the record
    /// comes back), which loses nothing.
    static let rememberedWriterSessions = 256

    /// What tells this device's own versions from others'. Read from the file on first use; when it cannot
    /// be read, only this run's session counts (a version of an earlier one then counts as someone else's).
    package func ownWrites() -> OwnWrites {
        if let ownWritesCache { return ownWritesCache }
        let sessions = (try? readWriterSessions()) ?? []
        let own = OwnWrites(deviceID: deviceID, sessions: Set(sessions))
        ownWritesCache = own
        return own
    }

    /// The mark this run's saves carry (``Record/lastModifiedBy``): its session is made and written to the
    /// sessions file, durably, on first use, before any request can carry it.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be read or written.
    package func writerMark() throws(FlatSyncError) -> String {
        if let currentWriterMark { return currentWriterMark }
        var sessions = try readWriterSessions()
        let session = String(UInt64.random(in: .min ... .max), radix: 16)
        sessions.append(session)
        sessions = Array(sessions.suffix(Self.rememberedWriterSessions))
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            Data(sessions.map { $0 + "\n" }.joined().utf8),
            to: directory.appendingPathComponent(Self.writerSessionsFileName))
        var own = ownWritesCache ?? OwnWrites(deviceID: deviceID, sessions: [])
        own.sessions.formUnion(sessions)
        ownWritesCache = own
        let mark = OwnWrites.mark(session: session, deviceID: deviceID)
        currentWriterMark = mark
        return mark
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

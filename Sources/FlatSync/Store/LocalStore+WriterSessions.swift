#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The sessions this device made mutations or sent saves from (see ``OwnWrites``): one for each run of the
/// store that does either, noted durably, with the number of the run's first mutation, before the run's
/// first mutation is logged or its first request made.
extension LocalStore {
    /// The file of the sessions, one per line, oldest first: `<session> <first sequence of its run>`.
    static let writerSessionsFileName = "writer-sessions"
    /// How many sessions the file keeps: one per run of the store that changed or sent anything. A version
    /// written in a session older than that, its answer lost and the version unfetched ever since, counts
    /// as someone else's: a delete this device made after it then loses to it, and the record comes back.
    static let rememberedWriterSessions = 4_096

    /// A session as the file holds it: its name, and the number of its run's first mutation (none in a line
    /// written before the file held numbers).
    struct WriterSessionLine: Equatable {
        var session: String
        var firstSequence: UInt64?
    }

    /// What tells this device's own versions from others'. Read from the file on first use; while it cannot
    /// be read, no session counts (a version of an earlier one then counts as someone else's; this run has
    /// made none, since it could not note its session either).
    package func ownWrites() -> OwnWrites {
        if let ownWritesCache { return ownWritesCache }
        guard let lines = try? readWriterSessions() else {
            // Not kept: the next call reads again.
            return OwnWrites(deviceID: deviceID, sessions: [:])
        }
        let own = OwnWrites(
            deviceID: deviceID, sessions: Self.bounds(of: lines, firstSequenceOfRun: firstSequenceOfRun))
        ownWritesCache = own
        return own
    }

    /// Makes sure a mutation can be logged (``checkWritable()``) and that this run's session is noted first
    /// (``writerSession()``): a later run must know where this one's mutations begin, or it would take a
    /// version of an earlier session made after a backup for its own (see ``OwnWrites``).
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the log or the sessions file cannot be
    ///   written; nothing changed then.
    package func checkMutable() throws(FlatSyncError) {
        try checkWritable()
        _ = try writerSession()
    }

    /// This run's session, which its saves' marks name (see ``OwnWrites``): made and written to the sessions
    /// file, durably, with the number of the run's first mutation, on first use, which comes before the
    /// run's first mutation is logged and before any request can carry it.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be read or written.
    package func writerSession() throws(FlatSyncError) -> String {
        if let session = ownWritesCache?.currentSession { return session }
        var lines = try readWriterSessions()
        let session = String(UInt64.random(in: .min ... .max), radix: 16)
        lines.append(WriterSessionLine(session: session, firstSequence: firstSequenceOfRun))
        lines = Array(lines.suffix(Self.rememberedWriterSessions))
        let text = lines.map { line in
            line.firstSequence.map { "\(line.session) \($0)\n" } ?? "\(line.session)\n"
        }
        try DurableFileWriter(fileSystem: options.fileSystem).write(
            Data(text.joined().utf8), to: directory.appendingPathComponent(Self.writerSessionsFileName))
        ownWritesCache = OwnWrites(
            deviceID: deviceID, sessions: Self.bounds(of: lines, firstSequenceOfRun: firstSequenceOfRun),
            currentSession: session)
        return session
    }

    /// Each session's bound: the number of the first mutation it cannot have made, as far as this directory
    /// knows. That is where the next session in the file began (the directory's past, restored from a backup
    /// or not, goes on from there), or this run's first mutation for the newest: the smallest of the numbers
    /// after it and this run's first. A line without a number (an earlier FlatSync's) bounds no other.
    static func bounds(of lines: [WriterSessionLine], firstSequenceOfRun: UInt64) -> [String: UInt64] {
        var bounds: [String: UInt64] = [:]
        var bound = firstSequenceOfRun
        for line in lines.reversed() {
            bounds[line.session] = min(bounds[line.session] ?? .max, bound)
            // The smaller, should a damaged file hold numbers out of order: fewer versions then count as own.
            if let first = line.firstSequence { bound = min(bound, first) }
        }
        return bounds
    }

    /// The sessions in the file, oldest first; none when there is no file.
    private func readWriterSessions() throws(FlatSyncError) -> [WriterSessionLine] {
        let path = directory.appendingPathComponent(Self.writerSessionsFileName).path
        guard let data = try options.fileSystem.readFile(path) else { return [] }
        return Self.writerSessionLines(in: data)
    }

    /// The lines of a sessions file. A line that is not a session (the file damaged) is left out: a version
    /// of that session then counts as someone else's.
    static func writerSessionLines(in data: Data) -> [WriterSessionLine] {
        String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            let parts = line.split(separator: " ", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let session = parts.first, !session.isEmpty, session.count <= 16,
                session.allSatisfy(\.isHexDigit)
            else { return nil }
            guard parts.count == 2 else { return WriterSessionLine(session: String(session), firstSequence: nil) }
            guard let first = UInt64(parts[1]) else { return nil }
            return WriterSessionLine(session: String(session), firstSequence: first)
        }
    }
}

import FlatSync
import Foundation

// The SQLite anchors of the Performance article (Sources/FlatSync/FlatSync.docc/Performance.md), measured in
// the same run as FlatSync's figures and interleaved with
// them: tables shaped like FlatSync's rows, configured as GRDB configures SQLite (WAL; `synchronous=FULL`
// for a durable write, `NORMAL` for GRDB's default; one transaction per write, or one for a burst;
// prepared statements cached). They call SQLite's C API directly, so they carry none of GRDB's own
// per-row work (record encoding, row adapters): a stricter anchor than GRDB itself.

enum SQLiteAnchors {
    /// The library, or nil after noting in `results` that the anchors were not measured.
    static func library(noting results: inout Results) -> SQLiteLibrary? {
        switch SQLiteLibrary.shared {
        case .success(let library):
            return library
        case .failure(let error):
            results.note("SQLite anchors not measured: \(error.description)")
            return nil
        }
    }

    static let createHistory = """
        CREATE TABLE history (articleID TEXT NOT NULL PRIMARY KEY, lastVisited REAL, firstSeen REAL, \
        maxVersionSeen INTEGER NOT NULL, readCount INTEGER NOT NULL, deviceID TEXT, \
        likingStatus INTEGER NOT NULL, likingChangedAt REAL, flags INTEGER NOT NULL, changeTag TEXT)
        """
    static let insertHistory = """
        INSERT INTO history (articleID, lastVisited, firstSeen, maxVersionSeen, readCount, deviceID, \
        likingStatus, likingChangedAt, flags, changeTag) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let createReadingList = """
        CREATE TABLE readingList (articleID TEXT NOT NULL PRIMARY KEY, dateAdded REAL NOT NULL, \
        origin INTEGER NOT NULL, title TEXT)
        """
    static let insertReadingList = "INSERT INTO readingList (articleID, dateAdded, origin, title) VALUES (?, ?, ?, ?)"

    /// A device ID as long as FlatSync's (a UUID string), stamped on every history row.
    static let deviceID = "5F0C1A62-4D0B-4A8E-9C3B-2E7D9A1B6C44"

    /// A new database file with the history and reading-list tables.
    static func create(
        at url: URL, synchronous: SQLiteConnection.Synchronous, library: SQLiteLibrary
    ) throws -> SQLiteConnection {
        let connection = try SQLiteConnection(path: url.path, synchronous: synchronous, library: library)
        try connection.execute(createHistory)
        try connection.execute(createReadingList)
        return connection
    }

    /// Inserts history rows for articles `range` as a visit leaves them (read and seen, one visit).
    /// `synced` rows carry a server change tag, as rows a device has synced do; new visits carry none.
    static func insertVisits(
        _ range: Range<Int>, into connection: SQLiteConnection, now: Double, synced: Bool = false
    ) throws {
        let statement = try connection.cachedStatement(insertHistory)
        for index in range {
            statement.bind(Measurements.historyArticle(index), at: 1)
            statement.bind(now, at: 2)
            statement.bind(now, at: 3)
            statement.bind(Int64(1), at: 4)
            statement.bind(Int64(1), at: 5)
            statement.bind(deviceID, at: 6)
            statement.bind(Int64(0), at: 7)
            statement.bind(Double?.none, at: 8)
            statement.bind(Int64(3), at: 9)
            statement.bind(synced ? Measurements.serverChangeTag().rawValue : nil, at: 10)
            try statement.run()
        }
    }

    /// Milliseconds since 2001 at millisecond precision, as FlatSync stamps its dates.
    static func now() -> Double {
        (Date().timeIntervalSinceReferenceDate * 1000).rounded() / 1000
    }

    // MARK: - Single writes

    /// A database with `rows` history rows, ready to time inserts of reading-list rows, each in its own
    /// transaction (`BEGIN IMMEDIATE`, `INSERT`, `COMMIT`: GRDB's `write { try entry.insert(db) }`).
    final class InsertQueue {
        private let connection: SQLiteConnection
        private var added = 0

        init(in directory: URL, synchronous: SQLiteConnection.Synchronous, rows: Int, library: SQLiteLibrary)
            throws
        {
            connection = try create(
                at: directory.appendingPathComponent("anchor.sqlite"), synchronous: synchronous, library: library)
            let now = SQLiteAnchors.now()
            try connection.transaction { try insertVisits(0..<rows, into: connection, now: now) }
            for _ in 0..<Measurements.sendRoundInterval { _ = try timedInsert() }  // warm-up, as the stores had
        }

        /// Inserts the next reading-list row in its own transaction; returns the milliseconds it took.
        func timedInsert() throws -> Double {
            let article = "sqlite-" + Measurements.readingListArticle(added)
            added += 1
            let start = benchClock.now
            try connection.transaction {
                let statement = try connection.cachedStatement(insertReadingList)
                statement.bind(article, at: 1)
                statement.bind(SQLiteAnchors.now(), at: 2)
                statement.bind(Int64(0), at: 3)
                statement.bind(String?.none, at: 4)
                try statement.run()
            }
            return (benchClock.now - start).milliseconds
        }
    }

    // MARK: - Burst

    /// Inserts `count` history rows in one transaction into a new `synchronous=FULL` database in
    /// `directory`; returns the milliseconds from `BEGIN` to the end of `COMMIT`.
    static func timedBurst(count: Int, in directory: URL, library: SQLiteLibrary) throws -> Double {
        let connection = try create(
            at: directory.appendingPathComponent("burst.sqlite"), synchronous: .full, library: library)
        let now = now()
        let start = benchClock.now
        try connection.transaction { try insertVisits(0..<count, into: connection, now: now) }
        return (benchClock.now - start).milliseconds
    }

    // MARK: - Cold start

    /// A closed database file holding `rows` history rows, for cold starts.
    static func makeHistoryDatabase(at url: URL, rows: Int, library: SQLiteLibrary) throws {
        let connection = try create(at: url, synchronous: .normal, library: library)
        let now = now()
        for start in stride(from: 0, to: rows, by: 10_000) {
            try connection.transaction {
                try insertVisits(start..<min(rows, start + 10_000), into: connection, now: now, synced: true)
            }
        }
    }

    /// Opens `url` and fetches every history row into ``ReadingHistoryItem`` values and its change tag
    /// (GRDB's `Item.fetchAll(db)` of a record type with a tag column); returns the items, their tags
    /// and the connection, which the caller closes untimed.
    static func loadAll(
        _ url: URL, library: SQLiteLibrary
    ) throws -> ([ReadingHistoryItem], [ChangeTag?], SQLiteConnection) {
        let connection = try SQLiteConnection(path: url.path, synchronous: .normal, library: library)
        let statement = try connection.cachedStatement(
            "SELECT articleID, lastVisited, firstSeen, maxVersionSeen, readCount, deviceID, likingStatus, "
                + "likingChangedAt, flags, changeTag FROM history")
        var items: [ReadingHistoryItem] = []
        var tags: [ChangeTag?] = []
        func date(_ column: Int32) -> Date? {
            statement.optionalDouble(column).map(Date.init(timeIntervalSinceReferenceDate:))
        }
        while try statement.next() {
            items.append(
                ReadingHistoryItem(
                    articleID: statement.string(0), lastVisited: date(1), firstSeen: date(2),
                    maxVersionSeen: statement.int64(3), readCount: statement.int64(4),
                    deviceID: statement.optionalString(5),
                    liking: ReadingHistoryItem.Liking(rawValue: statement.int64(6)) ?? .none,
                    likingChangedAt: date(7), flags: ReadingHistoryItem.Flags(rawValue: statement.int64(8))
                ))
            tags.append(statement.optionalString(9).map(ChangeTag.init(rawValue:)))
        }
        statement.resetForReuse()
        return (items, tags, connection)
    }
}

import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// SQLite for the anchors, loaded at run time: the package has no dependencies, so the benchmark finds the
// system's libsqlite3 with dlopen and calls the handful of C functions it needs through dlsym. When the
// library is missing the anchors are simply not measured.

/// The system's SQLite library, or nil when it cannot be loaded.
///
/// `@unchecked Sendable`: every stored property is a `let` holding a C function pointer (or the library
/// handle, never closed), and SQLite's functions may be called from any thread on distinct connections.
final class SQLiteLibrary: @unchecked Sendable {
    typealias Handle = OpaquePointer

    let version: String

    // The C functions, as their prototypes in sqlite3.h.
    fileprivate let open:
        @convention(c) (
            UnsafePointer<CChar>?, UnsafeMutablePointer<OpaquePointer?>?, Int32, UnsafePointer<CChar>?
        ) -> Int32
    fileprivate let close: @convention(c) (OpaquePointer?) -> Int32
    fileprivate let exec:
        @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>?, UnsafeRawPointer?, UnsafeMutableRawPointer?,
            UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        ) -> Int32
    fileprivate let prepare:
        @convention(c) (
            OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafeMutablePointer<OpaquePointer?>?,
            UnsafeMutablePointer<UnsafePointer<CChar>?>?
        ) -> Int32
    fileprivate let finalize: @convention(c) (OpaquePointer?) -> Int32
    fileprivate let reset: @convention(c) (OpaquePointer?) -> Int32
    fileprivate let step: @convention(c) (OpaquePointer?) -> Int32
    /// `sqlite3_bind_text`; the destructor argument is passed as an integer so that `SQLITE_TRANSIENT`
    /// (-1, "copy the bytes now") fits: the C ABI passes a function pointer and an `intptr_t` alike.
    fileprivate let bindText: @convention(c) (OpaquePointer?, Int32, UnsafePointer<CChar>?, Int32, Int) -> Int32
    fileprivate let bindInt64: @convention(c) (OpaquePointer?, Int32, Int64) -> Int32
    fileprivate let bindDouble: @convention(c) (OpaquePointer?, Int32, Double) -> Int32
    fileprivate let bindNull: @convention(c) (OpaquePointer?, Int32) -> Int32
    fileprivate let columnType: @convention(c) (OpaquePointer?, Int32) -> Int32
    fileprivate let columnText: @convention(c) (OpaquePointer?, Int32) -> UnsafePointer<UInt8>?
    fileprivate let columnBytes: @convention(c) (OpaquePointer?, Int32) -> Int32
    fileprivate let columnInt64: @convention(c) (OpaquePointer?, Int32) -> Int64
    fileprivate let columnDouble: @convention(c) (OpaquePointer?, Int32) -> Double
    fileprivate let errmsg: @convention(c) (OpaquePointer?) -> UnsafePointer<CChar>?

    /// The library, loaded once per process, or why it could not be loaded.
    static let shared: Result<SQLiteLibrary, BenchError> = load()

    private init(_ handle: UnsafeMutableRawPointer) throws {
        func symbol<T>(_ name: String, _: T.Type) throws -> T {
            guard let pointer = dlsym(handle, name) else { throw BenchError("\(name) is missing") }
            return unsafeBitCast(pointer, to: T.self)
        }
        open = try symbol("sqlite3_open_v2", type(of: open))
        close = try symbol("sqlite3_close_v2", type(of: close))
        exec = try symbol("sqlite3_exec", type(of: exec))
        prepare = try symbol("sqlite3_prepare_v2", type(of: prepare))
        finalize = try symbol("sqlite3_finalize", type(of: finalize))
        reset = try symbol("sqlite3_reset", type(of: reset))
        step = try symbol("sqlite3_step", type(of: step))
        bindText = try symbol("sqlite3_bind_text", type(of: bindText))
        bindInt64 = try symbol("sqlite3_bind_int64", type(of: bindInt64))
        bindDouble = try symbol("sqlite3_bind_double", type(of: bindDouble))
        bindNull = try symbol("sqlite3_bind_null", type(of: bindNull))
        columnType = try symbol("sqlite3_column_type", type(of: columnType))
        columnText = try symbol("sqlite3_column_text", type(of: columnText))
        columnBytes = try symbol("sqlite3_column_bytes", type(of: columnBytes))
        columnInt64 = try symbol("sqlite3_column_int64", type(of: columnInt64))
        columnDouble = try symbol("sqlite3_column_double", type(of: columnDouble))
        errmsg = try symbol("sqlite3_errmsg", type(of: errmsg))
        let libversion = try symbol("sqlite3_libversion", (@convention(c) () -> UnsafePointer<CChar>?).self)
        version = libversion().map { String(cString: $0) } ?? "?"
    }

    private static func load() -> Result<SQLiteLibrary, BenchError> {
        #if canImport(Darwin)
            let names = ["libsqlite3.dylib", "/usr/lib/libsqlite3.dylib"]
        #else
            let names = ["libsqlite3.so.0", "libsqlite3.so"]
        #endif
        for name in names {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else { continue }
            do {
                return .success(try SQLiteLibrary(handle))
            } catch {
                return .failure(BenchError("\(name) lacks a function: \(error)"))
            }
        }
        return .failure(BenchError("none of \(names.joined(separator: ", ")) could be loaded"))
    }
}

/// SQLite's result codes that the benchmark tells apart.
enum SQLiteCode {
    static let ok: Int32 = 0
    static let row: Int32 = 100
    static let done: Int32 = 101
    static let null: Int32 = 5
}

/// One connection, opened the way GRDB opens one: read-write, created if missing, in WAL mode.
///
/// Not `Sendable`: a connection is used by one task at a time, like a GRDB `DatabaseQueue`'s.
final class SQLiteConnection {
    let library: SQLiteLibrary
    private var handle: OpaquePointer?
    private var statements: [String: SQLiteStatement] = [:]

    /// How `synchronous` is set, the one setting in which the anchors differ.
    enum Synchronous: String { case full = "FULL", normal = "NORMAL" }

    init(path: String, synchronous: Synchronous, library: SQLiteLibrary) throws {
        self.library = library
        let flags: Int32 = 0x0000_0002 | 0x0000_0004 | 0x0000_8000  // READWRITE | CREATE | NOMUTEX
        let code = library.open(path, &handle, flags, nil)
        guard code == SQLiteCode.ok else {
            let message = handle.flatMap { library.errmsg($0) }.map { String(cString: $0) } ?? "code \(code)"
            _ = library.close(handle)
            handle = nil  // a throwing initializer still runs deinit, which must not close it again
            throw BenchError("sqlite3_open_v2 \(path): \(message)")
        }
        try execute("PRAGMA journal_mode = WAL")
        try execute("PRAGMA synchronous = \(synchronous.rawValue)")
    }

    deinit {
        statements = [:]
        _ = library.close(handle)
    }

    /// Runs SQL that returns no rows (PRAGMA results are ignored).
    func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let code = library.exec(handle, sql, nil, nil, &error)
        guard code == SQLiteCode.ok else {
            let message = error.map { String(cString: $0) } ?? "code \(code)"
            throw BenchError("sqlite3_exec \(sql): \(message)")
        }
    }

    /// A prepared statement, cached by its SQL as GRDB caches the statements of record inserts.
    func cachedStatement(_ sql: String) throws -> SQLiteStatement {
        if let statement = statements[sql] { return statement }
        let statement = try SQLiteStatement(sql, connection: self)
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in one transaction (`BEGIN IMMEDIATE` … `COMMIT`), as GRDB's `write` does.
    func transaction(_ body: () throws -> Void) throws {
        try execute("BEGIN IMMEDIATE TRANSACTION")
        do {
            try body()
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        try execute("COMMIT")
    }

    fileprivate var rawHandle: OpaquePointer? { handle }

    fileprivate func errorMessage() -> String {
        library.errmsg(handle).map { String(cString: $0) } ?? "unknown error"
    }
}

/// A prepared statement: bind, step, read columns, reset.
final class SQLiteStatement {
    private let library: SQLiteLibrary
    private unowned let connection: SQLiteConnection
    private var handle: OpaquePointer?

    fileprivate init(_ sql: String, connection: SQLiteConnection) throws {
        self.library = connection.library
        self.connection = connection
        let code = library.prepare(connection.rawHandle, sql, -1, &handle, nil)
        guard code == SQLiteCode.ok else {
            throw BenchError("sqlite3_prepare_v2 \(sql): \(connection.errorMessage())")
        }
    }

    deinit { _ = library.finalize(handle) }

    func bind(_ value: String, at index: Int32) {
        var value = value
        value.withUTF8 { utf8 in
            _ = utf8.withMemoryRebound(to: CChar.self) {
                library.bindText(handle, index, $0.baseAddress, Int32($0.count), -1)
            }
        }
    }

    func bind(_ value: String?, at index: Int32) {
        if let value { bind(value, at: index) } else { _ = library.bindNull(handle, index) }
    }

    func bind(_ value: Int64, at index: Int32) { _ = library.bindInt64(handle, index, value) }

    func bind(_ value: Double?, at index: Int32) {
        if let value { _ = library.bindDouble(handle, index, value) } else { _ = library.bindNull(handle, index) }
    }

    /// Steps a statement that returns no rows, then resets it for the next use.
    func run() throws {
        let code = library.step(handle)
        _ = library.reset(handle)
        guard code == SQLiteCode.done else { throw BenchError("sqlite3_step: \(connection.errorMessage())") }
    }

    /// Steps to the next row: true on a row, false when done.
    func next() throws -> Bool {
        switch library.step(handle) {
        case SQLiteCode.row: return true
        case SQLiteCode.done: return false
        default: throw BenchError("sqlite3_step: \(connection.errorMessage())")
        }
    }

    func resetForReuse() { _ = library.reset(handle) }

    func isNull(_ column: Int32) -> Bool { library.columnType(handle, column) == SQLiteCode.null }

    func string(_ column: Int32) -> String {
        guard let text = library.columnText(handle, column) else { return "" }
        let count = Int(library.columnBytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    func optionalString(_ column: Int32) -> String? { isNull(column) ? nil : string(column) }

    func int64(_ column: Int32) -> Int64 { library.columnInt64(handle, column) }

    func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : library.columnDouble(handle, column) }
}

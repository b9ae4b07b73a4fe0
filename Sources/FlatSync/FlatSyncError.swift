#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The error FlatSync's local side throws: bad input, a store in use, a file that could not be read or
/// written.
///
/// Every error carries a ``code`` to switch on, a ``message`` a person can act on, the underlying
/// ``cause`` (often a `POSIXError`), the file ``path`` involved when there is one, and the source
/// ``location`` that raised it.
///
/// ```swift
/// do {
///     try await readingList.add("")
/// } catch let error as FlatSyncError where error.code == .invalidArticleID {
///     print(error.message)
/// }
/// ```
///
/// Errors from the server side are ``CloudError``s.
public struct FlatSyncError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a stable value to switch on.
    ///
    /// `Code` wraps a private enum so that new codes can be added without breaking clients.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArticleID
            case invalidArgument
            case storeLocked
            case storeClosed
            case ioFailed
            case damagedFile
            case unsupportedFormatVersion
            case accountUnavailable
            case malformedRecord
            case recordTooLarge
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// An article ID was empty, longer than 256 UTF-8 bytes, or held a control character.
        /// Nothing was written.
        public static let invalidArticleID = Code(.invalidArticleID)
        /// An argument other than an article ID was not one FlatSync can take: out of range (a negative
        /// version), a record name or value a host type cannot save (see ``SyncableRecord``), a record type
        /// that was not registered, a schema that does not read, a transport whose schema lacks the
        /// context's types. The message says which. Nothing was written.
        public static let invalidArgument = Code(.invalidArgument)
        /// Another opener (another process, or an earlier open in this one) owns the directory.
        public static let storeLocked = Code(.storeLocked)
        /// The store was closed, or stopped accepting writes after an I/O failure; open it again.
        public static let storeClosed = Code(.storeClosed)
        /// A system call failed (disk full, permission denied, a failed `fsync`). The ``FlatSyncError/cause``
        /// holds the `POSIXError`.
        public static let ioFailed = Code(.ioFailed)
        /// A file could not be decoded: a bad checksum, a torn structure, or bytes that are not ours.
        public static let damagedFile = Code(.damagedFile)
        /// A file was written by a newer FlatSync with a format this version cannot read.
        public static let unsupportedFormatVersion = Code(.unsupportedFormatVersion)
        /// The operation needs a signed-in account and there is none.
        public static let accountUnavailable = Code(.accountUnavailable)
        /// A record from the server lacks a field its type requires, or holds a value of the wrong type.
        public static let malformedRecord = Code(.malformedRecord)
        /// A host record would be larger than CloudKit takes (1 MB, counted as 1,000,000 bytes of names, keys
        /// and values). Nothing was written.
        public static let recordTooLarge = Code(.recordTooLarge)

        public var description: String { base.rawValue }
    }

    /// Where in FlatSync's source the error was raised.
    public struct SourceLocation: Hashable, Sendable, CustomStringConvertible {
        /// The source file, as `#fileID` gives it.
        public var file: String
        /// The line in that file.
        public var line: Int

        /// A location in FlatSync's source.
        public init(file: String, line: Int) {
            self.file = file
            self.line = line
        }

        public var description: String { "\(file):\(line)" }
    }

    /// What went wrong.
    public var code: Code
    /// A sentence saying what failed and, where it helps, what to do about it.
    public var message: String
    /// The error underneath, such as a `POSIXError` from a system call, or a decoding error.
    public var cause: (any Error)?
    /// The file or directory involved, when there is one.
    public var path: String?
    /// Where in FlatSync's source the error was raised.
    public var location: SourceLocation

    /// Creates an error. FlatSync's own code fills in `location` from the call site.
    public init(
        _ code: Code,
        _ message: String,
        cause: (any Error)? = nil,
        path: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.cause = cause
        self.path = path
        self.location = SourceLocation(file: file, line: line)
    }

    public var description: String {
        var text = "\(code): \(message)"
        if let path { text += " (\(path))" }
        if let cause { text += " [cause: \(cause)]" }
        return text
    }

    /// A multi-line description with the reason, the path, the cause and the source location, for logs.
    public func detailedDescription() -> String {
        var lines = ["FlatSyncError: \(code)", "├─ Reason: \(message)"]
        if let path { lines.append("├─ Path: \(path)") }
        if let cause { lines.append("├─ Cause: \(cause)") }
        lines.append("└─ Source location: \(location)")
        return lines.joined(separator: "\n")
    }
}

extension FlatSyncError {
    /// An `ioFailed` error for a failed system call, with the `errno` value as its cause.
    package static func syscall(
        _ name: String,
        errno value: Int32,
        path: String?,
        file: String = #fileID,
        line: Int = #line
    ) -> FlatSyncError {
        let code = POSIXErrorCode(rawValue: value)
        let reason = String(cString: strerror(value))
        return FlatSyncError(
            .ioFailed,
            "\(name) failed: \(reason)",
            cause: code.map { POSIXError($0) },
            path: path,
            file: file,
            line: line
        )
    }
}

/// Lets callers write `catch FlatSyncError.Code.storeLocked { … }`.
public func ~= (code: FlatSyncError.Code, error: any Error) -> Bool {
    (error as? FlatSyncError)?.code == code
}

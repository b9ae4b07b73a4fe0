#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What an ``SyncEvent/error(_:)`` event reports.
public struct SyncEventError: Sendable, Hashable, CustomStringConvertible {
    /// The error's code, such as `quotaExceeded` or `ioFailed`.
    public var code: String
    /// What failed, in a sentence.
    public var message: String

    /// Creates an error report.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}

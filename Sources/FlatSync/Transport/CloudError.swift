#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An error from the server side: a failed request, or a failed save or delete of one record.
///
/// Switch on ``code``; ``Code-swift.struct/isTransient`` says whether trying again later can succeed.
/// Context travels with the error: ``retryAfter`` for throttling, ``serverRecord`` for a conflict,
/// ``partialErrors`` for a request in which some records failed.
public struct CloudError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, modelled on CloudKit's error codes.
    public struct Code: Hashable, Sendable, Codable, CustomStringConvertible, CaseIterable {
        private enum Base: String, Hashable, Sendable, Codable, CaseIterable {
            case networkUnavailable, networkFailure, serviceUnavailable, requestRateLimited, zoneBusy
            case limitExceeded, serverRecordChanged, zoneNotFound, userDeletedZone, changeTokenExpired
            case unknownItem, batchRequestFailed, quotaExceeded, notAuthenticated, partialFailure
            case invalidArguments, internalError, unexpectedServerResponse
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// There is no network connection. Transient: retry when the network comes back.
        public static let networkUnavailable = Code(.networkUnavailable)
        /// The request was lost on the way, or its response was. The server may have applied it.
        /// Transient.
        public static let networkFailure = Code(.networkFailure)
        /// The service is down for now. Transient; may carry ``CloudError/retryAfter``.
        public static let serviceUnavailable = Code(.serviceUnavailable)
        /// Too many requests. Transient; may carry ``CloudError/retryAfter``.
        public static let requestRateLimited = Code(.requestRateLimited)
        /// Another request is changing the zone. Transient; may carry ``CloudError/retryAfter``.
        public static let zoneBusy = Code(.zoneBusy)
        /// The request was too large (more than the operation limit, or a record over 1 MB). Split it.
        public static let limitExceeded = Code(.limitExceeded)
        /// The record changed on the server since the change tag that was sent.
        /// ``CloudError/serverRecord`` holds the server's version.
        public static let serverRecordChanged = Code(.serverRecordChanged)
        /// The zone does not exist. Create it and try again.
        public static let zoneNotFound = Code(.zoneNotFound)
        /// The user deleted the zone (from Settings, say). Its data is gone; do not upload the old data.
        public static let userDeletedZone = Code(.userDeletedZone)
        /// The server no longer accepts the change token. Fetch again from `nil`.
        public static let changeTokenExpired = Code(.changeTokenExpired)
        /// The record does not exist on the server.
        public static let unknownItem = Code(.unknownItem)
        /// An atomic request failed because another record in it failed. Transient.
        public static let batchRequestFailed = Code(.batchRequestFailed)
        /// The user's storage is full.
        public static let quotaExceeded = Code(.quotaExceeded)
        /// No account is signed in, or it cannot be used now.
        public static let notAuthenticated = Code(.notAuthenticated)
        /// Some records of a request failed; ``CloudError/partialErrors`` says which and why.
        public static let partialFailure = Code(.partialFailure)
        /// The request was malformed: an empty record name, the same record twice, an unknown zone name.
        /// Nothing was changed.
        public static let invalidArguments = Code(.invalidArguments)
        /// A server-side failure that retrying will not fix.
        public static let internalError = Code(.internalError)
        /// The server's answer could not be understood: not JSON, missing keys, an HTML error page from a
        /// proxy. The request may or may not have been applied. Transient: nothing is dropped for it.
        public static let unexpectedServerResponse = Code(.unexpectedServerResponse)

        /// Every code, in the order they are declared.
        public static var allCases: [Code] { Base.allCases.map(Code.init) }

        /// True for failures that can succeed if the same request is sent again later.
        public var isTransient: Bool {
            switch base {
            case .networkUnavailable, .networkFailure, .serviceUnavailable, .requestRateLimited, .zoneBusy,
                .batchRequestFailed, .unexpectedServerResponse:
                return true
            default:
                return false
            }
        }

        /// The code's name, such as `zoneBusy`.
        public var name: String { base.rawValue }

        /// Looks a code up by its ``name``.
        public init?(name: String) {
            guard let base = Base(rawValue: name) else { return nil }
            self.base = base
        }

        public var description: String { base.rawValue }

        public init(from decoder: any Decoder) throws {
            let name = try decoder.singleValueContainer().decode(String.self)
            guard let base = Base(rawValue: name) else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: decoder.codingPath, debugDescription: "unknown CloudError code \(name)")
                )
            }
            self.base = base
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(base.rawValue)
        }
    }

    /// What went wrong.
    public var code: Code
    /// A sentence describing the failure.
    public var message: String
    /// How long the server asks the client to wait before trying again, when it says.
    public var retryAfter: Duration?
    /// The server's current record, for ``Code-swift.struct/serverRecordChanged``.
    public var serverRecord: Record?
    /// The failed records and their errors, for ``Code-swift.struct/partialFailure``.
    public var partialErrors: [RecordID: CloudError]
    /// The server's own name for the error when it gave one, such as CloudKit Web Services'
    /// `serverErrorCode` (`"THROTTLED"`). Kept as sent, also for codes FlatSync does not know.
    public var serverErrorCode: String?
    /// Where the user signs in, for ``Code-swift.struct/notAuthenticated`` when the server says
    /// (CloudKit Web Services' `redirectURL`).
    public var redirectURL: URL?

    /// Creates an error.
    public init(
        _ code: Code,
        _ message: String = "",
        retryAfter: Duration? = nil,
        serverRecord: Record? = nil,
        partialErrors: [RecordID: CloudError] = [:],
        serverErrorCode: String? = nil,
        redirectURL: URL? = nil
    ) {
        self.code = code
        self.message = message.isEmpty ? code.name : message
        self.retryAfter = retryAfter
        self.serverRecord = serverRecord
        self.partialErrors = partialErrors
        self.serverErrorCode = serverErrorCode
        self.redirectURL = redirectURL
    }

    /// True for failures that can succeed if the same request is sent again later.
    public var isTransient: Bool { code.isTransient }

    public var description: String {
        var text = "CloudError.\(code): \(message)"
        if let serverErrorCode { text += " [\(serverErrorCode)]" }
        if let retryAfter { text += " (retry after \(retryAfter))" }
        if !partialErrors.isEmpty { text += " (\(partialErrors.count) records failed)" }
        return text
    }
}

/// Lets callers write `catch CloudError.Code.zoneBusy { … }`.
public func ~= (code: CloudError.Code, error: any Error) -> Bool {
    (error as? CloudError)?.code == code
}

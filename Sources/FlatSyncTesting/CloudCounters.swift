/// What a test cloud has served since it was created or its counters were reset.
///
/// Every request a client sends counts, including requests that failed or that a fault plan failed.
/// Administration calls (``CloudAdministration``) never count.
public struct CloudCounters: Sendable, Codable, Hashable, CustomStringConvertible {
    /// Requests received, by kind. Kinds never requested are absent.
    public var requestsByKind: [RequestKind: Int]
    /// Records the server saved (created or changed). Failed saves do not count.
    public var recordsSaved: Int
    /// Records the server removed. Deleting a record that did not exist succeeds but does not count.
    public var recordsDeleted: Int
    /// Records sent back to clients by `CloudTransport.fetchZoneChanges(in:since:resultsLimit:)` and
    /// `CloudTransport.lookupRecords(_:)`.
    public var recordsReturned: Int
    /// Faults injected by the fault plan, by ``FaultEffect/counterKey``: the error code's
    /// `CloudError.Code.name` (`"zoneBusy"`), that name with `" (one record or zone)"` for a
    /// ``FaultEffect/recordError(_:retryAfter:)`` or `" (after applying)"` for a
    /// ``FaultEffect/failedAfterApplying(_:)``, and `"responseLost"` for committed requests whose response
    /// was dropped.
    public var faultsInjected: [String: Int]

    /// The key of ``faultsInjected`` that counts lost responses.
    public static let responseLostKey = "responseLost"

    /// Creates counters, all zero by default.
    public init(
        requestsByKind: [RequestKind: Int] = [:],
        recordsSaved: Int = 0,
        recordsDeleted: Int = 0,
        recordsReturned: Int = 0,
        faultsInjected: [String: Int] = [:]
    ) {
        self.requestsByKind = requestsByKind
        self.recordsSaved = recordsSaved
        self.recordsDeleted = recordsDeleted
        self.recordsReturned = recordsReturned
        self.faultsInjected = faultsInjected
    }

    /// All requests received, whatever their kind.
    public var requests: Int { requestsByKind.values.reduce(0, +) }

    /// The `CloudTransport.modifyRecords(saving:deleting:atomically:)` requests received.
    public var modifyRequests: Int { requests(.modifyRecords) }

    /// The requests of one kind received.
    public func requests(_ kind: RequestKind) -> Int { requestsByKind[kind, default: 0] }

    /// All faults injected, whatever their code.
    public var totalFaultsInjected: Int { faultsInjected.values.reduce(0, +) }

    public var description: String {
        let kinds = RequestKind.allCases.compactMap { kind in
            requestsByKind[kind].map { "\(kind.rawValue)=\($0)" }
        }
        let faults = faultsInjected.keys.sorted().map { "\($0)=\(faultsInjected[$0]!)" }
        return "CloudCounters(requests: \(requests) [\(kinds.joined(separator: ", "))], saved: \(recordsSaved), "
            + "deleted: \(recordsDeleted), returned: \(recordsReturned), faults: [\(faults.joined(separator: ", "))])"
    }
}

import FlatSync

/// Failures a test cloud injects into the requests it receives, to exercise a client's error handling.
///
/// A plan has scripted faults, consumed in order ("the next 3 modify requests fail with `zoneBusy`"),
/// and optionally random faults drawn from a seeded generator, so a failing run can be replayed
/// exactly from its seed. Scripted faults take precedence; a request that a scripted fault matches
/// draws nothing from the random generator.
///
/// ```swift
/// let cloud = InMemoryCloud(faultPlan: .failNext(2, .modifyRecords, with: .zoneBusy, retryAfter: .seconds(2)))
/// await cloud.setFaultPlan(.random(rate: 0.3, seed: 7))   // replaces the plan
/// ```
///
/// Faults are decided where requests are served, in the database both clouds share, so ``InMemoryCloud``
/// and ``DirectoryCloud`` (and a ``CloudKitWebServicesServer`` over either) inject them identically; a ``DirectoryCloud`` persists the plan and its generator state, so a
/// seeded plan is deterministic across processes sharing the directory.
public struct FaultPlan: Sendable, Codable, Hashable {
    /// Faults for the next requests, in order. Each request uses the first entry that matches its kind
    /// (and, for an entry with a ``ScriptedFault/target``, carries that record) and has a count left; an
    /// entry is removed when its count reaches zero.
    public var scripted: [ScriptedFault]
    /// Faults at a seeded random rate, for requests no scripted fault matched.
    public var random: RandomFaults?

    /// Creates a plan.
    public init(scripted: [ScriptedFault] = [], random: RandomFaults? = nil) {
        self.scripted = scripted
        self.random = random
    }

    /// No faults: every request is served.
    public static let none = FaultPlan()

    /// True when the plan injects nothing more.
    public var isEmpty: Bool {
        scripted.allSatisfy { $0.count <= 0 } && (random.map { $0.rate <= 0 || $0.effects.isEmpty } ?? true)
    }

    /// The next `count` requests of `kind` (`nil`: of any kind) fail with `code`; with `after`, only once
    /// that many requests of the kind were served untouched first. A fetch's page is a request of its own,
    /// so `.failNext(1, .fetchZoneChanges, with: .changeTokenExpired, after: 2)` expires the token a fetch
    /// holds after its second page, in the middle of the fetch.
    public static func failNext(
        _ count: Int,
        _ kind: RequestKind? = nil,
        with code: CloudError.Code,
        retryAfter: Duration? = nil,
        after passing: Int = 0
    ) -> FaultPlan {
        FaultPlan(scripted: [
            ScriptedFault(
                kind: kind, count: count, effect: .error(code, retryAfter: retryAfter),
                passesFirst: passing > 0 ? passing : nil)
        ])
    }

    /// The next `count` modify requests each fail one record (or zone) with `code` inside an answer that
    /// saves the rest, as CloudKit answers a record it refuses (``FaultEffect/recordError(_:retryAfter:)``):
    /// `.failRecords(1, with: .invalidArguments)` makes a client park a change. The record refused is each
    /// request's first, whichever it is; ``failRecord(named:in:with:retryAfter:times:)`` picks one by name.
    public static func failRecords(_ count: Int = 1, with code: CloudError.Code, retryAfter: Duration? = nil)
        -> FaultPlan
    {
        FaultPlan(scripted: [
            ScriptedFault(kind: .modifyRecords, count: count, effect: .recordError(code, retryAfter: retryAfter))
        ])
    }

    /// The next `count` modify requests that save or delete the record named `name` (in `zone`, or in any
    /// zone) fail that record with `code` inside an answer that saves the rest, so a test picks the record it
    /// refuses: `.failRecord(named: "task-7", with: .invalidArguments)`. Requests without it pass untouched and
    /// leave the count alone.
    public static func failRecord(
        named name: String,
        in zone: ZoneID? = nil,
        with code: CloudError.Code,
        retryAfter: Duration? = nil,
        times count: Int = 1
    ) -> FaultPlan {
        FaultPlan(scripted: [
            ScriptedFault(
                kind: .modifyRecords, count: count, effect: .recordError(code, retryAfter: retryAfter),
                target: FaultTarget(recordName: name, zone: zone))
        ])
    }

    /// The server applies the next `count` requests of `kind` but their responses are lost: the caller
    /// gets `CloudError.Code.networkFailure`.
    public static func loseResponses(_ count: Int = 1, _ kind: RequestKind? = .modifyRecords) -> FaultPlan {
        FaultPlan(scripted: [ScriptedFault(kind: kind, count: count, effect: .responseLost)])
    }

    /// The server applies the next `count` requests of `kind`, then the caller gets `code` in place of their
    /// answers (``FaultEffect/failedAfterApplying(_:)``): `.failAfterApplying(with: .serviceUnavailable)` is a
    /// gateway that timed out after the save was committed.
    public static func failAfterApplying(
        _ count: Int = 1, _ kind: RequestKind? = .modifyRecords, with code: CloudError.Code
    ) -> FaultPlan {
        FaultPlan(scripted: [ScriptedFault(kind: kind, count: count, effect: .failedAfterApplying(code))])
    }

    /// Requests of `kinds` (`nil`: every kind) fail with probability `rate`, with an effect chosen
    /// uniformly from `effects`, drawn from a generator seeded with `seed`.
    public static func random(
        rate: Double,
        seed: UInt64,
        effects: [FaultEffect] = FaultEffect.transient,
        kinds: Set<RequestKind>? = nil
    ) -> FaultPlan {
        FaultPlan(random: RandomFaults(rate: rate, effects: effects, kinds: kinds, seed: seed))
    }

    /// This plan followed by `other`'s scripted faults; `other`'s random faults replace this plan's
    /// when it has any.
    public func then(_ other: FaultPlan) -> FaultPlan {
        FaultPlan(scripted: scripted + other.scripted, random: other.random ?? random)
    }
}

/// A fault for the next ``count`` requests of one kind (and, with a ``target``, holding one record).
public struct ScriptedFault: Sendable, Codable, Hashable {
    /// The kind of request to fail, or `nil` for any kind.
    public var kind: RequestKind?
    /// How many more requests to fail.
    public var count: Int
    /// What happens to each of them.
    public var effect: FaultEffect
    /// The record a request must save or delete for the fault to apply, or `nil` for any request of
    /// ``kind``. Only modify requests carry records, so only they match a target; with
    /// ``FaultEffect/recordError(_:retryAfter:)`` the target is the record that fails. Absent from plans
    /// persisted before targets existed, which decode as `nil`.
    public var target: FaultTarget?
    /// How many requests the fault matches are served untouched before it applies to the next ``count``
    /// (`nil`: none). They use up neither ``count`` nor a random draw, and a later fault of their kind waits
    /// behind this one, as for any scripted fault. Absent from plans persisted before it existed.
    public var passesFirst: Int?

    /// Creates a scripted fault.
    public init(
        kind: RequestKind?, count: Int, effect: FaultEffect, target: FaultTarget? = nil, passesFirst: Int? = nil
    ) {
        self.kind = kind
        self.count = count
        self.effect = effect
        self.target = target
        self.passesFirst = passesFirst
    }
}

/// The record a ``ScriptedFault`` waits for: a test names the record it wants refused, not whichever
/// comes first in a request.
public struct FaultTarget: Sendable, Codable, Hashable {
    /// The record's name, as in `RecordID.name`.
    public var recordName: String
    /// The record's zone, or `nil` for a record of that name in any zone.
    public var zone: ZoneID?

    /// Creates a target.
    public init(recordName: String, zone: ZoneID? = nil) {
        self.recordName = recordName
        self.zone = zone
    }

    /// True when `id` is the targeted record.
    public func matches(_ id: RecordID) -> Bool {
        id.name == recordName && (zone == nil || id.zone == zone)
    }
}

/// Faults injected at random, reproducibly for a seed.
public struct RandomFaults: Sendable, Codable, Hashable {
    /// The probability, from 0 to 1, that an eligible request fails.
    public var rate: Double
    /// The effects to choose from, uniformly, when a request fails.
    public var effects: [FaultEffect]
    /// The kinds of request eligible to fail, or `nil` for every kind.
    public var kinds: Set<RequestKind>?
    /// The seed of the generator that decides.
    public var seed: UInt64

    /// Creates random faults.
    public init(
        rate: Double, effects: [FaultEffect] = FaultEffect.transient, kinds: Set<RequestKind>? = nil, seed: UInt64
    ) {
        self.rate = rate
        self.effects = effects
        self.kinds = kinds
        self.seed = seed
    }
}

/// What an injected fault does to a request.
public enum FaultEffect: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The request fails with `code` before the server applies anything, carrying `retryAfter` if given.
    case error(CloudError.Code, retryAfter: Duration? = nil)
    /// The server applies the request, then the response is lost: the caller gets
    /// `CloudError.Code.networkFailure` and cannot know the change was committed.
    /// This is the fault that makes blind retries dangerous.
    case responseLost
    /// A modify request is served, except that its first record (or the ``ScriptedFault/target`` of the
    /// scripted fault) fails with `code`, carrying `retryAfter` if given: a record's error inside a
    /// success, as CloudKit Web Services answers in a 200 (observed live). The other records are applied
    /// unless the request is atomic. A request creating or deleting
    /// zones fails its first zone the same way (CKWS answers a zone's failure in its entry of a 200: ckws.md
    /// §3); the caller of `createZones` or `deleteZones` gets the error after the other zones are
    /// done. Requests of other kinds are served untouched, and only a fault
    /// that failed a record or a zone is counted.
    case recordError(CloudError.Code, retryAfter: Duration? = nil)
    /// The server applies the request, then the caller gets `code` in place of its answer: a gateway's 502
    /// or 504 after the backend committed (over CKWS, `serviceUnavailable`), or a server that failed after
    /// its commit (`internalError`). Like ``responseLost``, the caller cannot know the change was committed,
    /// but the error does not say the network failed. Over HTTP the emulator answers with the code's status.
    case failedAfterApplying(CloudError.Code)

    /// The transient failures a client must survive by retrying: no network, a lost request, an
    /// unavailable or throttling service (with `retryAfter`), a busy zone, a lost response, and a gateway's
    /// failure after the server applied the request.
    public static let transient: [FaultEffect] = [
        .error(.networkUnavailable),
        .error(.networkFailure),
        .error(.serviceUnavailable, retryAfter: .seconds(1)),
        .error(.requestRateLimited, retryAfter: .seconds(2)),
        .error(.zoneBusy),
        .responseLost,
        .failedAfterApplying(.serviceUnavailable),
    ]

    /// The key this effect counts under in ``CloudCounters/faultsInjected``.
    public var counterKey: String {
        switch self {
        case .error(let code, _): return code.name
        case .responseLost: return CloudCounters.responseLostKey
        case .recordError(let code, _): return "\(code.name) (one record or zone)"
        case .failedAfterApplying(let code): return "\(code.name) (after applying)"
        }
    }

    /// A description of the effect, such as `zoneBusy (retry after 2 seconds)`.
    public var description: String {
        switch self {
        case .error(let code, let retryAfter?): return "\(code) (retry after \(retryAfter))"
        case .error(let code, nil): return code.name
        case .responseLost: return "responseLost"
        case .recordError(let code, let retryAfter?):
            return "\(code) for one record or zone (retry after \(retryAfter))"
        case .recordError(let code, nil): return "\(code) for one record or zone"
        case .failedAfterApplying(let code): return "\(code) after applying the request"
        }
    }

    private enum CodingKeys: String, CodingKey {
        case code, retryAfter, oneRecord, afterApplying
    }

    // Encoded as a code name (or "responseLost") plus an optional `Duration`, so persisted plans stay
    // readable and survive new cases.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .code)
        if name == CloudCounters.responseLostKey {
            self = .responseLost
            return
        }
        guard let code = CloudError.Code(name: name) else {
            throw DecodingError.dataCorruptedError(
                forKey: .code, in: container, debugDescription: "unknown fault effect \(name)"
            )
        }
        let retryAfter = try container.decodeIfPresent(Duration.self, forKey: .retryAfter)
        if try container.decodeIfPresent(Bool.self, forKey: .afterApplying) == true {
            self = .failedAfterApplying(code)
        } else if try container.decodeIfPresent(Bool.self, forKey: .oneRecord) == true {
            self = .recordError(code, retryAfter: retryAfter)
        } else {
            self = .error(code, retryAfter: retryAfter)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .error(let code, let retryAfter):
            try container.encode(code.name, forKey: .code)
            try container.encodeIfPresent(retryAfter, forKey: .retryAfter)
        case .responseLost:
            try container.encode(CloudCounters.responseLostKey, forKey: .code)
        case .recordError(let code, let retryAfter):
            try container.encode(code.name, forKey: .code)
            try container.encodeIfPresent(retryAfter, forKey: .retryAfter)
            try container.encode(true, forKey: .oneRecord)
        case .failedAfterApplying(let code):
            try container.encode(code.name, forKey: .code)
            try container.encode(true, forKey: .afterApplying)
        }
    }
}

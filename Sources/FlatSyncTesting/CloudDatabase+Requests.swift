import FlatSync

extension CloudDatabase {
    /// Serves one client request as the server would: counts it, consults the fault plan, then runs
    /// `body` (one of the request methods) unless a fault says otherwise.
    ///
    /// - A ``FaultEffect/error(_:retryAfter:)`` fault throws its error and applies nothing.
    /// - A ``FaultEffect/responseLost`` fault runs `body`, keeps whatever it changed, and throws
    ///   `CloudError.Code.networkFailure` whatever `body` returned or threw: the caller
    ///   cannot tell whether its change was committed.
    /// - A ``FaultEffect/failedAfterApplying(_:)`` fault does the same, throwing its own code.
    /// - A ``FaultEffect/recordError(_:retryAfter:)`` fault runs `body`, and the modify request it makes
    ///   (``modifyRecords(saving:deleting:atomically:)``) fails its first record, or the fault's target.
    ///
    /// `records` are the records the request saves or deletes: a scripted fault with a
    /// ``ScriptedFault/target`` matches only a request among whose records it is.
    ///
    /// ``InMemoryCloud`` and ``DirectoryCloud`` serve every request through this method, so faults
    /// and counters work the same in both.
    package mutating func perform<T>(
        _ kind: RequestKind, records: [RecordID] = [], _ body: (inout CloudDatabase) throws(CloudError) -> T
    ) throws(CloudError) -> T {
        counters.requestsByKind[kind, default: 0] += 1
        guard let (fault, target) = nextFault(for: kind, records: records) else {
            return try body(&self)
        }
        switch fault {
        case .recordError:
            // Counted by the modify request that uses it; any other request is served untouched.
            recordFault = fault
            recordFaultTarget = target
            defer {
                recordFault = nil
                recordFaultTarget = nil
            }
            return try body(&self)
        case .error(let code, let retryAfter):
            counters.faultsInjected[fault.counterKey, default: 0] += 1
            throw CloudError(code, "Injected fault: \(code) for \(kind.rawValue).", retryAfter: retryAfter)
        case .responseLost:
            counters.faultsInjected[fault.counterKey, default: 0] += 1
            _ = try? body(&self)
            throw CloudError(
                .networkFailure,
                "Injected fault: the server handled the \(kind.rawValue) request but the response was lost."
            )
        case .failedAfterApplying(let code):
            counters.faultsInjected[fault.counterKey, default: 0] += 1
            _ = try? body(&self)
            throw CloudError(
                code, "Injected fault: the server handled the \(kind.rawValue) request, then answered \(code).")
        }
    }

    /// The error a ``FaultEffect/recordError(_:retryAfter:)`` fault of the request being served gives its
    /// first item (`item`, such as "the record rl-x"), counted and used up; nil without such a fault.
    mutating func takeItemFault(for item: String) -> CloudError? {
        guard let fault = recordFault, case .recordError(let code, let retryAfter) = fault else { return nil }
        counters.faultsInjected[fault.counterKey, default: 0] += 1
        recordFault = nil
        recordFaultTarget = nil
        return CloudError(code, "Injected fault: \(code) for \(item).", retryAfter: retryAfter)
    }

    /// The fault for the next request of `kind`, carrying `records`, if any, using up a scripted fault or a
    /// random draw; with the record a targeted scripted fault names.
    private mutating func nextFault(for kind: RequestKind, records: [RecordID]) -> (FaultEffect, RecordID?)? {
        var targeted: RecordID?
        let index = faultPlan.scripted.firstIndex { fault in
            guard fault.count > 0, fault.kind == nil || fault.kind == kind else { return false }
            guard let target = fault.target else { return true }
            // A request without the record passes by the fault, leaving its count.
            targeted = records.first(where: target.matches)
            return targeted != nil
        }
        if let index {
            if let passing = faultPlan.scripted[index].passesFirst, passing > 0 {
                faultPlan.scripted[index].passesFirst = passing > 1 ? passing - 1 : nil
                return nil
            }
            let effect = faultPlan.scripted[index].effect
            faultPlan.scripted[index].count -= 1
            if faultPlan.scripted[index].count <= 0 {
                faultPlan.scripted.remove(at: index)
            }
            return (effect, targeted)
        }
        guard let random = faultPlan.random, !random.effects.isEmpty, random.kinds?.contains(kind) ?? true else {
            return nil
        }
        var generator = faultGenerator ?? SeededRandomNumberGenerator(seed: random.seed)
        defer { faultGenerator = generator }
        guard generator.nextUnitInterval() < random.rate else { return nil }
        return (random.effects[generator.nextIndex(below: random.effects.count)], nil)
    }
}

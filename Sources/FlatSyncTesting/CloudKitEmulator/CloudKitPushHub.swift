import Foundation
import Synchronization

/// The emulator's stand-in for APNs and the web courier: push tokens, and the zones that changed since
/// each token's last poll.
///
/// **Emulator behaviour** (the real web courier's format is undocumented): a token is known from
/// `tokens/create` (or `tokens/register`); every change goes to every known token, including the
/// device that made it, as APNs would; a poll answers as soon as any zone changed since the token's
/// last answered poll (or since it was created), else after its timeout.
final class CloudKitPushHub: Sendable {
    /// How many push tokens are kept; the oldest is forgotten beyond this.
    static let maximumTokens = 4_096

    /// What a poll found.
    enum Poll: Equatable {
        /// Zones changed (sorted by name).
        case changed([String])
        /// Nothing changed before the timeout (or the poll was cancelled).
        case nothing
        /// The token is not one the emulator knows.
        case unknownToken
    }

    private struct Token {
        var pending: Set<String> = []
        var waiters: [Int: CheckedContinuation<[String]?, Never>] = [:]
    }

    private struct State {
        var tokens: [String: Token] = [:]
        var order: [String] = []
        var nextWaiter = 0
        /// Waiters whose poll was cancelled before they started waiting.
        var cancelled: Set<Int> = []
    }

    private let state = Mutex(State())

    /// The zones a request changed, noted from inside the database closure: a request whose response
    /// is lost still committed its changes, and they are announced all the same.
    final class ChangedZones: Sendable {
        private let zones = Mutex(Set<String>())

        func insert(_ names: Set<String>) {
            zones.withLock { $0.formUnion(names) }
        }

        var names: Set<String> { zones.withLock { $0 } }
    }

    /// A new push token: 32 random bytes in hex, as APNs tokens look.
    func createToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let token = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
        register(token)
        return token
    }

    /// Makes `token` known (no-op when it is).
    func register(_ token: String) {
        let evicted = state.withLock { state -> [CheckedContinuation<[String]?, Never>] in
            guard state.tokens[token] == nil else { return [] }
            state.tokens[token] = Token()
            state.order.append(token)
            guard state.order.count > Self.maximumTokens else { return [] }
            let oldest = state.order.removeFirst()
            return state.tokens.removeValue(forKey: oldest).map { Array($0.waiters.values) } ?? []
        }
        for waiter in evicted { waiter.resume(returning: nil) }
    }

    /// Notes that `zones` changed: waiting polls answer now, the other tokens keep the zones for their
    /// next poll.
    func notify(_ zones: Set<String>) {
        guard !zones.isEmpty else { return }
        let woken = state.withLock { state -> [(CheckedContinuation<[String]?, Never>, [String])] in
            var woken: [(CheckedContinuation<[String]?, Never>, [String])] = []
            for name in state.tokens.keys {
                var token = state.tokens[name]!
                token.pending.formUnion(zones)
                if !token.waiters.isEmpty {
                    let answer = token.pending.sorted()
                    woken += token.waiters.values.map { ($0, answer) }
                    token.waiters = [:]
                    token.pending = []
                }
                state.tokens[name] = token
            }
            return woken
        }
        for (waiter, zones) in woken { waiter.resume(returning: zones) }
    }

    /// Waits until a zone changes for `token`, at most `timeout`; returns at once when changes are
    /// pending. Ends early, with ``Poll/nothing``, when the calling task is cancelled.
    func poll(_ token: String, timeout: Duration) async -> Poll {
        let known = state.withLock { state -> Poll? in
            guard var entry = state.tokens[token] else { return .unknownToken }
            guard entry.pending.isEmpty else {
                let zones = entry.pending.sorted()
                entry.pending = []
                state.tokens[token] = entry
                return .changed(zones)
            }
            return nil
        }
        if let known { return known }
        let waiter = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        let zones = await withTaskGroup(of: [String]?.self) { group -> [String]? in
            group.addTask { await self.wait(token, waiter: waiter) }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            var found: [String]?
            if let first = await group.next(), let zones = first {
                found = zones
            }
            group.cancelAll()
            // A change may have reached the waiter just as the timeout fired: do not lose it.
            for await result in group {
                if let zones = result, found == nil { found = zones }
            }
            return found
        }
        return zones.map { .changed($0) } ?? .nothing
    }

    /// Waits for the next notification of `token`; `nil` when cancelled or the token was forgotten.
    private func wait(_ token: String, waiter: Int) async -> [String]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[String]?, Never>) in
                let immediate = state.withLock { state -> [String]?? in
                    if state.cancelled.remove(waiter) != nil { return .some(nil) }
                    guard var entry = state.tokens[token] else { return .some(nil) }
                    if !entry.pending.isEmpty {
                        let zones = entry.pending.sorted()
                        entry.pending = []
                        state.tokens[token] = entry
                        return .some(zones)
                    }
                    entry.waiters[waiter] = continuation
                    state.tokens[token] = entry
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<[String]?, Never>? in
                if let continuation = state.tokens[token]?.waiters.removeValue(forKey: waiter) {
                    return continuation
                }
                state.cancelled.insert(waiter)
                return nil
            }
            continuation?.resume(returning: nil)
        }
    }
}

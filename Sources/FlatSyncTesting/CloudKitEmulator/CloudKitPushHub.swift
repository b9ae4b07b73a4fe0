import FlatSync
import FlatSyncCloudKit
import Foundation
import Synchronization

/// The emulator's stand-in for APNs and CloudKit's web courier: push tokens, their courier URLs, and the
/// notifications waiting for each token.
///
/// What it imitates, and from where (the project's research notes on CloudKit pushes):
/// - `tokens/create` makes a token and a courier URL `…/aps?tok=<token, percent-escaped>&ttl=43200`, the
///   form of the live `https://webcourier.sandbox.push.apple.com:443/aps?tok=…&ttl=43200` (MistKit
///   `WEB_COURIER_SPIKE.md`). The token is random base64, so the URL holds escapes such as `%2B`, `%2F`
///   and `%3D`, and the courier knows a token only by its query exactly as it handed it out: a client that
///   decodes, re-encodes or adds to the URL polls a token nobody knows.
/// - Only a token that went through `tokens/register` receives notifications (documented; MistKit #379).
/// - Only a change in a zone with a zone subscription notifies, once per subscription, with the APNs
///   payload Apple's CloudKit.framework reads: `{"aps":{…},"ck":{"ce","cid","nid","ckuserid","fet":{"zid",
///   "zoid","dbs","sid"}}}`. One change shares one `nid` across its notifications (observed live).
/// - Each poll takes one notification (consume-on-delivery, observed live); with none waiting it is held
///   up to the hold time, then answered empty (a keepalive).
///
/// **Emulator behaviour**, where nothing is known: notifications not yet delivered coalesce per token and
/// subscription (the newest replaces the older one in its place in the queue; APNs is documented to keep
/// only the last notification for an offline device, the courier's queue is not); every registered token
/// is told, including the device's that made the change (whether CloudKit skips it is not known); `ce` is
/// 2 in development and 1 in production (uncertain: both captures had `ce` 2); `dbs` is 1, as in both
/// captures, one from the public database (MistKit #379) and one from a private Core Data zone
/// (typescriptlibs/tsl-apple-cloudkit #22), so what it numbers is not known; tokens never expire; the hold
/// time is an option (the courier's is not known).
final class CloudKitPushHub: Sendable {
    /// How many push tokens are kept; the oldest is forgotten beyond this.
    static let maximumTokens = 4_096
    /// The `ttl` of every courier URL: 12 hours, as the live courier's URLs carry.
    static let courierLifetimeSeconds = 43_200

    /// What a poll got.
    enum Poll: Equatable {
        /// One notification's JSON.
        case notification(Data)
        /// Nothing within the hold time (or the poll was cancelled).
        case keepalive
        /// The query names no token this courier handed out.
        case unknownToken
    }

    /// Zones whose changes are noted from inside a database closure: a request whose response is lost
    /// still committed its changes, and they are announced all the same.
    final class ChangedZones: Sendable {
        private let zones = Mutex(Set<String>())

        func insert(_ names: Set<String>) {
            zones.withLock { $0.formUnion(names) }
        }

        var names: Set<String> { zones.withLock { $0 } }
    }

    private struct Waiter {
        var id: Int
        var continuation: CheckedContinuation<Data?, Never>
    }

    private struct Token {
        var container: String
        var environment: String
        var query: String
        var registered = false
        /// Notifications not yet delivered, oldest first, one per subscription.
        var pending: [(subscriptionID: String, body: Data)] = []
        var waiters: [Waiter] = []
    }

    private struct State {
        var tokens: [String: Token] = [:]
        /// Each courier URL's query, exactly as handed out, to its token.
        var tokenByQuery: [String: String] = [:]
        var order: [String] = []
        var nextWaiter = 0
        /// Polls whose wait ended (timed out, cancelled) before their waiter was registered.
        var ended: Set<Int> = []
    }

    private let state = Mutex(State())
    private let userRecordName: String
    private let subscriptions: @Sendable () async -> [CloudSubscription]

    /// A hub for `userRecordName`'s devices, reading the zone subscriptions with `subscriptions` whenever
    /// zones change (they live in the backing store, which other processes may change too).
    init(userRecordName: String, subscriptions: @escaping @Sendable () async -> [CloudSubscription]) {
        self.userRecordName = userRecordName
        self.subscriptions = subscriptions
    }

    // MARK: - Tokens

    /// A new push token for a container, and the query of its courier URL.
    func createToken(container: String, environment: String) -> (token: String, query: String) {
        var generator = SystemRandomNumberGenerator()
        var token: String
        repeat {
            // 32 bytes give 43 characters and one `=`; drawn again until a `+` or `/` is among them too.
            token = Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
        } while !token.contains("+") && !token.contains("/")
        let query = "tok=\(CloudKitEmulator.percentEncoded(token))&ttl=\(Self.courierLifetimeSeconds)"
        let evicted = state.withLock { state -> [Waiter] in
            state.tokens[token] = Token(container: container, environment: environment, query: query)
            state.tokenByQuery[query] = token
            state.order.append(token)
            guard state.order.count > Self.maximumTokens else { return [] }
            let oldest = state.order.removeFirst()
            guard let gone = state.tokens.removeValue(forKey: oldest) else { return [] }
            state.tokenByQuery[gone.query] = nil
            return gone.waiters
        }
        for waiter in evicted { waiter.continuation.resume(returning: nil) }
        return (token, query)
    }

    /// Makes a token this courier handed out receive notifications from now on. A token it did not hand
    /// out (an iOS device's APNs token, say) is accepted and ignored: it has no courier to be polled.
    func register(_ token: String) {
        state.withLock { $0.tokens[token]?.registered = true }
    }

    // MARK: - Notifications

    /// Notes that `zones` changed: each registered token gets one notification per zone subscription of
    /// those zones. Returns at once; the subscriptions are read from the backing store on the way.
    func notify(_ zones: Set<String>) {
        guard !zones.isEmpty else { return }
        Task { await self.deliver(zones) }
    }

    private func deliver(_ zones: Set<String>) async {
        let fired = await subscriptions().filter { zones.contains($0.zone.name) }
        guard !fired.isEmpty else { return }
        let notificationID = UUID().uuidString.lowercased()
        let woken = state.withLock { state -> [(Waiter, Data)] in
            var woken: [(Waiter, Data)] = []
            for key in state.order {
                guard var token = state.tokens[key], token.registered else { continue }
                for subscription in fired {
                    let body = payload(for: subscription, to: token, notificationID: notificationID)
                    if let index = token.pending.firstIndex(where: { $0.subscriptionID == subscription.id }) {
                        token.pending[index].body = body
                    } else {
                        token.pending.append((subscription.id, body))
                    }
                }
                while !token.waiters.isEmpty, !token.pending.isEmpty {
                    woken.append((token.waiters.removeFirst(), token.pending.removeFirst().body))
                }
                state.tokens[key] = token
            }
            return woken
        }
        for (waiter, body) in woken { waiter.continuation.resume(returning: body) }
    }

    /// One notification as CloudKit sends it for a zone subscription: `aps` from the subscription's
    /// `notificationInfo` (`content-available` for `shouldSendContentAvailable`, `alert` for `alertBody`;
    /// no `aps` at all when neither, as in one live capture), `ck` with the zone (`fet`).
    private func payload(for subscription: CloudSubscription, to token: Token, notificationID: String) -> Data {
        var info: [String: JSONValue] = [:]
        if let stored = subscription.notificationInfo, case .object(let members)? = try? JSONValue.parse(stored) {
            info = Dictionary(members, uniquingKeysWith: { $1 })
        }
        var aps: [String: JSONValue] = [:]
        if info["shouldSendContentAvailable"] == .bool(true) { aps["content-available"] = .integer(1) }
        if case .string(let alert)? = info["alertBody"] { aps["alert"] = .string(alert) }
        var object: [String: JSONValue] = [
            "ck": CloudKitJSON.value([
                "ce": .integer(token.environment == "production" ? 1 : 2),
                "cid": .string(token.container),
                "nid": .string(notificationID),
                "ckuserid": .string(userRecordName),
                "fet": CloudKitJSON.value([
                    "zid": .string(subscription.zone.name), "zoid": .string(userRecordName), "dbs": .integer(1),
                    "sid": .string(subscription.id),
                ]),
            ])
        ]
        if !aps.isEmpty { object["aps"] = CloudKitJSON.value(aps) }
        return CloudKitJSON.data(CloudKitJSON.value(object))
    }

    // MARK: - Polls

    /// One poll of the courier URL whose query is `query` (as sent, still escaped): the next notification
    /// at once when one waits, else the first to come within `hold`, else a keepalive. Ends early, with a
    /// keepalive, when the calling task is cancelled (the server is stopping).
    func poll(query: String, hold: Duration) async -> Poll {
        let first = state.withLock { state -> (token: String?, body: Data?, waiter: Int) in
            guard let key = state.tokenByQuery[query], var token = state.tokens[key] else { return (nil, nil, 0) }
            if !token.pending.isEmpty {
                let body = token.pending.removeFirst().body
                state.tokens[key] = token
                return (key, body, 0)
            }
            state.nextWaiter += 1
            return (key, nil, state.nextWaiter)
        }
        guard let key = first.token else { return .unknownToken }
        if let body = first.body { return .notification(body) }
        let waiter = first.waiter
        let timer = Task {
            try? await Task.sleep(for: hold)
            self.endWait(waiter, of: key)
        }
        defer {
            timer.cancel()
            _ = state.withLock { $0.ended.remove(waiter) }
        }
        let body = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Data?, Never>) in
                let immediate = state.withLock { state -> Data?? in
                    guard var token = state.tokens[key] else { return .some(nil) }
                    if !token.pending.isEmpty {
                        let body = token.pending.removeFirst().body
                        state.tokens[key] = token
                        return .some(body)
                    }
                    if state.ended.contains(waiter) { return .some(nil) }
                    token.waiters.append(Waiter(id: waiter, continuation: continuation))
                    state.tokens[key] = token
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            endWait(waiter, of: key)
        }
        return body.map { .notification($0) } ?? .keepalive
    }

    /// Ends a poll's wait without a notification: resumes its waiter, or, when it is not waiting yet, marks
    /// it so that it does not start.
    private func endWait(_ waiter: Int, of key: String) {
        let continuation = state.withLock { state -> CheckedContinuation<Data?, Never>? in
            if let index = state.tokens[key]?.waiters.firstIndex(where: { $0.id == waiter }) {
                return state.tokens[key]!.waiters.remove(at: index).continuation
            }
            state.ended.insert(waiter)
            return nil
        }
        continuation?.resume(returning: nil)
    }
}

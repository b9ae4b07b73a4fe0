import Foundation
import Synchronization

/// The emulator's web auth tokens: minting, rotating on every response, and checking them.
///
/// A *session* is one chain of tokens: it starts at a sign-in (or, when tokens are not required, at a
/// request without one) and every response to it carries the session's next token. By default every
/// token of a session stays valid, as observed on the live server; with `strict`, only the newest one
/// is, as Apple documents ("each token is good for one round trip"). Tokens look like Apple's: random
/// text holding `+`, `/` and `=`, so a client that forgets to percent-encode them fails.
///
/// The emulator remembers the newest ``rememberedTokens`` tokens it minted; older ones are forgotten
/// as if they had expired (emulator behaviour; real tokens last 30 minutes or two weeks).
final class CloudKitWebAuth: Sendable {
    /// How many minted tokens are remembered.
    static let rememberedTokens = 65_536

    /// What a request's token allows.
    enum Check: Equatable {
        /// Serve the request; its response carries the session's next token.
        case accepted(session: Int)
        /// No token, or one the emulator does not know, where one is required: 421.
        case signInRequired
        /// A token that is no longer the newest of its session, under strict tokens: 401.
        case stale
    }

    private struct State {
        var sessionOfToken: [String: Int] = [:]
        var newestOfSession: [Int: String] = [:]
        /// Minted tokens, oldest first from `head`, to forget the oldest.
        var minted: [String] = []
        var head = 0
        var nextSession = 0
    }

    private let requireToken: Bool
    private let strict: Bool
    private let state = Mutex(State())

    init(requireToken: Bool, strict: Bool) {
        self.requireToken = requireToken
        self.strict = strict
    }

    /// Checks the token a request carried (`nil`: none).
    func check(_ token: String?) -> Check {
        state.withLock { state in
            guard let token, !token.isEmpty, let session = state.sessionOfToken[token] else {
                guard !requireToken else { return .signInRequired }
                state.nextSession += 1
                return .accepted(session: state.nextSession)
            }
            if strict && state.newestOfSession[session] != token { return .stale }
            return .accepted(session: session)
        }
    }

    /// Mints the session's next token, which becomes its newest.
    func rotate(_ session: Int) -> String {
        let token = Self.randomToken()
        state.withLock { state in
            state.sessionOfToken[token] = session
            state.newestOfSession[session] = token
            state.minted.append(token)
            if state.minted.count - state.head > Self.rememberedTokens {
                let oldest = state.minted[state.head]
                state.head += 1
                if let session = state.sessionOfToken.removeValue(forKey: oldest),
                    state.newestOfSession[session] == oldest
                {
                    state.newestOfSession[session] = nil
                }
                if state.head > 4_096 && state.head * 2 > state.minted.count {
                    state.minted.removeFirst(state.head)
                    state.head = 0
                }
            }
        }
        return token
    }

    /// A token for a new session, as the sign-in page hands out.
    func signIn() -> String {
        let session = state.withLock { state -> Int in
            state.nextSession += 1
            return state.nextSession
        }
        return rotate(session)
    }

    /// A token that belongs to no session: what a refused request's response carries, so every CKWS
    /// response has the header without a refusal handing out a usable token.
    static func unregisteredToken() -> String {
        randomToken()
    }

    /// Random text in base64's alphabet that always holds `+`, `/` and `=`.
    static func randomToken() -> String {
        func random(_ count: Int) -> String {
            var generator = SystemRandomNumberGenerator()
            return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
        }
        // 12 bytes and 9 bytes encode without padding; 4 bytes end in "==".
        return random(12) + "+" + random(9) + "/" + random(4)
    }
}

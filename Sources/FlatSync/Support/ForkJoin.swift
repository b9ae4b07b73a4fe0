#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Dispatch
import Synchronization

/// Runs pieces of work at once and returns when all are done: the calling thread and a thread of
/// Dispatch's pool take them (which takes which is up to Dispatch).
///
/// A large batch has two independent halves of work after its changes are made — writing its log entry
/// (encode, append, flush) and taking its changes into the command queue — and a large host store's cold
/// start reads its records, checks them and makes their values in pieces; a phone has more than one core.
/// `DispatchQueue.concurrentPerform` does the forking: the calling thread runs a piece, and when no other
/// thread is free to take the rest, it runs them too. So a call never waits for a thread that may not come
/// (nothing to deadlock on a busy pool), and it returns only after every piece ran, with what they
/// returned visible to the caller.
@usableFromInline package enum ForkJoin {
    /// True when there is a second core to run a piece on; with one, forking only adds a hand-off.
    @usableFromInline package static let isWorthForking = ProcessInfo.processInfo.activeProcessorCount > 1

    /// Runs `first` and `second` at once and returns both results.
    package static func run<First: Sendable, Second: Sendable>(
        _ first: @Sendable () -> First,
        _ second: @Sendable () -> Second
    ) -> (First, Second) {
        let results = Results<First, Second>()
        DispatchQueue.concurrentPerform(iterations: 2) { piece in
            if piece == 0 {
                let value = first()
                results.first.withLock { $0 = value }
            } else {
                let value = second()
                results.second.withLock { $0 = value }
            }
        }
        return (results.first.withLock { $0! }, results.second.withLock { $0! })
    }

    /// Runs `body` for each of `pieces` pieces, numbered from 0, on the calling thread and a thread of
    /// Dispatch's pool at once, and returns their results in order. Each thread takes the next piece as it
    /// finishes one, so a thread that runs slower (its caches cold, its core shared) takes fewer.
    @usableFromInline package static func map<Result: Sendable>(
        pieces: Int, _ body: @Sendable (Int) -> Result
    ) -> [Result] {
        let results = Mutex<[Result?]>(Array(repeating: nil, count: pieces))
        DispatchQueue.concurrentPerform(iterations: pieces) { piece in
            let value = body(piece)
            results.withLock { $0[piece] = value }
        }
        return results.withLock { $0.map { $0! } }
    }

    /// Where each piece leaves its result (the closures are `@Sendable`, so they cannot write to the caller's
    /// variables).
    private final class Results<First: Sendable, Second: Sendable>: Sendable {
        let first = Mutex<First?>(nil)
        let second = Mutex<Second?>(nil)
    }
}

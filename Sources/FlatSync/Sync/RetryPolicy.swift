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

/// How long to wait before trying again: the server's `retryAfter` when it gives one, otherwise
/// exponential backoff with jitter (1 s, doubling, capped at 5 minutes by default).
public struct RetryPolicy: Hashable, Sendable {
    /// The delay after the first failure.
    public var initialDelay: Duration
    /// Each further failure multiplies the delay by this.
    public var multiplier: Double
    /// No delay is longer than this.
    public var maximumDelay: Duration
    /// The delay is scaled by a random factor between `1 - jitter` and 1, so devices that failed together
    /// do not retry together.
    public var jitter: Double

    /// A policy; the defaults are 1 s doubling to 5 minutes with up to 50 % jitter.
    public init(
        initialDelay: Duration = .seconds(1), multiplier: Double = 2, maximumDelay: Duration = .seconds(300),
        jitter: Double = 0.5
    ) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.jitter = jitter
    }

    /// 1 s doubling to 5 minutes, with up to 50 % jitter.
    public static let `default` = RetryPolicy()

    /// The delay before attempt `failures + 1`, given `failures` consecutive failures so far (at least 1)
    /// and a random number in `0..<1`. A `retryAfter` from the server is honoured as it is.
    public func delay(afterFailures failures: Int, retryAfter: Duration?, random: Double) -> Duration {
        if let retryAfter { return retryAfter }
        let exponent = Double(max(0, failures - 1))
        let base = min(initialDelay.seconds * pow(multiplier, exponent), maximumDelay.seconds)
        let scaled = base * (1 - jitter * min(max(random, 0), 1))
        return .milliseconds(Int64((scaled * 1000).rounded()))
    }
}

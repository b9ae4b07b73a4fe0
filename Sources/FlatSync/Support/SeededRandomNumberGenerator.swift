/// A small, fast, seedable random number generator (SplitMix64) whose whole state is one `UInt64`.
///
/// Fault plans and simulations need runs that repeat exactly for a seed, also across processes (the
/// state is `Codable`, so `DirectoryCloud` persists it between requests). SplitMix64 passes BigCrush,
/// which is plenty for choosing faults; it is not cryptographic.
///
/// ```swift
/// var generator = SeededRandomNumberGenerator(seed: 7)
/// let roll = Int.random(in: 1...6, using: &generator)   // the same on every run and platform
/// ```
package struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable, Codable, Hashable {
    /// The generator's whole state; advancing it by a constant and mixing gives the next value.
    package private(set) var state: UInt64

    /// Creates a generator whose sequence is fixed by `seed`.
    package init(seed: UInt64) {
        state = seed
    }

    /// The next 64 random bits.
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniformly distributed value in `0..<1` with 53 random bits.
    ///
    /// Computed here rather than with `Double.random(in:using:)` so that the mapping from bits to
    /// numbers cannot change with the standard library, keeping recorded seeds meaningful.
    package mutating func nextUnitInterval() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A value in `0..<upperBound`, for picking one of `upperBound` choices. `upperBound` must be positive.
    package mutating func nextIndex(below upperBound: Int) -> Int {
        precondition(upperBound > 0, "upperBound must be positive")
        return Int(next() % UInt64(upperBound))
    }
}

import Synchronization
import Testing

@testable import FlatSync

/// The two-core helper under the cold start and large batches: every piece runs once, and results come
/// back in order whichever thread ran them.
@Suite("Fork and join")
struct ForkJoinTests {
    @Test(arguments: [1, 2, 16, 100])
    func mapRunsEveryPieceOnceAndReturnsTheirResultsInOrder(pieces: Int) {
        let runs = Mutex([Int](repeating: 0, count: pieces))
        let results = ForkJoin.map(pieces: pieces) { piece in
            runs.withLock { $0[piece] += 1 }
            return piece * piece
        }
        #expect(results == (0..<pieces).map { $0 * $0 })
        #expect(runs.withLock { $0 } == [Int](repeating: 1, count: pieces))
    }

    @Test func runReturnsBothResults() {
        let (first, second) = ForkJoin.run({ "first" }, { 2 })
        #expect(first == "first")
        #expect(second == 2)
    }
}

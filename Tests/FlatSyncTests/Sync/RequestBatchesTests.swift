import Testing

@testable import FlatSync

/// Cutting a push into requests: by count, and by bytes past each request's first change.
@Suite struct RequestBatchesTests {
    @Test func requestsHoldAtMostTheCountAndTheBytes() {
        let cut = RequestBatches.cut([600, 10, 10, 600, 10, 500, 5], maximumCount: 100, byteBudget: 512) { $0 }
        #expect(cut == [[600], [10, 10], [600], [10, 500], [5]])
    }

    @Test func aChangeLargerThanTheBudgetGoesAloneAndNothingIsLeftOut() {
        #expect(RequestBatches.cut([2_000], maximumCount: 100, byteBudget: 512) { $0 } == [[2_000]])
        #expect(RequestBatches.cut([Int](), maximumCount: 100, byteBudget: 512) { $0 }.isEmpty)
        let many = Array(0..<250)
        let cut = RequestBatches.cut(many, maximumCount: 100, byteBudget: 512) { _ in 0 }
        #expect(cut.map(\.count) == [100, 100, 50])
        #expect(cut.flatMap { $0 } == many)
    }
}

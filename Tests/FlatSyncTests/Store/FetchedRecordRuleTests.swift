import Testing

@testable import FlatSync

/// The rule a fetch applies to every store's records, as a table: no disk, no clock.
@Suite struct FetchedRecordRuleTests {
    typealias Action = FetchedRecordRule.Action

    @Test(arguments: [
        // pending (nil: none; false: a save; true: a delete), tag unchanged, same content → action
        (nil as Bool?, true, true, Action.ignore),
        (nil, true, false, .take),
        (nil, false, true, .take),
        (nil, false, false, .take),
        (false, true, true, .ignore),
        (false, true, false, .ignore),
        (false, false, true, .merge),
        (false, false, false, .merge),
        (true, true, true, .skipForPendingDelete),
        (true, false, false, .skipForPendingDelete),
    ])
    func theActionFollowsWhatIsPending(pending: Bool?, tagUnchanged: Bool, same: Bool, expected: Action) {
        var asked = false
        let action = FetchedRecordRule.action(pendingIsDelete: pending, tagUnchanged: tagUnchanged) {
            asked = true
            return same
        }
        #expect(action == expected)
        // The content is compared only when nothing is pending and the tag is the one last seen.
        #expect(asked == (pending == nil && tagUnchanged))
    }
}

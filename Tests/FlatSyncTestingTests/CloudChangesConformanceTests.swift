import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// The transport conformance suite, part 2: what fetching since a token returns (net changes, paging),
// database changes, and when tokens expire.

@Suite("Cloud conformance: changes and tokens")
struct CloudChangesConformanceTests {
    // MARK: - Net changes

    @Test(arguments: CloudUnderTest.allCases)
    func fetchingFromNilReturnsEveryRecordAndNoDeletions(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            let empty = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
            #expect(empty.changedRecords.isEmpty && empty.deletedRecordIDs.isEmpty && !empty.moreComing)

            try await cloud.save((0..<5).map { makeRecord("r\($0)") })
            _ = try await cloud.saveOne(makeRecord("other", in: .photos))
            try await cloud.forceDelete(["r0"])
            let all = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 100)
            #expect(Set(all.changedRecords) == Set(try await cloud.records(in: .notes)))
            #expect(all.changedRecords.count == 4)
            #expect(all.deletedRecordIDs.isEmpty, "by default (see reportsDeletionsFromNoToken): nothing to delete")
            #expect(!all.moreComing)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func nothingChangedSinceATokenReturnsNothing(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            try await cloud.save([makeRecord("a")])
            let token = try await cloud.currentToken()
            _ = try await cloud.saveOne(makeRecord("elsewhere", in: .photos))
            let changes = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 10)
            #expect(changes.changedRecords.isEmpty && changes.deletedRecordIDs.isEmpty && !changes.moreComing)
            let again = try await cloud.fetchZoneChanges(in: .notes, since: changes.token, resultsLimit: 10)
            #expect(again.changedRecords.isEmpty && again.deletedRecordIDs.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aRecordCreatedAndDeletedSinceTheTokenIsNotReported(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            let token = try await cloud.currentToken()
            _ = try await cloud.saveOne(makeRecord("brief"))
            try await cloud.forceDelete(["brief"])
            let changes = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 10)
            #expect(changes.changedRecords.isEmpty)
            #expect(changes.deletedRecordIDs.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aRecordUpdatedThreeTimesIsReportedOnceAsItIsNow(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            var record = try await cloud.saveOne(makeRecord("a", ["n": .int(0)]))
            let token = try await cloud.currentToken()
            for n in 1...3 {
                record["n"] = .int(Int64(n))
                record = try await cloud.saveOne(record)
            }
            let changes = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 10)
            #expect(changes.changedRecords == [record])
            #expect(changes.deletedRecordIDs.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aDeletionIsReportedOnlyForARecordThatExistedAtTheToken(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.save(["deleted", "churned", "resurrected", "goneBefore", "kept"].map { makeRecord($0) })
            try await cloud.forceDelete(["goneBefore"])
            let token = try await cloud.currentToken()

            // Existed at the token, deleted: reported.
            try await cloud.forceDelete(["deleted"])
            // Existed at the token, deleted, re-created, deleted again: reported.
            try await cloud.forceDelete(["churned"])
            try await cloud.save([makeRecord("churned")])
            try await cloud.forceDelete(["churned"])
            // Existed at the token, deleted, re-created: changed, not deleted.
            try await cloud.forceDelete(["resurrected"])
            let resurrected = try await cloud.saveOne(makeRecord("resurrected", ["v": .int(2)]))
            // Did not exist at the token (deleted before it), re-created, deleted: not reported.
            try await cloud.save([makeRecord("goneBefore")])
            try await cloud.forceDelete(["goneBefore"])
            // Created after the token, deleted, created again, deleted: not reported.
            try await cloud.save([makeRecord("new")])
            try await cloud.forceDelete(["new"])
            try await cloud.save([makeRecord("new")])
            try await cloud.forceDelete(["new"])
            // Created after the token, deleted, created again: changed.
            try await cloud.save([makeRecord("newAgain")])
            try await cloud.forceDelete(["newAgain"])
            let newAgain = try await cloud.saveOne(makeRecord("newAgain"))

            let changes = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 100)
            #expect(Set(changes.deletedRecordIDs) == [recordID("deleted"), recordID("churned")])
            #expect(changes.deletedRecordIDs.count == 2)
            #expect(Set(changes.changedRecords) == [resurrected, newAgain])
            #expect(changes.changedRecords.count == 2)
        }
    }

    // MARK: - Paging

    @Test(arguments: CloudUnderTest.allCases)
    func pagesNeverSkipOrRepeatARecord(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            try await cloud.save((0..<50).map { makeRecord("r\($0)") })
            let middle = try await cloud.currentToken()
            // Change half, delete a quarter, and add some, so pages mix changes and deletions.
            try await cloud.save((0..<25).map { makeRecord("r\($0)", ["value": .string("changed")]) }, policy: .allKeys)
            try await cloud.forceDelete((25..<38).map { "r\($0)" })
            try await cloud.save((50..<60).map { makeRecord("r\($0)") })

            for (token, expectedChanged, expectedDeleted) in [(nil as ChangeToken?, 47, 0), (middle, 35, 13)] {
                var seen: [RecordID] = []
                var nextToken = token
                var pages = 0
                while true {
                    let page = try await cloud.fetchZoneChanges(in: .notes, since: nextToken, resultsLimit: 7)
                    pages += 1
                    #expect(page.changedRecords.count + page.deletedRecordIDs.count <= 7)
                    seen += page.changedRecords.map(\.id) + page.deletedRecordIDs
                    nextToken = page.token
                    if !page.moreComing { break }
                    #expect(
                        page.changedRecords.count + page.deletedRecordIDs.count == 7, "a full page before moreComing")
                }
                #expect(Set(seen).count == seen.count, "a record came twice: \(seen)")
                #expect(seen.count == expectedChanged + expectedDeleted)
                #expect(pages == (expectedChanged + expectedDeleted + 6) / 7)
                let all = try await cloud.fetchAll(since: token)
                #expect(all.changed.count == expectedChanged)
                #expect(all.deleted.count == expectedDeleted)
            }
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func recordsChangedManyTimesComeOnceFromAnyToken(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            var tokens: [(token: ChangeToken, changedAfter: Set<String>)] = []
            for round in 0..<60 {
                // Rounds change a sliding pair of five records; remember what changed after each token.
                let names = ["r\(round % 5)", "r\((round + 1) % 5)"]
                try await cloud.save(names.map { makeRecord($0, ["round": .int(Int64(round))]) }, policy: .allKeys)
                for index in tokens.indices { tokens[index].changedAfter.formUnion(names) }
                if round.isMultiple(of: 7) { tokens.append((try await cloud.currentToken(), [])) }
            }
            let server = try await cloud.records(in: .notes)
            for (token, changedAfter) in tokens {
                let changes = try await cloud.fetchAll(since: token, resultsLimit: 2)
                #expect(Set(changes.changed.keys.map(\.name)) == changedAfter)
                #expect(changes.deleted.isEmpty)
                #expect(Set(changes.changed.values).isSubset(of: Set(server)), "as the server holds them now")
            }
            let fromNil = try await cloud.fetchAll(resultsLimit: 2)
            #expect(fromNil.changed.values.sorted { $0.id < $1.id } == server)
            #expect(fromNil.pages == 3)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aResultsLimitBelowOneIsInvalid(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            await expectCloudError(.invalidArguments) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 0)
            }
        }
    }

    /// The case a single-position token gets wrong: a record served on an early page is deleted,
    /// created again and deleted again while the client is still paging, and a later page boundary
    /// falls between its deletion and its re-creation. The client holds it, so it must hear of the
    /// deletion.
    @Test(arguments: CloudUnderTest.allCases)
    func aRecordServedOnAnEarlierPageAndDeletedWhilePagingIsReported(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            for name in ["r", "a", "b"] { _ = try await cloud.saveOne(makeRecord(name)) }
            let first = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 1)
            #expect(first.changedRecords.map(\.id.name) == ["r"])
            #expect(first.moreComing)

            try await cloud.forceDelete(["r"])
            _ = try await cloud.saveOne(makeRecord("b", ["v": .int(2)]), policy: .allKeys)
            _ = try await cloud.saveOne(makeRecord("r"))
            try await cloud.forceDelete(["r"])

            let second = try await cloud.fetchZoneChanges(in: .notes, since: first.token, resultsLimit: 2)
            #expect(second.changedRecords.map(\.id.name) == ["a", "b"])
            #expect(second.moreComing)
            let third = try await cloud.fetchZoneChanges(in: .notes, since: second.token, resultsLimit: 2)
            #expect(third.changedRecords.isEmpty)
            #expect(third.deletedRecordIDs == [recordID("r")])
            #expect(!third.moreComing)
        }
    }

    /// A client that pages through changes while other clients keep changing the zone between its pages
    /// ends up with exactly the server's records, and never gets a record twice without a change.
    @Test(arguments: CloudUnderTest.allCases, [1, 2, 3, 4] as [UInt64])
    func pagingWhileTheZoneChangesConverges(_ kind: CloudUnderTest, _ seed: UInt64) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            var random = SeededRandomNumberGenerator(seed: seed)
            var names = (0..<8).map { "r\($0)" }
            try await cloud.save(names.map { makeRecord($0) })

            var client: [RecordID: Record] = [:]
            var token: ChangeToken?
            for round in 0..<6 {
                var deliveredTags: [RecordID: ChangeTag] = [:]
                while true {
                    let page = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 3)
                    for record in page.changedRecords {
                        #expect(deliveredTags[record.id] != record.changeTag, "\(record.id) repeated unchanged")
                        deliveredTags[record.id] = record.changeTag
                        client[record.id] = record
                    }
                    for id in page.deletedRecordIDs {
                        client[id] = nil
                    }
                    token = page.token
                    if !page.moreComing { break }
                    // Another device changes the zone between two pages.
                    for _ in 0..<3 {
                        try await mutateRandomly(cloud, names: &names, random: &random)
                    }
                }
                let server = try await cloud.records(in: .notes)
                #expect(client.values.sorted { $0.id < $1.id } == server, "round \(round), seed \(seed)")
                for _ in 0..<8 {
                    try await mutateRandomly(cloud, names: &names, random: &random)
                }
            }
        }
    }

    /// Creates, changes, deletes or re-creates one record.
    private func mutateRandomly(
        _ cloud: any TestCloud,
        names: inout [String],
        random: inout SeededRandomNumberGenerator
    ) async throws {
        let name = random.nextIndex(below: 6) == 0 ? "n\(names.count)" : names[random.nextIndex(below: names.count)]
        if !names.contains(name) { names.append(name) }
        if random.nextIndex(below: 3) == 0 {
            try await cloud.forceDelete([name])
        } else {
            try await cloud.save(
                [makeRecord(name, ["v": .int(Int64(random.nextIndex(below: 1000)))])], policy: .allKeys)
        }
    }

    // MARK: - Database changes

    @Test(arguments: CloudUnderTest.allCases)
    func databaseChangesNameTheZonesThatChanged(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            let empty = try await cloud.fetchDatabaseChanges(since: nil)
            #expect(empty.changedZones.isEmpty && empty.deletedZones.isEmpty && !empty.moreComing)

            try await cloud.createZones([.notes, .photos])
            let first = try await cloud.fetchDatabaseChanges(since: nil)
            #expect(first.changedZones == [.notes, .photos])
            #expect(first.deletedZones.isEmpty)

            let quiet = try await cloud.fetchDatabaseChanges(since: first.token)
            #expect(quiet.changedZones.isEmpty && quiet.deletedZones.isEmpty)

            _ = try await cloud.saveOne(makeRecord("a"))
            let afterSave = try await cloud.fetchDatabaseChanges(since: quiet.token)
            #expect(afterSave.changedZones == [.notes])

            try await cloud.forceDelete(["a"])
            let afterDelete = try await cloud.fetchDatabaseChanges(since: afterSave.token)
            #expect(afterDelete.changedZones == [.notes])

            // A request that changed nothing does not mark the zone.
            try await cloud.forceDelete(["never"])
            _ = try await cloud.save([makeRecord("b", tag: ChangeTag("1.x"))])  // fails: unknownItem
            let unchanged = try await cloud.fetchDatabaseChanges(since: afterDelete.token)
            #expect(unchanged.changedZones.isEmpty)

            let zone = ZoneID("Later")
            try await cloud.createZones([zone])
            let created = try await cloud.fetchDatabaseChanges(since: unchanged.token)
            #expect(created.changedZones == [zone])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func databaseChangesReportDeletedZonesWithWhoDeletedThem(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            let third = ZoneID("Third")
            try await cloud.createZones([.notes, .photos, third])
            let token = try await cloud.fetchDatabaseChanges(since: nil).token
            try await cloud.deleteZones([.notes])
            try await cloud.deleteZoneAsUser(.photos)

            let changes = try await cloud.fetchDatabaseChanges(since: token)
            #expect(changes.changedZones.isEmpty)
            #expect(
                changes.deletedZones == [
                    ZoneDeletion(zone: .notes, reason: kind.seen(.deleted)),
                    ZoneDeletion(zone: .photos, reason: kind.seen(.deletedByUser)),
                ])
            let fromNil = try await cloud.fetchDatabaseChanges(since: nil)
            #expect(fromNil.changedZones == [third])
            #expect(fromNil.deletedZones.isEmpty, "a client starting from nil has no zone to delete")
            let later = try await cloud.fetchDatabaseChanges(since: changes.token)
            #expect(later.deletedZones.isEmpty, "a deletion is reported once")
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aZoneDeletedAndCreatedAgainIsInBothLists(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            let token = try await cloud.fetchDatabaseChanges(since: nil).token
            try await cloud.deleteZoneAsUser(.notes)
            try await cloud.createZones([.notes])
            try await cloud.deleteZones([.photos])
            try await cloud.createZones([.photos])

            let changes = try await cloud.fetchDatabaseChanges(since: token)
            #expect(changes.changedZones == [.notes, .photos])
            #expect(
                changes.deletedZones == [
                    ZoneDeletion(zone: .notes, reason: kind.seen(.deletedByUser)),
                    ZoneDeletion(zone: .photos, reason: kind.seen(.deleted)),
                ])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aZoneCreatedAndDeletedSinceTheTokenIsNotMentioned(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            let token = try await cloud.fetchDatabaseChanges(since: nil).token
            try await cloud.createZones([.notes])
            try await cloud.deleteZones([.notes])
            let changes = try await cloud.fetchDatabaseChanges(since: token)
            #expect(changes.changedZones.isEmpty && changes.deletedZones.isEmpty)
        }
    }

    // MARK: - Token expiry

    @Test(arguments: CloudUnderTest.allCases)
    func tokensOlderThanTheKeptHistoryExpire(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud(changeHistoryLimit: 5) { cloud in
            try await cloud.createZones([.notes])
            try await cloud.save((0..<8).map { makeRecord("r\($0)") })  // 8 changes: older history is gone
            let token = try await cloud.currentToken()

            // Five more changes: the token is exactly at the edge of the kept history and still works.
            try await cloud.save((0..<3).map { makeRecord("s\($0)") })
            try await cloud.forceDelete(["r0", "r1"])
            let edge = try await cloud.fetchAll(since: token)
            #expect(edge.changed.count == 3)
            #expect(edge.deleted == [recordID("r0"), recordID("r1")])

            // One more: it is past the edge.
            _ = try await cloud.saveOne(makeRecord("t"))
            await expectCloudError(.changeTokenExpired) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 100)
            }
            // Starting over from nil works, as does the token the edge fetch returned.
            let fresh = try await cloud.fetchAll()
            #expect(Set(fresh.changed.values) == Set(try await cloud.records(in: .notes)))
            #expect(try await cloud.fetchAll(since: edge.token).changed.keys.map(\.name) == ["t"])
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func pagingFromNilWorksWhenTheHistoryIsCompacted(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud(changeHistoryLimit: 3) { cloud in
            try await cloud.createZones([.notes])
            try await cloud.save((0..<20).map { makeRecord("r\($0)") })
            let all = try await cloud.fetchAll(resultsLimit: 4)
            #expect(all.changed.count == 20)
            #expect(all.pages == 5)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func tokensFromBeforeAZoneWasDeletedExpire(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            _ = try await cloud.saveOne(makeRecord("a"))
            _ = try await cloud.saveOne(makeRecord("b", in: .photos))
            let notesToken = try await cloud.currentToken(.notes)
            let photosToken = try await cloud.currentToken(.photos)

            try await cloud.deleteZones([.notes])
            try await cloud.deleteZoneAsUser(.photos)
            await expectCloudError(.zoneNotFound) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: notesToken, resultsLimit: 10)
            }
            await expectCloudError(kind.seen(.userDeletedZone)) {
                _ = try await cloud.fetchZoneChanges(in: .photos, since: photosToken, resultsLimit: 10)
            }

            try await cloud.createZones([.notes, .photos])
            for (zone, token) in [(ZoneID.notes, notesToken), (.photos, photosToken)] {
                await expectCloudError(.changeTokenExpired) {
                    _ = try await cloud.fetchZoneChanges(in: zone, since: token, resultsLimit: 10)
                }
                let fresh = try await cloud.fetchZoneChanges(in: zone, since: nil, resultsLimit: 10)
                #expect(fresh.changedRecords.isEmpty, "the zone came back empty")
            }
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func expiringAllTokensExpiresZoneAndDatabaseTokens(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            _ = try await cloud.saveOne(makeRecord("a"))
            let notesToken = try await cloud.currentToken(.notes)
            let photosToken = try await cloud.currentToken(.photos)
            let databaseToken = try await cloud.fetchDatabaseChanges(since: nil).token

            try await cloud.expireAllChangeTokens()
            for (zone, token) in [(ZoneID.notes, notesToken), (.photos, photosToken)] {
                await expectCloudError(.changeTokenExpired) {
                    _ = try await cloud.fetchZoneChanges(in: zone, since: token, resultsLimit: 10)
                }
            }
            await expectCloudError(.changeTokenExpired) {
                _ = try await cloud.fetchDatabaseChanges(since: databaseToken)
            }

            // Tokens minted afterwards work.
            let fresh = try await cloud.fetchAll()
            #expect(fresh.changed.keys.map(\.name) == ["a"])
            _ = try await cloud.saveOne(makeRecord("b"))
            #expect(try await cloud.fetchAll(since: fresh.token).changed.keys.map(\.name) == ["b"])
            let freshDatabase = try await cloud.fetchDatabaseChanges(since: nil)
            #expect(try await cloud.fetchDatabaseChanges(since: freshDatabase.token).changedZones.isEmpty)
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func expiringOneZonesTokensLeavesTheOthers(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            let notesToken = try await cloud.currentToken(.notes)
            let photosToken = try await cloud.currentToken(.photos)
            let databaseToken = try await cloud.fetchDatabaseChanges(since: nil).token
            try await cloud.expireChangeTokens(in: .notes)
            await expectCloudError(.changeTokenExpired) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: notesToken, resultsLimit: 10)
            }
            _ = try await cloud.fetchZoneChanges(in: .photos, since: photosToken, resultsLimit: 10)
            _ = try await cloud.fetchDatabaseChanges(since: databaseToken)
        }
    }

    /// Tokens the server cannot use, however they came about.
    enum UnusableToken: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case empty, garbage, flippedByte, truncated, extended, fromAnotherServer, fromAnotherZone, databaseTokenForAZone
        var testDescription: String { rawValue }
    }

    @Test(arguments: CloudUnderTest.allCases, UnusableToken.allCases)
    func unusableTokensExpire(_ kind: CloudUnderTest, _ unusable: UnusableToken) async throws {
        try await kind.withTwoClouds { cloud, otherServer in
            for server in [cloud, otherServer] {
                try await server.createZones([.notes, .photos])
                _ = try await server.saveOne(makeRecord("a"))
            }
            let valid = try await cloud.currentToken(.notes)
            let token: ChangeToken
            switch unusable {
            case .empty: token = ChangeToken(data: Data())
            case .garbage:
                var random = SeededRandomNumberGenerator(seed: 99)
                token = ChangeToken(
                    data: Data((0..<valid.data.count).map { _ in UInt8.random(in: 0...255, using: &random) }))
            case .flippedByte:
                var bytes = valid.data
                bytes[bytes.count / 2] ^= 0x10
                token = ChangeToken(data: bytes)
            case .truncated: token = ChangeToken(data: valid.data.dropLast())
            case .extended: token = ChangeToken(data: valid.data + [0])
            case .fromAnotherServer: token = try await otherServer.currentToken(.notes)
            case .fromAnotherZone: token = try await cloud.currentToken(.photos)
            case .databaseTokenForAZone: token = try await cloud.fetchDatabaseChanges(since: nil).token
            }
            await expectCloudError(.changeTokenExpired) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: token, resultsLimit: 10)
            }
            if unusable != .databaseTokenForAZone {
                // The same bytes are no database token either.
                await expectCloudError(.changeTokenExpired) { _ = try await cloud.fetchDatabaseChanges(since: token) }
            }
            _ = try await cloud.fetchZoneChanges(in: .notes, since: valid, resultsLimit: 10)
        }
    }

    // MARK: - Deleted zones

    @Test(arguments: CloudUnderTest.allCases)
    func aZoneDeletedByTheUserFailsWithUserDeletedZoneUntilCreatedAgain(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes, .photos])
            let saved = try await cloud.saveOne(makeRecord("a"))
            try await cloud.deleteZoneAsUser(.notes)

            #expect(try await cloud.listZones() == [.photos])
            await expectCloudError(kind.seen(.userDeletedZone)) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
            }
            let result = try await cloud.modifyRecords(
                saving: [RecordSave(makeRecord("b")), RecordSave(makeRecord("c", in: .photos))],
                deleting: [RecordDeletion(saved.id, policy: .force)],
                atomically: false
            )
            #expect(result.failed[recordID("b")]?.code == kind.seen(.userDeletedZone))
            #expect(result.failed[saved.id]?.code == kind.seen(.userDeletedZone))
            #expect(Set(result.saved.keys) == [recordID("c", in: .photos)], "other zones still work")
            #expect(try await cloud.lookupRecords([saved.id]).isEmpty)
            #expect(try await cloud.records(in: .notes).isEmpty)

            // An app deleting it does not turn it into an ordinary missing zone.
            try await cloud.deleteZones([.notes])
            await expectCloudError(kind.seen(.userDeletedZone)) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
            }

            try await cloud.createZones([.notes])
            let fresh = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
            #expect(fresh.changedRecords.isEmpty)
            _ = try await cloud.saveOne(makeRecord("b"))
        }
    }

    @Test(arguments: CloudUnderTest.allCases)
    func aZoneDeletedByAnAppFailsWithZoneNotFound(_ kind: CloudUnderTest) async throws {
        try await kind.withCloud { cloud in
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("a"))
            try await cloud.deleteZones([.notes])
            await expectCloudError(.zoneNotFound) {
                _ = try await cloud.fetchZoneChanges(in: .notes, since: nil, resultsLimit: 10)
            }
            let result = try await cloud.save([makeRecord("b")])
            #expect(result.failed[recordID("b")]?.code == .zoneNotFound)
            await expectCloudError(.zoneNotFound) { try await cloud.deleteZoneAsUser(.notes) }
        }
    }
}

import FlatSync
import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

/// The settle sample of "Testing a host with FlatSyncTesting": two devices change the same list offline,
/// and settling brings both to what the server holds.
private func settleSample(directory: URL) async throws {
    let cloud = InMemoryCloud()
    let a = try await SyncContext.open(
        directory: directory.appendingPathComponent("A"), account: CloudAccount(id: "user", transport: cloud))
    let b = try await SyncContext.open(
        directory: directory.appendingPathComponent("B"), account: CloudAccount(id: "user", transport: cloud))
    try await a.readingList.add("x")
    try await SyncContext.settle([a, b])
    // Settle sample begins
    try await a.readingList.add("from-a")
    try await b.readingList.remove("x")
    let rounds = try await SyncContext.settle([a, b])  // syncNow() on each, in turns, until a round moves nothing
    #expect(rounds == 3)  // A sends, B sends and fetches; A fetches; then nothing moves
    #expect(await a.readingList.entries() == b.readingList.entries())
    #expect(await a.readingList.entries().map(\.articleID) == ["from-a"])
    // Settle sample ends
    try await a.close()
    try await b.close()
}

/// ``SyncContext/settle(_:maximumRounds:)``: it returns once devices agree, and throws, saying why, when they
/// cannot by syncing alone.
@Suite struct SettlingTests {
    /// Device `name`, in a folder of its own under `directory`, of one account on `transport`.
    private func device(_ name: String, in directory: URL, _ transport: any CloudTransport) async throws -> SyncContext
    {
        try await SyncContext.open(
            directory: directory.appendingPathComponent(name), account: CloudAccount(id: "user", transport: transport))
    }

    @Test func theSettleSampleBringsBothDevicesToTheServersList() async throws {
        try await withTemporaryDirectory { try await settleSample(directory: $0) }
    }

    @Test func theSettleSampleIsShownVerbatim() throws {
        let sample = try DocumentationSample("Settle sample", in: #filePath, indent: 4)
        #expect(try sample.isShown(in: "Sources/FlatSync/FlatSync.docc/TestingAHost.md"))
    }

    /// Devices with nothing to exchange settle in one quiet round.
    @Test func devicesInAgreementSettleInOneRound() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let a = try await device("A", in: directory, cloud)
            #expect(try await SyncContext.settle([a]) == 1)
            try await a.close()
        }
    }

    /// A device whose network is off keeps its change: the round moves nothing and the helper throws at once
    /// (stuck), naming the pending change and the problem, instead of syncing to the last round.
    @Test func aDeviceOfflineWithAChangeToSendIsStuck() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let network = SwitchableTransport(cloud, online: false)
            let a = try await device("A", in: directory, network)
            let b = try await device("B", in: directory, cloud)
            try await a.readingList.add("x")
            let failure = await #expect(throws: SettlingFailed.self) { try await SyncContext.settle([a, b]) }
            #expect(failure?.stuck == true)
            #expect(failure?.rounds == 1)
            #expect(failure?.summaries.map(\.pendingRecords) == [1, 0])
            #expect(failure?.summaries.first?.problems.isEmpty == false)
            #expect(failure?.description.contains("1 pending") == true)

            await network.setOnline(true)
            #expect(try await SyncContext.settle([a, b]) == 2)  // A sends, B fetches; then nothing moves
            #expect(await b.readingList.contains("x"))
            try await a.close()
            try await b.close()
        }
    }

    /// A change the server refuses is parked and stays pending: syncing again will not settle it.
    @Test func aRefusedChangeIsStuckUntilTheHostDiscardsIt() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud(faultPlan: .failRecord(named: "rl-x", with: .invalidArguments, times: 100))
            let a = try await device("A", in: directory, cloud)
            try await a.readingList.add("x")
            let failure = await #expect(throws: SettlingFailed.self) { try await SyncContext.settle([a]) }
            #expect(failure?.stuck == true)
            #expect(failure?.summaries.first?.refused.map(\.recordID.name) == ["rl-x"])
            #expect(try await a.discardRefusedChanges().count == 1)
            #expect(try await SyncContext.settle([a]) == 1)
            try await a.close()
        }
    }

    /// Rounds that all move something run out: the helper throws, not stuck, after the last.
    @Test func roundsThatRunOutThrowNotStuck() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = InMemoryCloud()
            let a = try await device("A", in: directory, cloud)
            let b = try await device("B", in: directory, cloud)
            try await b.readingList.add("x")
            let failure = await #expect(throws: SettlingFailed.self) {
                try await SyncContext.settle([a, b], maximumRounds: 1)
            }
            #expect(failure?.stuck == false)
            #expect(failure?.rounds == 1)
            #expect(failure?.summaries.map(\.sent) == [0, 1])
            #expect(try await SyncContext.settle([a, b]) == 2)
            try await a.close()
            try await b.close()
        }
    }
}

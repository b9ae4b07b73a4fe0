import FlatSyncTestSupport
import FlatSync
import FlatSyncTesting
import Foundation
import Testing

// What DirectoryCloud adds to the conformance suite: state shared by values and processes on one
// directory, serialized requests, and damage reported instead of lost.

@Suite("DirectoryCloud")
struct DirectoryCloudTests {
    @Test func valuesOnOneDirectoryShareOneServer() async throws {
        try await withTemporaryDirectory { directory in
            let first = try DirectoryCloud(directory: directory)
            try await first.createZones([.notes])
            let saved = try await first.saveOne(makeRecord("a"))
            let token = try await first.currentToken()

            let second = try DirectoryCloud(directory: directory)
            #expect(try await second.records(in: .notes) == [saved])
            _ = try await second.saveOne(makeRecord("b"))
            let changes = try await second.fetchZoneChanges(in: .notes, since: token, resultsLimit: 10)
            #expect(changes.changedRecords.map(\.id.name) == ["b"], "a token minted through one value works in another")
            #expect(try await first.counters().recordsSaved == 2)
        }
    }

    @Test func aSeededFaultPlanRepeatsAcrossValuesAndDirectories() async throws {
        let plan = FaultPlan.random(rate: 0.4, seed: 1234)
        let alone = try await withTemporaryDirectory { directory in
            let cloud = try DirectoryCloud(directory: directory)
            try await cloud.createZones([.notes])
            try await cloud.setFaultPlan(plan)
            return try await CloudFaultConformanceTests.outcomes(of: 40, [cloud])
        }
        let shared = try await withTemporaryDirectory { directory in
            let clouds = try (0..<3).map { _ in try DirectoryCloud(directory: directory) }
            try await clouds[0].createZones([.notes])
            try await clouds[1].setFaultPlan(plan)
            return try await CloudFaultConformanceTests.outcomes(of: 40, clouds)
        }
        let inMemory = InMemoryCloud()
        try await inMemory.createZones([.notes])
        await inMemory.setFaultPlan(plan)
        let reference = try await CloudFaultConformanceTests.outcomes(of: 40, [inMemory])
        #expect(alone == shared, "the generator's state lives in the directory")
        #expect(alone == reference, "both clouds draw faults the same way")
    }

    @Test func aHistoryLimitGivenToOneValueStaysWithTheDirectory() async throws {
        try await withTemporaryDirectory { directory in
            let limited = try DirectoryCloud(directory: directory, changeHistoryLimit: 2)
            try await limited.createZones([.notes])
            let token = try await limited.currentToken()

            let plain = try DirectoryCloud(directory: directory)
            try await plain.save([makeRecord("a"), makeRecord("b"), makeRecord("c")])
            await expectCloudError(.changeTokenExpired) {
                _ = try await plain.fetchZoneChanges(in: .notes, since: token, resultsLimit: 10)
            }
        }
    }

    @Test func concurrentRequestsInOneProcessAreSerialized() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = try DirectoryCloud(directory: directory)
            try await cloud.createZones([.notes])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<24 {
                    group.addTask {
                        let result = try await cloud.save([makeRecord("r\(index)")])
                        #expect(result.failed.isEmpty)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await cloud.records(in: .notes).count == 24)
            #expect(try await cloud.counters().recordsSaved == 24)
        }
    }

    @Test func leftoversOfACrashedWriterAreRemoved() async throws {
        try await withTemporaryDirectory { directory in
            let cloud = try DirectoryCloud(directory: directory)
            let leftover = directory.appendingPathComponent(".tmp-\(DirectoryCloud.stateFileName)-999-1")
            _ = FileManager.default.createFile(atPath: leftover.path, contents: Data("half a state".utf8))
            try await cloud.createZones([.notes])
            #expect(!FileManager.default.fileExists(atPath: leftover.path))
            #expect(try await cloud.listZones() == [.notes])
        }
    }

    // MARK: - Several processes

    @Test func twoProcessesWritingAtOnceLoseNothing() async throws {
        try await withTemporaryDirectory { directory in
            let cloudDirectory = directory.appendingPathComponent("cloud")
            let perWriter = 150
            let writers = try ["left", "right"].map { prefix in
                try ChildProcess(["cloud-writer", cloudDirectory.path, prefix, String(perWriter)], errorsIn: directory)
            }
            for writer in writers {
                let (status, errors) = await writer.waitForExit()
                #expect(status == 0, "cloud-writer failed: \(errors)")
                #expect(errors.isEmpty)
            }

            let cloud = try DirectoryCloud(directory: cloudDirectory)
            let zone = ZoneID("Writers")
            let records = try await cloud.records(in: zone)
            let expectedNames = Set(["left", "right"].flatMap { prefix in (0..<perWriter).map { "\(prefix)-\($0)" } })
            #expect(records.count == 2 * perWriter)
            #expect(Set(records.map(\.id.name)) == expectedNames)
            for record in records {
                let parts = record.id.name.split(separator: "-")
                #expect(record["writer"] == .string(String(parts[0])), "torn record \(record)")
                #expect(record["index"] == .int(Int64(parts[1])!), "torn record \(record)")
            }
            #expect(Set(records.compactMap(\.changeTag)).count == 2 * perWriter, "change tags are unique")

            let counters = try await cloud.counters()
            #expect(counters.recordsSaved == 2 * perWriter)
            #expect(counters.modifyRequests == 2 * perWriter)
            #expect(counters.requests(.createZones) == 2)

            let fetched = try await cloud.fetchAll(zone, resultsLimit: 400)
            #expect(fetched.pages == 1)
            #expect(fetched.deleted.isEmpty)
            #expect(Set(fetched.changed.values) == Set(records))
        }
    }

    // MARK: - Damage

    /// Ways the state file can be damaged.
    enum Damage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case flippedPayloadByte, flippedLastByte, flippedSignature, flippedChecksum, flippedLength
        case truncated, truncatedToHalfTheHeader, extended, empty, newerFormat

        var testDescription: String { rawValue }

        func apply(to bytes: Data) -> Data {
            var bytes = bytes
            switch self {
            case .flippedPayloadByte: bytes[24 + (bytes.count - 24) / 2] ^= 0x01
            case .flippedLastByte: bytes[bytes.count - 1] ^= 0x80
            case .flippedSignature: bytes[0] ^= 0x20
            case .flippedChecksum: bytes[12] ^= 0x01
            case .flippedLength: bytes[16] ^= 0x01
            case .truncated: bytes = bytes.prefix(bytes.count - 7)
            case .truncatedToHalfTheHeader: bytes = bytes.prefix(12)
            case .extended: bytes.append(0)
            case .empty: bytes = Data()
            case .newerFormat: bytes[8] = 99  // a version far above any this FlatSync writes
            }
            return bytes
        }
    }

    @Test(arguments: Damage.allCases)
    func aDamagedStateFileIsReportedAndLeftAlone(_ damage: Damage) async throws {
        try await withTemporaryDirectory { directory in
            let cloud = try DirectoryCloud(directory: directory)
            try await cloud.createZones([.notes])
            _ = try await cloud.saveOne(makeRecord("a"))
            let file = cloud.stateFile
            let damaged = damage.apply(to: try Data(contentsOf: file))
            try damaged.write(to: file)

            for attempt in [cloud, try DirectoryCloud(directory: directory)] {
                let requestError = await expectCloudError(.internalError) { _ = try await attempt.listZones() }
                #expect(requestError?.message.contains(file.path) == true, "\(requestError?.message ?? "")")
                let saveError = await expectCloudError(.internalError) { try await attempt.save([makeRecord("b")]) }
                #expect(saveError?.message.contains(file.path) == true)
                await expectCloudError(.internalError) { _ = try await attempt.counters() }
            }
            let message = await cloudError { _ = try await cloud.listZones() }?.message ?? ""
            if damage == .newerFormat {
                #expect(message.contains("newer"))
            } else {
                #expect(message.contains("damaged"))
            }
            #expect(message.contains("move the file aside"))
            #expect(try Data(contentsOf: file) == damaged, "the damaged file is left byte for byte")
        }
    }
}

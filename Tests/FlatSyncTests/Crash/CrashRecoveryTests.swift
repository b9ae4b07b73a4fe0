import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

/// Kills a real child process with SIGKILL at random moments while it performs acknowledged mutations
/// (with snapshot writes, compactions and send rounds going on), reopens the directory each time, and
/// checks that every acknowledged mutation is there.
///
/// `FLATSYNC_CRASH_KILLS` sets the number of kills per durability level (default 30, for CI); run with
/// 1000 or more by hand.
@Suite(.serialized) struct CrashRecoveryTests {
    static let kills = Int(ProcessInfo.processInfo.environment["FLATSYNC_CRASH_KILLS"] ?? "") ?? 30

    @Test(arguments: Durability.allCases)
    func acknowledgedMutationsSurviveSIGKILL(durability: Durability) async throws {
        try await withTemporaryDirectory { directory in
            var random = SeededRandomNumberGenerator(seed: durability == .fsync ? 11 : 12)
            var model = CrashModel()
            var acknowledged = 0
            var lost = 0
            var killedMidOperation = 0
            for round in 0..<Self.kills {
                let child = try ChildProcess(["crash-child", directory.path, "\(random.next())", durability.rawValue])
                let ready = await child.readLine()
                try #require(ready == "ready", "round \(round): the child did not start")
                // Let it run for a random number of acknowledged operations, then kill it a random few
                // hundred microseconds later, inside whatever it is doing by then.
                let target = Int.random(in: 0..<80, using: &random)
                var lines: [String] = []
                var acks = 0
                while acks < target, let line = await child.readLine() {
                    lines.append(line)
                    if line.hasPrefix("ack ") { acks += 1 }
                }
                try await Task.sleep(for: .microseconds(Int.random(in: 0..<1_500, using: &random)))
                child.kill()
                _ = await child.waitForExit()
                while let line = await child.readLine() { lines.append(line) }

                let (operations, unacknowledged) = try CrashModel.parse(lines)
                var expected = model
                for operation in operations { expected.apply(operation) }
                acknowledged += operations.count

                let store = try LocalStore(
                    directory: directory,
                    options: LocalStore.Options(
                        durability: durability,
                        recordTypes: [TestNote.self, TestRecipe.self, TestStep.self, TestPhoto.self]))
                let repaired = store.eventHub.keptEvents
                #expect(repaired.isEmpty, "round \(round): a kill must never damage a file: \(repaired)")
                let names = try fileNames(in: directory)
                #expect(
                    !names.contains { $0.hasPrefix(".tmp-") || $0.contains(".corrupt-") }, "round \(round): \(names)")
                let actual = await CrashModel(store)
                // The open deleted every asset file no record names (one made by an operation the kill cut
                // short before its record was saved, one a later version replaced).
                let assetFiles = (try? fileNames(in: store.assetsDirectory)) ?? []
                #expect(assetFiles.count == actual.photos.count, "round \(round): asset files \(assetFiles)")
                if actual != expected {
                    // The operation the child was killed in may have become durable before its ack.
                    var alternative = expected
                    if let unacknowledged { alternative.apply(unacknowledged) }
                    if actual == alternative {
                        killedMidOperation += 1
                    } else {
                        lost += 1
                        Issue.record("round \(round): acknowledged state lost\nexpected \(expected)\nactual \(actual)")
                    }
                }
                model = actual
                try await store.close()
            }
            #expect(lost == 0)
            #expect(acknowledged > Self.kills, "the child must get work done between kills")
            #expect(
                !model.notes.isEmpty && !model.recipes.isEmpty && !model.steps.isEmpty && !model.photos.isEmpty,
                "the child must write host records, in batches too, and assets")
            print(
                "crash test (\(durability)): \(Self.kills) kills, \(acknowledged) acknowledged mutations checked, "
                    + "\(killedMidOperation) durable before their ack, host records at the end "
                    + "\(model.notes.count + model.recipes.count + model.steps.count), photos \(model.photos.count), "
                    + "lost = \(lost)"
            )
        }
    }
}

extension CrashRecoveryTests {
    /// Sixteen tasks of one child add articles as fast as their adds return, so their entries share
    /// flushes; the child is killed at a random moment, and every add that returned
    /// must be there after the reopen.
    @Test(arguments: Durability.allCases)
    func concurrentWritersLoseNoAcknowledgedAddToSIGKILL(durability: Durability) async throws {
        try await withTemporaryDirectory { directory in
            var random = SeededRandomNumberGenerator(seed: durability == .fsync ? 21 : 22)
            var acknowledged = 0
            var unacknowledgedFound = 0
            var lost = 0
            for round in 0..<max(1, Self.kills / 2) {
                let child = try ChildProcess(["writers-child", directory.path, "16", durability.rawValue])
                let ready = await child.readLine()
                try #require(ready == "ready", "round \(round): the child did not start")
                let target = Int.random(in: 1..<400, using: &random)
                var acked: [String] = []
                while acked.count < target, let line = await child.readLine() {
                    if line.hasPrefix("ack ") { acked.append(String(line.dropFirst(4))) }
                }
                try await Task.sleep(for: .microseconds(Int.random(in: 0..<1_500, using: &random)))
                child.kill()
                _ = await child.waitForExit()
                while let line = await child.readLine() {
                    if line.hasPrefix("ack ") { acked.append(String(line.dropFirst(4))) }
                }
                acknowledged += acked.count

                let store = try LocalStore(directory: directory, options: LocalStore.Options(durability: durability))
                let repaired = store.eventHub.keptEvents
                #expect(repaired.isEmpty, "round \(round): a kill must never damage a file: \(repaired)")
                let present = Set(await store.readingList.entries().map(\.articleID))
                let missing = acked.filter { !present.contains($0) }
                lost += missing.count
                #expect(missing.isEmpty, "round \(round): acknowledged adds lost: \(missing.prefix(5))")
                unacknowledgedFound += present.count - acked.count
                // Start each round from an empty list, so that the counts above are this round's.
                try await store.readingList.apply(present.map { .remove(articleID: $0) })
                try await store.close()
            }
            #expect(lost == 0)
            #expect(acknowledged > Self.kills, "the writers must get work done between kills")
            print(
                "crash test, 16 concurrent writers (\(durability)): \(max(1, Self.kills / 2)) kills, "
                    + "\(acknowledged) acknowledged adds checked, \(unacknowledgedFound) durable before their ack, "
                    + "lost = \(lost)"
            )
        }
    }
}

/// The visible state a crash child builds, without dates (the child's clock is not the test's).
struct CrashModel: Equatable, CustomStringConvertible {
    struct HistoryFacts: Equatable {
        var readCount: Int64
        var maxVersionSeen: Int64
        var liking: ReadingHistoryItem.Liking
        var flags: ReadingHistoryItem.Flags
    }

    var readingList: Set<String> = []
    var history: [String: ReadingHistoryItem] = [:]
    /// Host records: notes (name → article and text) and recipes (name → servings).
    var notes: [String: [String]] = [:]
    var recipes: [String: Int64] = [:]
    /// Steps (name → the recipe that owns them), saved in one batch with their dish.
    var steps: [String: String] = [:]
    /// Photos (name → the version of the asset bytes their file holds whole, -1 when it does not).
    var photos: [String: Int] = [:]

    init() {}

    init(_ store: LocalStore) async {
        readingList = Set(await store.readingList.entries().map(\.articleID))
        for item in await store.history.items() { history[item.articleID] = item }
        for note in await store.records(TestNote.self).values() { notes[note.id] = [note.articleID, note.text] }
        for recipe in await store.records(TestRecipe.self).values() { recipes[recipe.id] = recipe.servings }
        for step in await store.records(TestStep.self).values() { steps[step.id] = step.recipeID }
        for photo in await store.records(TestPhoto.self).values() {
            // The version the caption names, if the asset's file holds its bytes whole; -1 otherwise.
            let version = Int(photo.caption.dropFirst()) ?? -1
            let bytes = photo.image.flatMap { try? store.localData(of: $0) }
            photos[photo.id] = bytes == TestPhoto.bytes(version: version) ? version : -1
        }
    }

    static func == (lhs: CrashModel, rhs: CrashModel) -> Bool {
        lhs.readingList == rhs.readingList && lhs.history.mapValues(\.facts) == rhs.history.mapValues(\.facts)
            && lhs.notes == rhs.notes && lhs.recipes == rhs.recipes && lhs.steps == rhs.steps
            && lhs.photos == rhs.photos
    }

    var description: String {
        "list \(readingList.sorted()), history \(history.keys.sorted().map { "\($0): \(history[$0]!.facts)" }), "
            + "notes \(notes.sorted { $0.key < $1.key }), recipes \(recipes.sorted { $0.key < $1.key }), "
            + "steps \(steps.sorted { $0.key < $1.key }), photos \(photos.sorted { $0.key < $1.key })"
    }

    /// Applies one operation line (`add r1,r2`, `visit h3 2`, …) as the child performed it.
    mutating func apply(_ operation: [String]) {
        let now = Date()
        func change(_ change: ReadingHistoryChange) {
            history[change.articleID] = change.applied(to: history[change.articleID], now: now, deviceID: "crash-child")
        }
        switch operation[0] {
        case "add": readingList.formUnion(operation[1].split(separator: ",").map(String.init))
        case "remove":
            readingList.remove(operation[1])
            notes = notes.filter { $0.value[0] != operation[1] }  // deleteSelf: the entry's notes go with it
        case "note":
            if readingList.contains(operation[1]) {
                notes["n-\(operation[1])-\(operation[2])"] = [operation[1], "v\(operation[3])"]
            }
        case "unnote": notes["n-\(operation[1])-\(operation[2])"] = nil
        case "recipe": recipes["recipe-\(operation[1])"] = Int64(operation[2])!
        case "dish":
            let dish = "dish-\(operation[1])"
            recipes[dish] = Int64(operation[2])!
            for step in 0..<Int(operation[2])! { steps["\(dish)-step-\(step)"] = dish }
        case "dropdish":
            let dish = "dish-\(operation[1])"
            recipes[dish] = nil
            steps = steps.filter { $0.value != dish }  // deleteSelf: the dish's steps go with it
        case "visit": change(.visit(articleID: operation[1], version: Int64(operation[2])!))
        case "liking": change(.setLiking(articleID: operation[1], .init(rawValue: Int64(operation[2])!)!))
        case "read": change(.markRead(articleID: operation[1]))
        case "forget": history[operation[1]] = nil
        case "clear": history = [:]
        case "photo": photos["photo-\(operation[1])"] = Int(operation[2])!
        case "send": break
        default: Issue.record("unknown operation \(operation)")
        }
    }

    /// The acknowledged operations in order, and the one the child was in when it died (if any).
    static func parse(_ lines: [String]) throws -> (acknowledged: [[String]], unacknowledged: [String]?) {
        var started: [Int: [String]] = [:]
        var acknowledged: [[String]] = []
        var last: Int?
        for line in lines {
            let words = line.split(separator: " ").map(String.init)
            guard words.count >= 2, let number = Int(words[1]) else { continue }
            if words[0] == "op" {
                started[number] = Array(words.dropFirst(2))
                last = number
            } else if words[0] == "ack", let operation = started.removeValue(forKey: number) {
                acknowledged.append(operation)
            }
        }
        return (acknowledged, last.flatMap { started[$0] })
    }
}

extension ReadingHistoryItem {
    var facts: CrashModel.HistoryFacts {
        CrashModel.HistoryFacts(readCount: readCount, maxVersionSeen: maxVersionSeen, liking: liking, flags: flags)
    }
}

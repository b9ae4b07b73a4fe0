import FlatSync
import FlatSyncTesting
import Foundation

/// `crash-child DIR SEED DURABILITY`: opens a store in DIR and performs random mutations forever, printing
/// `op N <operation>` before each one and `ack N` once it returned, until the parent kills it.
///
/// Snapshots are debounced by 2 ms and the log compacts every few kilobytes, so kills land in snapshot
/// writes, compactions and simulated send rounds as well as in appends.
func runCrashChild(_ arguments: [String]) async -> Int32 {
    guard arguments.count == 3, let seed = UInt64(arguments[1]), let durability = Durability(rawValue: arguments[2])
    else {
        FileHandle.standardError.write(Data("usage: crash-child DIR SEED fsync|buffered\n".utf8))
        return 2
    }
    var options = LocalStore.Options(
        durability: durability, deviceID: "crash-child", snapshotDelay: .milliseconds(2),
        recordTypes: [TestNote.self, TestRecipe.self, TestStep.self, TestPhoto.self])
    options.compactionMinimumBytes = 16 << 10
    options.compactionGrowthFactor = 2
    let store: LocalStore
    do {
        store = try LocalStore(directory: URL(fileURLWithPath: arguments[0]), options: options)
    } catch {
        FileHandle.standardError.write(Data("crash-child: \(error)\n".utf8))
        return 1
    }
    print("ready")
    var random = SeededRandomNumberGenerator(seed: seed)
    var number = 0
    while true {
        number += 1
        let operation = CrashOperation.random(using: &random)
        print("op \(number) \(operation.line)")
        do {
            try await operation.perform(on: store)
        } catch {
            FileHandle.standardError.write(Data("crash-child: op \(number) failed: \(error)\n".utf8))
            return 1
        }
        print("ack \(number)")
    }
}

/// One line, written with a single write(2) so a kill never splits it (nor do concurrent writers: a line
/// is shorter than `PIPE_BUF`).
func print(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The operations a crash child performs; the test parses the same lines back (see CrashRecoveryTests).
enum CrashOperation {
    case add([String])
    case remove(String)
    case visit(String, version: Int64)
    case liking(String, ReadingHistoryItem.Liking)
    case markRead(String)
    case forget(String)
    case clearHistory
    /// Note `k` on a reading-list article with text version `v`: a host record in the list's zone, owned
    /// (deleteSelf) by the article's entry; skipped (but acknowledged) when the article is not on the list.
    case note(String, Int, Int)
    case unnote(String, Int)
    /// A host record in a zone of its own.
    case recipe(Int, Int64)
    /// Dish `k` with `n` steps, owned (deleteSelf) by it, saved as one batch: a kill leaves all or none.
    case dish(Int, Int)
    /// Deletes dish `k`, and its steps with it.
    case dropDish(Int)
    /// Photo `k` with an asset of version `v` (``TestPhoto/bytes(version:)``): the asset's file is written
    /// first, then the record; a kill between them leaves a file no record names, deleted at the next open.
    case photo(Int, Int)
    case sendRound

    static func random(using random: inout SeededRandomNumberGenerator) -> CrashOperation {
        func id(_ prefix: String) -> String { "\(prefix)\(Int.random(in: 0..<24, using: &random))" }
        switch Int.random(in: 0..<100, using: &random) {
        case 0..<25: return .add([id("r")])
        case 25..<30: return .add((0..<Int.random(in: 2...6, using: &random)).map { _ in id("r") })
        case 30..<45: return .remove(id("r"))
        case 45..<62: return .visit(id("h"), version: Int64.random(in: 0..<5, using: &random))
        case 62..<64: return .dish(Int.random(in: 0..<4, using: &random), Int.random(in: 1...5, using: &random))
        case 64..<65: return .dropDish(Int.random(in: 0..<4, using: &random))
        case 65..<75: return .liking(id("h"), ReadingHistoryItem.Liking.allCases.randomElement(using: &random)!)
        case 75..<82: return .markRead(id("h"))
        case 82..<88: return .forget(id("h"))
        case 88..<90: return .clearHistory
        case 90..<96:
            return .note(id("r"), Int.random(in: 0..<3, using: &random), Int.random(in: 0..<100, using: &random))
        case 96..<97: return .unnote(id("r"), Int.random(in: 0..<3, using: &random))
        case 97..<98: return .recipe(Int.random(in: 0..<8, using: &random), Int64.random(in: 1...9, using: &random))
        case 98..<99: return .photo(Int.random(in: 0..<4, using: &random), Int.random(in: 0..<300, using: &random))
        default: return .sendRound
        }
    }

    var line: String {
        switch self {
        case .add(let ids): return "add \(ids.joined(separator: ","))"
        case .remove(let id): return "remove \(id)"
        case .visit(let id, let version): return "visit \(id) \(version)"
        case .liking(let id, let liking): return "liking \(id) \(liking.rawValue)"
        case .markRead(let id): return "read \(id)"
        case .forget(let id): return "forget \(id)"
        case .clearHistory: return "clear"
        case .note(let id, let k, let version): return "note \(id) \(k) \(version)"
        case .unnote(let id, let k): return "unnote \(id) \(k)"
        case .recipe(let k, let servings): return "recipe \(k) \(servings)"
        case .dish(let k, let steps): return "dish \(k) \(steps)"
        case .dropDish(let k): return "dropdish \(k)"
        case .photo(let k, let version): return "photo \(k) \(version)"
        case .sendRound: return "send"
        }
    }

    func perform(on store: LocalStore) async throws {
        switch self {
        case .add(let ids): try await store.readingList.apply(ids.map { .add(articleID: $0) })
        case .remove(let id): try await store.readingList.remove(id)
        case .visit(let id, let version): try await store.history.visit(id, version: version)
        case .liking(let id, let liking): try await store.history.setLiking(id, liking)
        case .markRead(let id): try await store.history.markRead(id)
        case .forget(let id): try await store.history.remove(id)
        case .clearHistory: try await store.history.clear()
        case .note(let id, let k, let version):
            guard await store.readingList.contains(id) else { return }
            try await store.records(TestNote.self).save(
                TestNote(id: "n-\(id)-\(k)", articleID: id, text: "v\(version)"))
        case .unnote(let id, let k): try await store.records(TestNote.self).delete("n-\(id)-\(k)")
        case .recipe(let k, let servings):
            try await store.records(TestRecipe.self).save(
                TestRecipe(id: "recipe-\(k)", title: "R\(k)", servings: servings))
        case .dish(let k, let steps):
            var batch = RecordBatch()
            try batch.save(TestRecipe(id: "dish-\(k)", title: "D\(k)", servings: Int64(steps)))
            try batch.save(
                (0..<steps).map { TestStep(id: "dish-\(k)-step-\($0)", recipeID: "dish-\(k)", text: "s\($0)") })
            try await store.apply(batch)
        case .dropDish(let k):
            try await store.records(TestRecipe.self).delete("dish-\(k)")
        case .photo(let k, let version):
            let image = try await store.makeAsset(TestPhoto.bytes(version: version))
            try await store.records(TestPhoto.self).save(
                TestPhoto(id: "photo-\(k)", caption: "v\(version)", image: image))
        case .sendRound:
            // What a push does to the queue: seal each zone, acknowledge what the server took, park what it
            // refused (records whose names end in 7: kept pending, their refusal written durably), unseal.
            for zone in store.zoneIDs {
                for command in try await store.sealPendingCommands(in: zone) {
                    let ids = Array(command.changes.keys)
                    let refused = ids.filter { $0.name.hasSuffix("7") }
                    try await store.park(
                        refused.map {
                            RefusedChange(
                                recordID: $0, isDelete: command.kind == .removeRecords, code: .invalidArguments,
                                serverErrorCode: "BAD_REQUEST", reason: "refused by the crash child",
                                refusedAt: Date(timeIntervalSince1970: 0))
                        })
                    try await store.acknowledge(ids.filter { !$0.name.hasSuffix("7") }, in: command.id)
                }
                try await store.unsealPendingCommands(in: zone)
            }
        }
    }
}

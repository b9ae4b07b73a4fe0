import FlatSyncTesting
import Foundation
import Synchronization

@testable import FlatSync

/// What the durability harnesses check a reopened store against: the mutations a workload issued, when
/// each was issued and when (if ever) it was acknowledged, counted in file-system calls.
///
/// At a crash after call `k`, a mutation acknowledged by then must be there; one not yet issued must not;
/// one in between (issued, not acknowledged: in flight at the crash, or failed) may or may not be — but
/// all of it or nothing (each mutation touches one article). Each article gets a handful of mutations, so
/// the harness can try every subset of the undecided ones.
final class DurabilityModel: Sendable {
    enum Mutation: Sendable, Equatable, CustomStringConvertible {
        case add(String)
        case remove(String)
        case visit(String)
        /// A host record (``TestRecipe`` `recipe-<id>`, in a zone of its own) saved, or deleted.
        case saveRecipe(String)
        case deleteRecipe(String)

        var articleID: String {
            switch self {
            case .add(let id), .remove(let id), .visit(let id), .saveRecipe(let id), .deleteRecipe(let id): return id
            }
        }

        var description: String {
            switch self {
            case .add(let id): return "add \(id)"
            case .remove(let id): return "remove \(id)"
            case .visit(let id): return "visit \(id)"
            case .saveRecipe(let id): return "save recipe \(id)"
            case .deleteRecipe(let id): return "delete recipe \(id)"
            }
        }

        /// The membership a mutation of the reading list or of the recipes leaves; nil for a visit.
        var membership: (recipes: Bool, member: Bool)? {
            switch self {
            case .add: return (false, true)
            case .remove: return (false, false)
            case .saveRecipe: return (true, true)
            case .deleteRecipe: return (true, false)
            case .visit: return nil
            }
        }

        /// The record of a recipe `id`'s host record.
        static func recipeID(_ id: String) -> RecordID { TestRecipe.recordID("recipe-" + id) }
    }

    struct Entry: Sendable {
        var mutation: Mutation
        /// Calls made before the mutation started: a crash at or before this point never saw it.
        var issuedAt: Int
        /// Calls made when it returned successfully; nil while in flight, or when it failed.
        var acknowledgedAt: Int?
        /// The error it failed with.
        var error: String?
        /// Calls made when a send round that covered it (the server acknowledged it) ended.
        var sentAt: Int?
    }

    enum Outcome {
        case acknowledged, undecided, notIssued
    }

    private let entries = Mutex<[Entry]>([])
    /// How the harness counts calls (the disk's or the faulty wrapper's counter).
    private let calls: @Sendable () -> Int

    init(calls: @escaping @Sendable () -> Int) {
        self.calls = calls
    }

    var all: [Entry] { entries.withLock { $0 } }

    /// The calls counted so far.
    var callCount: Int { calls() }

    /// Performs `mutation` with `body`, noting when it was issued and whether it was acknowledged. Returns
    /// the error it failed with.
    @discardableResult
    func perform(_ mutation: Mutation, _ body: () async throws -> Void) async -> (any Error)? {
        let index = entries.withLock {
            $0.append(Entry(mutation: mutation, issuedAt: calls()))
            return $0.count - 1
        }
        do {
            try await body()
            let now = calls()
            entries.withLock { $0[index].acknowledgedAt = now }
            return nil
        } catch {
            entries.withLock { $0[index].error = "\(error)" }
            return error
        }
    }

    /// Marks every mutation acknowledged before `start` as sent by a round whose acknowledgements a crash may
    /// find from `end` calls on.
    func markSent(acknowledgedBefore start: Int, at end: Int) {
        entries.withLock {
            for index in $0.indices where $0[index].sentAt == nil {
                if let acknowledged = $0[index].acknowledgedAt, acknowledged <= start { $0[index].sentAt = end }
            }
        }
    }

    func outcome(_ entry: Entry, crashAfter point: Int, acknowledgementsAreDurable: Bool = true) -> Outcome {
        if acknowledgementsAreDurable, let acknowledged = entry.acknowledgedAt, acknowledged <= point {
            return .acknowledged
        }
        if entry.issuedAt >= point { return .notIssued }
        return .undecided
    }

    /// The acknowledged mutations at a crash after `point` calls.
    func acknowledgedCount(crashAfter point: Int = .max) -> Int {
        all.filter { outcome($0, crashAfter: point) == .acknowledged }.count
    }

    /// What a store must show after a crash after `point` calls, compared with what it shows: the problems,
    /// one line each (empty when it is right).
    ///
    /// With `pending`, an unacknowledged change that shows must also be pending, or it would never be sent —
    /// unless it was sent already: `server` holds what the server has (the reading list and the read counts).
    ///
    /// Without `acknowledgementsAreDurable` (a `buffered` store after a power loss) an acknowledged mutation
    /// counts as undecided.
    func problems(
        readingList: Set<String>, readCounts: [String: Int64], recipes: Set<String> = [], pending: Set<RecordID>?,
        server: (readingList: Set<String>, readCounts: [String: Int64])? = nil, serverRecipes: Set<String>? = nil,
        crashAfter point: Int = .max, acknowledgementsAreDurable: Bool = true
    ) -> [String] {
        var problems: [String] = []
        var byArticle: [String: [(Mutation, Outcome)]] = [:]
        var sent: Set<String> = []
        for entry in all {
            let outcome = outcome(entry, crashAfter: point, acknowledgementsAreDurable: acknowledgementsAreDurable)
            byArticle[entry.mutation.articleID, default: []].append((entry.mutation, outcome))
            if let sentAt = entry.sentAt, sentAt <= point { sent.insert(entry.mutation.articleID) }
        }
        // What a send round took off the queue may show without being pending: it was sent.
        let pending = pending.map {
            $0.union(
                sent.flatMap {
                    [
                        RecordID(zone: .readingList, name: "rl-" + $0),
                        RecordID(zone: .readingHistory, name: "rh-" + $0),
                        Mutation.recipeID($0),
                    ]
                })
        }
        for article in Set(byArticle.keys).union(readingList).union(readCounts.keys).union(recipes).sorted() {
            let history = byArticle[article] ?? []
            let visits = history.filter { if case .visit = $0.0 { return true } else { return false } }

            // The reading list and the recipes: every subset of the undecided saves and deletes, in order.
            for inRecipes in [false, true] {
                let ops = history.filter { $0.0.membership?.recipes == inRecipes }
                let undecided = ops.indices.filter { ops[$0].1 == .undecided }
                var possible: Set<Bool> = []
                var acknowledgedOnly = false
                for subset in 0..<(1 << min(undecided.count, 12)) {
                    var member = false
                    for (index, (mutation, outcome)) in ops.enumerated() {
                        let applies: Bool
                        switch outcome {
                        case .acknowledged: applies = true
                        case .notIssued: applies = false
                        case .undecided: applies = subset & (1 << undecided.firstIndex(of: index)!) != 0
                        }
                        if applies { member = mutation.membership!.member }
                    }
                    if subset == 0 { acknowledgedOnly = member }
                    possible.insert(member)
                }
                let what = inRecipes ? "the recipes" : "the reading list"
                let member = inRecipes ? recipes.contains(article) : readingList.contains(article)
                let id = inRecipes ? Mutation.recipeID(article) : RecordID(zone: .readingList, name: "rl-" + article)
                let onServer =
                    inRecipes
                    ? serverRecipes.map { $0.contains(article) } : server.map { $0.readingList.contains(article) }
                if !possible.contains(member) {
                    problems.append(
                        "\(article): \(member ? "in" : "missing from") \(what) after \(history.map { "\($0.0) (\($0.1))" })"
                    )
                } else if member != acknowledgedOnly, let pending, !pending.contains(id),
                    onServer.map({ $0 != member }) ?? true
                {
                    problems.append("\(article): an unacknowledged change of \(what) shows, but nothing will send it")
                }
            }

            // The history: one read per visit that happened.
            let acknowledgedVisits = visits.filter { $0.1 == .acknowledged }.count
            let undecidedVisits = visits.filter { $0.1 == .undecided }.count
            let count = Int(readCounts[article] ?? 0)
            if count < acknowledgedVisits || count > acknowledgedVisits + undecidedVisits {
                problems.append(
                    "\(article): read \(count) times, expected \(acknowledgedVisits)…\(acknowledgedVisits + undecidedVisits)"
                )
            } else if count != acknowledgedVisits, let pending,
                !pending.contains(RecordID(zone: .readingHistory, name: "rh-" + article)),
                server.map({ Int($0.readCounts[article] ?? 0) != count }) ?? true
            {
                problems.append("\(article): an unacknowledged visit shows, but nothing will send it")
            }
        }
        return problems
    }

    /// ``problems(readingList:readCounts:pending:crashAfter:)`` for what `store` shows.
    func problems(
        in store: LocalStore, crashAfter point: Int = .max, checkingPending: Bool, cloud: DirectoryCloud? = nil,
        acknowledgementsAreDurable: Bool = true
    ) async -> [String] {
        let readingList = Set(await store.readingList.entries().map(\.articleID))
        let recipes = Set(
            await store.records(TestRecipe.self).values().map { String($0.id.dropFirst("recipe-".count)) })
        var readCounts: [String: Int64] = [:]
        for item in await store.history.items() { readCounts[item.articleID] = item.readCount }
        let pending = checkingPending ? Set(await store.pendingCommands().flatMap { $0.changes.keys }) : nil
        var server: (readingList: Set<String>, readCounts: [String: Int64])?
        var serverRecipes: Set<String>?
        if let cloud {
            serverRecipes = Set(
                ((try? await cloud.records(in: TestRecipe.zone)) ?? []).map {
                    String($0.id.name.dropFirst("recipe-".count))
                })
            var served: (readingList: Set<String>, readCounts: [String: Int64]) = ([], [:])
            for record in (try? await cloud.records(in: .readingList)) ?? [] {
                if let entry = try? ReadingListEntry(record: record) { served.readingList.insert(entry.articleID) }
            }
            for record in (try? await cloud.records(in: .readingHistory)) ?? [] {
                if let item = try? ReadingHistoryItem(record: record) {
                    served.readCounts[item.articleID] = item.readCount
                }
            }
            server = served
        }
        return problems(
            readingList: readingList, readCounts: readCounts, recipes: recipes, pending: pending, server: server,
            serverRecipes: serverRecipes, crashAfter: point, acknowledgementsAreDurable: acknowledgementsAreDurable)
    }
}

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
        /// A host record with an asset (`TestPhoto` `photo-<id>`, its bytes ``photoBytes(_:)``) saved with
        /// an asset made just before (`makeAsset(_:)`), or deleted.
        case savePhoto(String)
        case deletePhoto(String)

        var articleID: String {
            switch self {
            case .add(let id), .remove(let id), .visit(let id), .saveRecipe(let id), .deleteRecipe(let id),
                .savePhoto(let id), .deletePhoto(let id):
                return id
            }
        }

        var description: String {
            switch self {
            case .add(let id): return "add \(id)"
            case .remove(let id): return "remove \(id)"
            case .visit(let id): return "visit \(id)"
            case .saveRecipe(let id): return "save recipe \(id)"
            case .deleteRecipe(let id): return "delete recipe \(id)"
            case .savePhoto(let id): return "save photo \(id)"
            case .deletePhoto(let id): return "delete photo \(id)"
            }
        }

        /// The membership a mutation of the reading list, the recipes or the photos leaves; nil for a visit.
        var membership: (collection: Collection, member: Bool)? {
            switch self {
            case .add: return (.readingList, true)
            case .remove: return (.readingList, false)
            case .saveRecipe: return (.recipes, true)
            case .deleteRecipe: return (.recipes, false)
            case .savePhoto: return (.photos, true)
            case .deletePhoto: return (.photos, false)
            case .visit: return nil
            }
        }

        /// The record of a recipe `id`'s host record.
        static func recipeID(_ id: String) -> RecordID { TestRecipe.recordID("recipe-" + id) }
        /// The record of a photo `id`'s host record.
        static func photoID(_ id: String) -> RecordID { TestPhoto.recordID("photo-" + id) }
        /// The bytes of photo `id`'s asset: of a version its article number names, so that they differ
        /// from photo to photo and a torn file shows.
        static func photoBytes(_ id: String) -> Data { TestPhoto.bytes(version: Int(id.dropFirst()) ?? 0) }
    }

    /// What a membership mutation changes.
    enum Collection: CaseIterable {
        case readingList, recipes, photos

        var name: String {
            switch self {
            case .readingList: return "the reading list"
            case .recipes: return "the recipes"
            case .photos: return "the photos"
            }
        }

        func recordID(_ article: String) -> RecordID {
            switch self {
            case .readingList: return RecordID(zone: .readingList, name: "rl-" + article)
            case .recipes: return Mutation.recipeID(article)
            case .photos: return Mutation.photoID(article)
            }
        }
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
    /// `members` holds the articles of the reading list, the recipes and the photos it shows. With `pending`,
    /// an unacknowledged change that shows must also be pending, or it would never be sent — unless it was
    /// sent already: `server` holds what the server has (its members and the read counts).
    ///
    /// Without `acknowledgementsAreDurable` (a `buffered` store after a power loss) an acknowledged mutation
    /// counts as undecided.
    func problems(
        members: [Collection: Set<String>], readCounts: [String: Int64], pending: Set<RecordID>?,
        server: (members: [Collection: Set<String>], readCounts: [String: Int64])? = nil,
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
                sent.flatMap { article in
                    Collection.allCases.map { $0.recordID(article) }
                        + [RecordID(zone: .readingHistory, name: "rh-" + article)]
                })
        }
        let shown = Set(byArticle.keys).union(readCounts.keys).union(members.values.joined())
        for article in shown.sorted() {
            let history = byArticle[article] ?? []
            let visits = history.filter { if case .visit = $0.0 { return true } else { return false } }

            // The reading list, the recipes and the photos: every subset of the undecided saves and deletes,
            // in order.
            for collection in Collection.allCases {
                let ops = history.filter { $0.0.membership?.collection == collection }
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
                let what = collection.name
                let member = members[collection]?.contains(article) ?? false
                let id = collection.recordID(article)
                let onServer = server.map { $0.members[collection]?.contains(article) ?? false }
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

    /// ``problems(members:readCounts:pending:server:crashAfter:acknowledgementsAreDurable:)`` for what
    /// `store` shows (and `cloud` holds), and a problem for each photo it shows whose asset does not hold
    /// its bytes whole: a photo acknowledged, or in flight and shown, must never lose its file.
    func problems(
        in store: LocalStore, crashAfter point: Int = .max, checkingPending: Bool, cloud: DirectoryCloud? = nil,
        acknowledgementsAreDurable: Bool = true
    ) async -> [String] {
        var problems: [String] = []
        var members: [Collection: Set<String>] = [:]
        members[.readingList] = Set(await store.readingList.entries().map(\.articleID))
        members[.recipes] = Set(
            await store.records(TestRecipe.self).values().map { String($0.id.dropFirst("recipe-".count)) })
        members[.photos] = []
        for photo in await store.records(TestPhoto.self).values() {
            let article = String(photo.id.dropFirst("photo-".count))
            members[.photos]!.insert(article)
            let bytes = photo.image.flatMap { try? store.localData(of: $0) }
            if bytes != Mutation.photoBytes(article) {
                problems.append(
                    "\(article): the photo shows, but its asset holds \(bytes?.count ?? 0) bytes, not its own")
            }
        }
        var readCounts: [String: Int64] = [:]
        for item in await store.history.items() { readCounts[item.articleID] = item.readCount }
        let pending = checkingPending ? Set(await store.pendingCommands().flatMap { $0.changes.keys }) : nil
        var server: (members: [Collection: Set<String>], readCounts: [String: Int64])?
        if let cloud {
            var served: (members: [Collection: Set<String>], readCounts: [String: Int64]) = ([:], [:])
            served.members[.recipes] = Set(
                ((try? await cloud.records(in: TestRecipe.zone)) ?? []).map {
                    String($0.id.name.dropFirst("recipe-".count))
                })
            served.members[.photos] = []
            for record in (try? await cloud.records(in: TestPhoto.zone)) ?? [] {
                let article = String(record.id.name.dropFirst("photo-".count))
                served.members[.photos]!.insert(article)
                var bytes: Data?
                if let asset = record["image"]?.assetValue { bytes = try? await cloud.downloadAsset(asset) }
                if bytes != Mutation.photoBytes(article) {
                    problems.append("\(article): the server's photo does not hold its bytes")
                }
            }
            served.members[.readingList] = []
            for record in (try? await cloud.records(in: .readingList)) ?? [] {
                if let entry = try? ReadingListEntry(record: record) {
                    served.members[.readingList]!.insert(entry.articleID)
                }
            }
            for record in (try? await cloud.records(in: .readingHistory)) ?? [] {
                if let item = try? ReadingHistoryItem(record: record) {
                    served.readCounts[item.articleID] = item.readCount
                }
            }
            server = served
        }
        return problems
            + self.problems(
                members: members, readCounts: readCounts, pending: pending, server: server, crashAfter: point,
                acknowledgementsAreDurable: acknowledgementsAreDurable)
    }
}

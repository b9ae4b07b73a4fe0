import Foundation

/// `SampleData/tour.json`: the tour's start time, its devices, and the steps it runs in order.
///
/// The format is documented in `SampleData/README.md`. Each step is an object with `do` (what to do)
/// and the keys that action needs; ``actions(articles:)`` checks every step before the tour starts, so
/// a bad script stops with the step's number instead of halfway through.
struct TourScript: Decodable, Sendable {
    /// The tour clock's first reading; it moves on a minute per step.
    var start: Date
    var devices: [String]
    var steps: [Step]

    /// One step as written in the file.
    struct Step: Decodable, Sendable {
        var action: String
        var text: String?
        var device: String?
        var articles: [String]?
        var times: Int?
        var count: Int?
        var seconds: Int?

        enum CodingKeys: String, CodingKey {
            case action = "do"
            case text, device, articles, times, count, seconds
        }
    }

    /// The steps, checked: every device is one of ``devices``, every article is in `articles`, every
    /// action has what it needs.
    ///
    /// - Throws: ``DemoFailure`` naming the first bad step.
    func actions(articles: Set<String>) throws -> [TourAction] {
        guard devices.count >= 2, Set(devices).count == devices.count else {
            throw DemoFailure("tour.json: \"devices\" must name at least two different devices")
        }
        var actions: [TourAction] = []
        for (index, step) in steps.enumerated() {
            do {
                actions.append(try action(for: step, articles: articles))
            } catch {
                throw DemoFailure("tour.json step \(index + 1) (\"do\": \"\(step.action)\"): \(error.message)")
            }
        }
        return actions
    }

    private func action(for step: Step, articles known: Set<String>) throws(DemoFailure) -> TourAction {
        func device() throws(DemoFailure) -> String {
            guard let name = step.device else { throw DemoFailure("needs \"device\"") }
            guard devices.contains(name) else {
                throw DemoFailure("unknown device \"\(name)\"; the devices are \(devices)")
            }
            return name
        }
        func articles() throws(DemoFailure) -> [String] {
            guard let ids = step.articles, !ids.isEmpty else {
                throw DemoFailure("needs a non-empty \"articles\" list")
            }
            if let unknown = ids.first(where: { !known.contains($0) }) {
                throw DemoFailure("article \"\(unknown)\" is not in articles.json")
            }
            return ids
        }
        func positive(_ value: Int?, _ key: String, default fallback: Int? = nil) throws(DemoFailure) -> Int {
            guard let value = value ?? fallback else { throw DemoFailure("needs \"\(key)\"") }
            guard value >= 1 else { throw DemoFailure("\"\(key)\" must be at least 1") }
            return value
        }

        switch step.action {
        case "say":
            guard let text = step.text else { throw DemoFailure("needs \"text\"") }
            return .say(text)
        case "visit":
            return .mutate(
                .visit, device: try device(), articles: try articles(),
                times: try positive(step.times, "times", default: 1))
        case let name:
            if let mutation = TourAction.Mutation(rawValue: name) {
                return .mutate(mutation, device: try device(), articles: try articles(), times: 1)
            }
            switch name {
            case "offline": return .network(device: try device(), online: false)
            case "online": return .network(device: try device(), online: true)
            case "sync": return .sync(device: try device())
            case "list": return .showList(device: try device())
            case "history": return .showHistory(device: try device())
            case "expire-tokens": return .expireTokens
            case "refuse-uploads": return .refuseUploads(count: try positive(step.count, "count"))
            case "wait": return .wait(seconds: try positive(step.seconds, "seconds"))
            case "explain": return .explain(articles: try articles())
            case "compare": return .compare
            case "note":
                guard let text = step.text, !text.isEmpty else { throw DemoFailure("needs \"text\"") }
                return .note(device: try device(), articles: try articles(), text: text)
            case "notes": return .showNotes(device: try device())
            default: throw DemoFailure("unknown action; see SampleData/README.md for the actions")
            }
        }
    }
}

/// A checked step of the tour.
enum TourAction: Equatable, Sendable {
    /// What a device does to its own data.
    enum Mutation: String, Sendable {
        case save, unsave, resave, visit, like, dislike
    }

    case say(String)
    case mutate(Mutation, device: String, articles: [String], times: Int)
    case network(device: String, online: Bool)
    case sync(device: String)
    case showList(device: String)
    case showHistory(device: String)
    case expireTokens
    case refuseUploads(count: Int)
    case wait(seconds: Int)
    case explain(articles: [String])
    case note(device: String, articles: [String], text: String)
    case showNotes(device: String)
    case compare
}

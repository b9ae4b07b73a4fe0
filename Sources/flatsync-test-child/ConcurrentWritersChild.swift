import FlatSync
import Foundation

/// `writers-child DIR WRITERS DURABILITY`: opens a store in DIR and runs WRITERS tasks that each add new
/// reading-list articles (`w<run>-<writer>-<n>`) as fast as their adds return, printing `ack <article>` once an
/// add returned, until the parent kills it.
///
/// With several writers on one `.fsync` store their entries share flushes (group commit, see `AppendLog`),
/// so kills land while writers queue behind a flush and while the one that leads the next flushes it.
func runConcurrentWritersChild(_ arguments: [String]) async -> Int32 {
    guard arguments.count == 3, let writers = Int(arguments[1]), writers > 0,
        let durability = Durability(rawValue: arguments[2])
    else {
        FileHandle.standardError.write(Data("usage: writers-child DIR WRITERS fsync|buffered\n".utf8))
        return 2
    }
    let store: LocalStore
    do {
        store = try LocalStore(
            directory: URL(fileURLWithPath: arguments[0]),
            options: LocalStore.Options(durability: durability, deviceID: "writers-child"))
    } catch {
        FileHandle.standardError.write(Data("writers-child: \(error)\n".utf8))
        return 1
    }
    // Each run of the child names its articles apart from the last run's: the parent reopens the same
    // directory between kills.
    let run = UInt32.random(in: .min ... .max)
    print("ready")
    let list = store.readingList
    do {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<writers {
                group.addTask {
                    var count = 0
                    while true {
                        let article = "w\(run)-\(writer)-\(count)"
                        try await list.add(article)
                        print("ack \(article)")
                        count += 1
                    }
                }
            }
            try await group.waitForAll()
        }
    } catch {
        FileHandle.standardError.write(Data("writers-child: \(error)\n".utf8))
        return 1
    }
    return 0
}

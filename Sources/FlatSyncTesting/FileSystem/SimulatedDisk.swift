import FlatSync
import Foundation
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A file system in memory that knows what a power loss could leave of it: the power-loss double of
/// FlatSync's ``FileSystem`` seam.
///
/// The running program sees an ordinary file system. Underneath, every file keeps the bytes its last
/// successful flush made durable and the writes and truncations since, and every directory keeps the
/// entries its last flush made durable and the creations, links, renames and removals since. A flush
/// of a file does not make its name durable; only a flush of the directory does (the POSIX rule).
///
/// ``crashImage(of:damage:)`` turns that into a disk state after a power loss, under a pessimistic
/// model: each write since a file's last flush is lost, kept, or kept in part — any subset of its
/// 512-byte sectors, so that the sectors of one write can land out of order — with lost bytes past
/// the old end of the file read back as zeros or garbage when the size did reach the disk; each
/// truncation may or may not persist; and each directory change since the directory's last flush may
/// or may not persist (a rename stays atomic). Writes whose flush failed never become durable, not even
/// through a later flush that succeeds: after a failed `fsync` Linux marks the pages clean. (A directory
/// whose flush failed keeps its changes pending: a journalled file system commits them with the next
/// flush that succeeds, or stops altogether.)
///
/// With ``recordsCrashPoints`` the disk keeps its state after every call that changed it, so a test runs
/// a workload once and then checks a crash at every point of it.
package final class SimulatedDisk: FileSystemCalls {
    /// The bytes of a sector, the unit a disk writes atomically (or not at all).
    package static let sectorSize = 512

    /// The disk as the running program sees it and as a power loss could leave it. A value: copies are
    /// cheap (file contents are shared until one of them changes).
    package struct Model: Sendable {
        fileprivate var nodes: [Int: Node] = [0: Node(isDirectory: true)]
        fileprivate var nextNode = 1
        /// How many calls had been made when this state was recorded.
        package fileprivate(set) var calls = 0
        /// The call that made this state, as text ("rename /d/.tmp-x /d/x").
        package fileprivate(set) var lastCall = "(nothing yet)"

        fileprivate static let root = 0
    }

    fileprivate struct Node: Sendable {
        var isDirectory: Bool
        // A file: what the program sees, what is durable, and the changes in between.
        var data: [UInt8] = []
        var durableData: [UInt8] = []
        var pending: [FileChange] = []
        // A directory, likewise.
        var entries: [String: Int] = [:]
        var durableEntries: [String: Int] = [:]
        var pendingEntries: [EntryChange] = []
    }

    fileprivate struct FileChange: Sendable {
        enum Kind: Sendable {
            case write(offset: Int, bytes: [UInt8])
            case truncate(length: Int)
        }
        var kind: Kind
        /// Its flush failed: it never reaches the disk.
        var lost = false
    }

    fileprivate struct EntryChange: Sendable {
        enum Kind: Sendable {
            case set(name: String, node: Int)
            case remove(name: String)
            case rename(from: String, to: String, node: Int)
        }
        var kind: Kind
        var lost = false
    }

    /// An open file description.
    fileprivate struct OpenFile {
        var node: Int
        var offset = 0
        var append: Bool
        var writable: Bool
    }

    fileprivate struct State {
        var model = Model()
        var descriptors: [Int32: OpenFile] = [:]
        var nextDescriptor: Int32 = 3
        var locks: [Int: Int32] = [:]
        var recording = false
        var crashPoints: [Model] = []
    }

    private let state: Mutex<State>

    /// An empty disk: only the root directory, which is durable.
    package init() {
        state = Mutex(State())
    }

    /// A disk holding `model`, all of it durable (a disk after a power loss).
    package init(model: Model) {
        state = Mutex(State(model: model))
    }

    // MARK: - Inspection

    /// Keep the disk's state after every call that changes it (see ``crashPoints``).
    package var recordsCrashPoints: Bool {
        get { state.withLock { $0.recording } }
        set {
            state.withLock {
                $0.recording = newValue
                if newValue && $0.crashPoints.isEmpty { $0.crashPoints = [$0.model] }
            }
        }
    }

    /// The states recorded: the one when recording started, then one after each call that changed the disk.
    package var crashPoints: [Model] { state.withLock { $0.crashPoints } }

    /// The disk's current state.
    package var model: Model { state.withLock { $0.model } }

    /// The calls made so far.
    package var callCount: Int { state.withLock { $0.model.calls } }

    /// The bytes of the file at `path` as the program sees them, or nil.
    package func contents(of path: String) -> [UInt8]? {
        state.withLock { s in
            guard let node = s.model.resolve(path), let file = s.model.nodes[node], !file.isDirectory else {
                return nil
            }
            return file.data
        }
    }

    /// Replaces the bytes of the file at `path` (creating it), durably and without counting a call: for a
    /// test that damages a file between two runs.
    package func setContents(of path: String, to bytes: [UInt8]) {
        state.withLock { s in
            guard let (parent, name) = s.model.parentAndName(path) else { return }
            let node = s.model.nodes[parent]?.entries[name] ?? s.model.makeNode(isDirectory: false)
            s.model.nodes[node]!.data = bytes
            s.model.nodes[node]!.durableData = bytes
            s.model.nodes[node]!.pending = []
            s.model.nodes[parent]!.entries[name] = node
            s.model.nodes[parent]!.durableEntries[name] = node
        }
    }

    /// The names in the directory at `path`, sorted; empty when there is none.
    package func names(in path: String) -> [String] {
        state.withLock { s in
            guard let node = s.model.resolve(path), let directory = s.model.nodes[node], directory.isDirectory else {
                return []
            }
            return directory.entries.keys.sorted()
        }
    }

    /// Makes the data written since the last flush of `descriptor`'s file never durable: its flush failed.
    package func loseUnflushedData(of descriptor: Int32) {
        state.withLock { s in
            guard let open = s.descriptors[descriptor], !s.model.nodes[open.node]!.isDirectory else { return }
            for index in s.model.nodes[open.node]!.pending.indices {
                s.model.nodes[open.node]!.pending[index].lost = true
            }
        }
    }

    // MARK: - Power loss

    /// How a crash image treats what was not flushed.
    package enum Damage: Sendable, Equatable, CustomStringConvertible {
        /// Nothing unflushed survives.
        case flushedOnly
        /// Everything unflushed survives (except what a failed flush lost): a crash that lost nothing.
        case everything
        /// Each unflushed change survives, in part or not at all, as the seeded generator decides.
        case random(seed: UInt64)

        package var description: String {
            switch self {
            case .flushedOnly: return "only what was flushed"
            case .everything: return "everything written"
            case .random(let seed): return "random damage, seed \(seed)"
            }
        }
    }

    /// A disk as a power loss at `model` could leave it.
    package static func crashImage(of model: Model, damage: Damage) -> SimulatedDisk {
        SimulatedDisk(model: model.afterPowerLoss(damage))
    }

    // MARK: - FileSystemCalls

    package func open(_ path: String, flags: Int32, permissions: mode_t) -> Result<Int32, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let (parent, name) = s.model.parentAndName(path) else { return .failure(.noSuchFile) }
            var node = s.model.nodes[parent]!.entries[name]
            if node != nil && flags & O_CREAT != 0 && flags & O_EXCL != 0 { return .failure(.fileExists) }
            if node == nil {
                guard flags & O_CREAT != 0 else { return .failure(.noSuchFile) }
                let created = s.model.makeNode(isDirectory: false)
                s.model.nodes[parent]!.entries[name] = created
                s.model.nodes[parent]!.pendingEntries.append(EntryChange(kind: .set(name: name, node: created)))
                node = created
                s.record("open O_CREAT \(path)")
            }
            let isDirectory = s.model.nodes[node!]!.isDirectory
            if flags & O_DIRECTORY != 0 && !isDirectory { return .failure(Errno(ENOTDIR)) }
            let access = flags & O_ACCMODE
            let writable = access == O_WRONLY || access == O_RDWR
            if isDirectory && writable { return .failure(Errno(EISDIR)) }
            if flags & O_TRUNC != 0 && writable && !s.model.nodes[node!]!.data.isEmpty {
                s.model.nodes[node!]!.data = []
                s.model.nodes[node!]!.pending.append(FileChange(kind: .truncate(length: 0)))
                s.record("open O_TRUNC \(path)")
            }
            let descriptor = s.nextDescriptor
            s.nextDescriptor += 1
            s.descriptors[descriptor] = OpenFile(node: node!, append: flags & O_APPEND != 0, writable: writable)
            return .success(descriptor)
        }
    }

    package func close(_ descriptor: Int32) {
        state.withLock { s in
            guard let open = s.descriptors.removeValue(forKey: descriptor) else { return }
            if s.locks[open.node] == descriptor { s.locks[open.node] = nil }
        }
    }

    package func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Result<Int, Errno> {
        write(descriptor, bytes, at: nil)
    }

    package func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> Result<Int, Errno> {
        write(descriptor, bytes, at: Optional(offset))
    }

    /// `write(2)` at the descriptor's offset when `position` is nil, else `pwrite(2)` (which, as on Linux,
    /// appends whatever the offset when the descriptor has `O_APPEND`).
    private func write(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, at position: Int?) -> Result<Int, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard var open = s.descriptors[descriptor], open.writable else { return .failure(Errno(EBADF)) }
            if let position, position < 0 { return .failure(Errno(EINVAL)) }
            guard !bytes.isEmpty else { return .success(0) }
            let offset = open.append ? s.model.nodes[open.node]!.data.count : position ?? open.offset
            let written = Array(bytes)
            s.model.nodes[open.node]!.data.write(written, at: offset)
            s.model.nodes[open.node]!.pending.append(FileChange(kind: .write(offset: offset, bytes: written)))
            if position == nil {
                open.offset = offset + written.count
                s.descriptors[descriptor] = open
            }
            s.record("\(position == nil ? "write" : "pwrite") \(written.count) bytes at \(offset)")
            return .success(written.count)
        }
    }

    package func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int)
        -> Result<Int, Errno>
    {
        state.withLock { s in
            s.model.calls += 1
            guard let open = s.descriptors[descriptor] else { return .failure(Errno(EBADF)) }
            let data = s.model.nodes[open.node]!.data
            guard offset < data.count else { return .success(0) }
            let count = min(buffer.count, data.count - offset)
            data.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + offset, byteCount: count)
            }
            return .success(count)
        }
    }

    package func size(_ descriptor: Int32) -> Result<Int, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let open = s.descriptors[descriptor] else { return .failure(Errno(EBADF)) }
            return .success(s.model.nodes[open.node]!.data.count)
        }
    }

    package func sync(_ descriptor: Int32) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let open = s.descriptors[descriptor] else { return .failure(Errno(EBADF)) }
            if s.model.nodes[open.node]!.isDirectory {
                s.model.flushEntries(open.node)
            } else {
                s.model.flushData(open.node)
            }
            s.record("fsync fd \(descriptor)")
            return .success(())
        }
    }

    package func truncate(_ descriptor: Int32, to length: Int) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let open = s.descriptors[descriptor], open.writable, length >= 0 else {
                return .failure(Errno(EINVAL))
            }
            s.model.nodes[open.node]!.data.resize(to: length)
            s.model.nodes[open.node]!.pending.append(FileChange(kind: .truncate(length: length)))
            s.record("ftruncate to \(length)")
            return .success(())
        }
    }

    package func lock(_ descriptor: Int32, blocking: Bool) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let open = s.descriptors[descriptor] else { return .failure(Errno(EBADF)) }
            if let holder = s.locks[open.node], holder != descriptor {
                // One process, one thread of simulated time: a blocking wait would never end.
                return .failure(blocking ? Errno(EDEADLK) : .wouldBlock)
            }
            s.locks[open.node] = descriptor
            return .success(())
        }
    }

    package func unlock(_ descriptor: Int32) {
        state.withLock { s in
            guard let open = s.descriptors[descriptor], s.locks[open.node] == descriptor else { return }
            s.locks[open.node] = nil
        }
    }

    package func rename(_ source: String, to destination: String) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let (from, fromName) = s.model.parentAndName(source),
                let (to, toName) = s.model.parentAndName(destination),
                let node = s.model.nodes[from]!.entries[fromName]
            else { return .failure(.noSuchFile) }
            guard from == to else { return .failure(Errno(EXDEV)) }  // FlatSync renames within a directory.
            if fromName == toName { return .success(()) }
            s.model.nodes[from]!.entries[fromName] = nil
            s.model.nodes[from]!.entries[toName] = node
            s.model.nodes[from]!.pendingEntries.append(
                EntryChange(kind: .rename(from: fromName, to: toName, node: node)))
            s.record("rename \(source) \(destination)")
            return .success(())
        }
    }

    package func link(_ source: String, to destination: String) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let node = s.model.resolve(source), let (parent, name) = s.model.parentAndName(destination) else {
                return .failure(.noSuchFile)
            }
            guard !s.model.nodes[node]!.isDirectory else { return .failure(Errno(EPERM)) }
            guard s.model.nodes[parent]!.entries[name] == nil else { return .failure(.fileExists) }
            s.model.nodes[parent]!.entries[name] = node
            s.model.nodes[parent]!.pendingEntries.append(EntryChange(kind: .set(name: name, node: node)))
            s.record("link \(source) \(destination)")
            return .success(())
        }
    }

    package func unlink(_ path: String) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let (parent, name) = s.model.parentAndName(path), let node = s.model.nodes[parent]!.entries[name]
            else { return .failure(.noSuchFile) }
            guard !s.model.nodes[node]!.isDirectory else { return .failure(Errno(EISDIR)) }
            s.model.nodes[parent]!.entries[name] = nil
            s.model.nodes[parent]!.pendingEntries.append(EntryChange(kind: .remove(name: name)))
            s.record("unlink \(path)")
            return .success(())
        }
    }

    package func makeDirectory(_ path: String, permissions: mode_t) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let (parent, name) = s.model.parentAndName(path) else { return .failure(.noSuchFile) }
            guard s.model.nodes[parent]!.entries[name] == nil else { return .failure(.fileExists) }
            let node = s.model.makeNode(isDirectory: true)
            s.model.nodes[parent]!.entries[name] = node
            s.model.nodes[parent]!.pendingEntries.append(EntryChange(kind: .set(name: name, node: node)))
            s.record("mkdir \(path)")
            return .success(())
        }
    }

    package func syncDirectory(_ path: String) -> Result<Void, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let node = s.model.resolve(path), s.model.nodes[node]!.isDirectory else {
                return .failure(.noSuchFile)
            }
            s.model.flushEntries(node)
            s.record("fsync directory \(path)")
            return .success(())
        }
    }

    package func itemKind(_ path: String) -> Result<ItemKind?, Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let node = s.model.resolve(path) else { return .success(nil) }
            return .success(s.model.nodes[node]!.isDirectory ? .directory : .file)
        }
    }

    /// The node's number, which a rename keeps and a copy (a new node) does not.
    package func inode(_ path: String) -> Result<UInt64?, Errno> {
        state.withLock { s in
            s.model.calls += 1
            return .success(s.model.resolve(path).map { UInt64($0) })
        }
    }

    package func contentsOfDirectory(_ path: String) -> Result<[String], Errno> {
        state.withLock { s in
            s.model.calls += 1
            guard let node = s.model.resolve(path), s.model.nodes[node]!.isDirectory else {
                return .failure(.noSuchFile)
            }
            return .success(s.model.nodes[node]!.entries.keys.sorted())
        }
    }
}

// MARK: - State

extension SimulatedDisk.State {
    /// Notes the call that changed the disk and keeps the state it left, when recording.
    fileprivate mutating func record(_ call: String) {
        model.lastCall = call
        if recording { crashPoints.append(model) }
    }
}

extension SimulatedDisk.Model {
    fileprivate mutating func makeNode(isDirectory: Bool) -> Int {
        let node = nextNode
        nextNode += 1
        nodes[node] = SimulatedDisk.Node(isDirectory: isDirectory)
        return node
    }

    /// The node at an absolute path, as the program sees the disk.
    fileprivate func resolve(_ path: String) -> Int? {
        var node = Self.root
        for component in path.split(separator: "/") where component != "." {
            guard let directory = nodes[node], directory.isDirectory, let next = directory.entries[String(component)]
            else { return nil }
            node = next
        }
        return node
    }

    /// The directory that holds `path` (which must exist) and the last component.
    fileprivate func parentAndName(_ path: String) -> (Int, String)? {
        var components = path.split(separator: "/").map(String.init).filter { $0 != "." }
        guard let name = components.popLast() else { return nil }
        guard let parent = resolve("/" + components.joined(separator: "/")), nodes[parent]!.isDirectory else {
            return nil
        }
        return (parent, name)
    }

    /// A successful flush of a file: what was written is durable, except what an earlier failed flush lost.
    fileprivate mutating func flushData(_ node: Int) {
        var file = nodes[node]!
        for change in file.pending { file.durableData.apply(change, keepingBytes: !change.lost) }
        file.pending = []
        nodes[node] = file
    }

    /// A successful flush of a directory.
    fileprivate mutating func flushEntries(_ node: Int) {
        var directory = nodes[node]!
        for change in directory.pendingEntries where !change.lost { directory.durableEntries.apply(change.kind) }
        directory.pendingEntries = []
        nodes[node] = directory
    }

    /// The disk after a power loss: every node durable, holding what `damage` lets survive.
    fileprivate func afterPowerLoss(_ damage: SimulatedDisk.Damage) -> Self {
        var random = SeededRandomNumberGenerator(
            seed: { if case .random(let seed) = damage { return seed } else { return 0 } }())
        func keep() -> Bool {
            switch damage {
            case .flushedOnly: return false
            case .everything: return true
            case .random: return random.next() & 1 == 0
            }
        }
        var image = Self()
        image.nextNode = nextNode
        // Directories first: which names survive decides which files do.
        var survivingEntries: [Int: [String: Int]] = [:]
        // In a fixed order, so that a seed always makes the same image.
        for id in nodes.keys.sorted() where nodes[id]!.isDirectory {
            let node = nodes[id]!
            var entries = node.durableEntries
            for change in node.pendingEntries where !change.lost && keep() { entries.apply(change.kind) }
            survivingEntries[id] = entries
        }
        var reachable: [Int] = [Self.root]
        var seen: Set<Int> = [Self.root]
        while let id = reachable.popLast() {
            guard let node = nodes[id] else { continue }
            if node.isDirectory {
                let entries = (survivingEntries[id] ?? [:]).filter { nodes[$0.value] != nil }
                var copy = SimulatedDisk.Node(isDirectory: true)
                copy.entries = entries
                copy.durableEntries = entries
                image.nodes[id] = copy
                for child in entries.values.sorted(by: >) where seen.insert(child).inserted { reachable.append(child) }
            } else {
                let data = node.crashData(damage: damage, random: &random)
                var copy = SimulatedDisk.Node(isDirectory: false)
                copy.data = data
                copy.durableData = data
                image.nodes[id] = copy
            }
        }
        image.calls = calls
        image.lastCall = lastCall
        return image
    }
}

extension SimulatedDisk.Node {
    /// What a power loss leaves of this file's unflushed changes.
    fileprivate func crashData(damage: SimulatedDisk.Damage, random: inout SeededRandomNumberGenerator) -> [UInt8] {
        var data = durableData
        switch damage {
        case .flushedOnly:
            return data
        case .everything:
            for change in pending { data.apply(change, keepingBytes: !change.lost) }
            return data
        case .random:
            break
        }
        let sector = SimulatedDisk.sectorSize
        // Whether the file's size reached the disk even where its bytes did not, and what such bytes read as.
        let sizeLands = random.next() % 3 == 0
        let garbage = random.next() & 1 == 0
        for change in pending {
            switch change.kind {
            case .truncate(let length):
                if !change.lost && random.next() & 1 == 0 { data.resize(to: length) }
            case .write(let offset, let bytes):
                // The write's sectors: each lands or not; "prefix" keeps the first few in order.
                var pieces: [Range<Int>] = []
                var start = offset
                while start < offset + bytes.count {
                    let end = min(offset + bytes.count, (start / sector + 1) * sector)
                    pieces.append(start..<end)
                    start = end
                }
                let mode = change.lost ? 0 : random.next() % 4
                let prefix = pieces.isEmpty ? 0 : Int(random.next() % UInt64(pieces.count + 1))
                for (index, piece) in pieces.enumerated() {
                    let lands: Bool
                    switch mode {
                    case 0: lands = false
                    case 1: lands = true
                    case 2: lands = index < prefix
                    default: lands = random.next() & 1 == 0
                    }
                    let slice = bytes[(piece.lowerBound - offset)..<(piece.upperBound - offset)]
                    if lands {
                        data.write(Array(slice), at: piece.lowerBound)
                    } else if sizeLands && piece.upperBound > data.count {
                        let filler: [UInt8] =
                            garbage
                            ? slice.indices.map { _ in UInt8(truncatingIfNeeded: random.next()) }
                            : [UInt8](repeating: 0, count: slice.count)
                        data.write(filler, at: piece.lowerBound)
                    }
                }
            }
        }
        return data
    }
}

extension [UInt8] {
    /// Writes `bytes` at `offset`, filling any gap with zeros.
    fileprivate mutating func write(_ bytes: [UInt8], at offset: Int) {
        if count < offset { append(contentsOf: repeatElement(0, count: offset - count)) }
        let overlap = Swift.min(bytes.count, count - offset)
        if overlap > 0 { replaceSubrange(offset..<offset + overlap, with: bytes[..<overlap]) }
        if overlap < bytes.count { append(contentsOf: bytes[overlap...]) }
    }

    fileprivate mutating func resize(to length: Int) {
        if length < count {
            removeSubrange(length...)
        } else if length > count {
            append(contentsOf: repeatElement(0, count: length - count))
        }
    }

    /// Applies a change; a write whose bytes never land still extends the file (with zeros).
    fileprivate mutating func apply(_ change: SimulatedDisk.FileChange, keepingBytes: Bool) {
        switch change.kind {
        case .write(let offset, let bytes):
            if keepingBytes {
                write(bytes, at: offset)
            } else if offset + bytes.count > count {
                resize(to: offset + bytes.count)
            }
        case .truncate(let length):
            resize(to: length)
        }
    }
}

extension [String: Int] {
    fileprivate mutating func apply(_ change: SimulatedDisk.EntryChange.Kind) {
        switch change {
        case .set(let name, let node): self[name] = node
        case .remove(let name): self[name] = nil
        case .rename(let from, let to, let node):
            self[from] = nil
            self[to] = node
        }
    }
}

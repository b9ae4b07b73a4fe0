import FlatSync
import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// Timing, statistics, scratch directories and process helpers shared by the measurements.

/// How long the run may take.
enum RunMode: String, Sendable {
    /// About two minutes on a 2-core VM: more iterations, more repetitions.
    case full
    /// Under a minute on the 2-core machine.
    case quick
}

/// What every measurement gets: the mode, the scratch root, and the figures measured before it (a
/// measurement may need an earlier one, such as the log frame size).
struct BenchContext: Sendable {
    var mode: RunMode
    /// A directory under `FileManager.default.temporaryDirectory`, removed at the end of the run.
    var scratch: URL
    var results: Results

    var isQuick: Bool { mode == .quick }

    /// `full` in a full run, `quick` in a quick one.
    func pick<T>(full: T, quick: T) -> T { isQuick ? quick : full }

    /// A fresh, empty directory under the scratch root.
    func makeDirectory(_ name: String) throws -> URL {
        let url = scratch.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// The figures of one run by JSON key, plus notes for people (which API and change kind a row used).
struct Results: Sendable {
    private(set) var values: [String: Double] = [:]
    private(set) var notes: [String] = []

    subscript(key: String) -> Double? {
        get { values[key] }
        set { values[key] = newValue }
    }

    mutating func note(_ text: String) { notes.append(text) }

    mutating func merge(_ other: Results) {
        values.merge(other.values) { _, new in new }
        notes += other.notes
    }
}

// MARK: - Timing

let benchClock = ContinuousClock()

extension Duration {
    /// The duration in milliseconds.
    var milliseconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) * 1_000 + Double(attoseconds) / 1e15
    }
}

/// Runs `body` and returns how long it took, in milliseconds.
func timeMilliseconds(_ body: () async throws -> Void) async rethrows -> Double {
    let start = benchClock.now
    try await body()
    return (benchClock.now - start).milliseconds
}

/// The `p`-th percentile (0…100) of `samples`, interpolating linearly between the two nearest ranks.
func percentile(_ samples: [Double], _ p: Double) -> Double {
    precondition(!samples.isEmpty, "percentile of no samples")
    let sorted = samples.sorted()
    let rank = (p / 100) * Double(sorted.count - 1)
    let lower = Int(rank.rounded(.down))
    let upper = min(lower + 1, sorted.count - 1)
    let fraction = rank - Double(lower)
    return sorted[lower] + (sorted[upper] - sorted[lower]) * fraction
}

func median(_ samples: [Double]) -> Double { percentile(samples, 50) }

/// Progress for the person watching, on stderr so that `--json` keeps stdout clean.
func progress(_ message: String) {
    FileHandle.standardError.write(Data("flatsync-bench: \(message)\n".utf8))
}

// MARK: - Files

/// Copies every regular file of `source` into a new directory `destination` (a prepared device
/// directory, so each repetition of a cold start opens identical files). The copy's note of its inode is
/// its own, so that it opens as the device it was, not as a copy (which a store gives a new device ID, and
/// a cold start does not).
func copyDirectory(_ source: URL, to destination: URL) throws {
    let manager = FileManager.default
    try manager.createDirectory(at: destination, withIntermediateDirectories: true)
    for name in try manager.contentsOfDirectory(atPath: source.path) where name != LocalStore.inodeFileName {
        try manager.copyItem(at: source.appendingPathComponent(name), to: destination.appendingPathComponent(name))
    }
    if let inode = try FileSystem.posix.inode(destination.path) {
        try Data(String(inode).utf8).write(to: destination.appendingPathComponent(LocalStore.inodeFileName))
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Memory and processes

/// This executable, for re-running it as a child process.
func currentExecutable() -> URL {
    if let url = Bundle.main.executableURL { return url }
    return URL(fileURLWithPath: CommandLine.arguments[0])
}

/// Runs `executable` with `arguments` and returns what it printed on stdout; its stderr passes through.
func runChild(_ executable: URL, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw BenchError(
            "the child \(arguments.joined(separator: " ")) exited with status \(process.terminationStatus)")
    }
    return String(decoding: data, as: UTF8.self)
}

// MARK: - The machine

/// The 1-minute load average: other processes on these cores slow the absolute figures (the ratios to
/// baselines measured alongside hold better).
func loadAverage() -> Double? {
    var loads = [Double](repeating: 0, count: 3)
    return getloadavg(&loads, 3) >= 1 ? loads[0] : nil
}

/// A one-line description of the machine and toolchain, for the report's header.
func machineDescription() -> String {
    let info = ProcessInfo.processInfo
    var system = utsname()
    uname(&system)
    func text<T>(_ field: T) -> String {
        withUnsafeBytes(of: field) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
    }
    let memory = Double(info.physicalMemory) / Double(1 << 30)
    return "\(info.activeProcessorCount) cores, \(String(format: "%.1f", memory)) GiB, "
        + "\(text(system.sysname)) \(text(system.release)) \(text(system.machine)), \(compilerVersion)"
}

/// The compiler that built the benchmark (checked at compile time, so no `swift --version` is needed).
let compilerVersion: String = {
    #if compiler(>=6.4)
        return "Swift compiler ≥ 6.4"
    #elseif compiler(>=6.3)
        return "Swift compiler 6.3"
    #elseif compiler(>=6.2)
        return "Swift compiler 6.2"
    #elseif compiler(>=6.1)
        return "Swift compiler 6.1"
    #else
        return "Swift compiler 6.0"
    #endif
}()

import FlatSyncBenchHost
import Foundation

// flatsync-bench: FlatSync's performance figures beside their baselines, measured in one run (the Performance
// article, Sources/FlatSync/FlatSync.docc/Performance.md, describes each).
//
//   swift run -c release flatsync-bench [--json] [--quick]
//
//   --json    print exactly one flat JSON object on stdout (progress goes to stderr)
//   --quick   fewer iterations: the whole run in under a minute
//   --only IDS  run only these measurements (comma-separated ids: frame, enqueue, buffered, rewrite,
//               burst, group, cold, coalesce, pushpull, pushpullhttp, ckwsjson, pushlatency, idlepoll, host), for
//               profiling one of them; enqueue needs frame
//
// Hidden: `--cold-start-child DIR` is the child process the run starts to measure a cold start's peak memory;
// `--prepare-device ITEMS DIR` builds the cold-start rows' device directory in DIR and exits, so a profiler
// can run the child on it (`perf record -g`, `heaptrack`; valgrind's tools crash here in libdispatch's signal
// thread), and `--prepare-killed-device ITEMS DIR` the same device as a killed process leaves it;
// `--repeat-cold-start DIR N` opens and reads a copy of DIR N times in one process and prints the median, for
// profiling the warm cold start the table reports; `--repeat-burst N` runs the burst N times in one process
// (FlatSync only) and prints the median, for profiling it; `--repeat-host-cold-start N [RECORDS]` the same
// for the cold start of RECORDS host records (100k unless given).

let usage = """
    usage: flatsync-bench [--json] [--quick]
      --json    print one flat JSON object on stdout instead of the table
      --quick   a run of under a minute (fewer iterations and repetitions)
      --only IDS  only these measurements, comma-separated: frame, enqueue, buffered, rewrite, burst,
                  group, cold, coalesce, pushpull, pushpullhttp, ckwsjson, pushlatency, idlepoll, host
                  (enqueue needs frame)
    """

struct Arguments {
    var json = false
    var mode = RunMode.full
    var coldStartChild: String?
    var only: Set<String>?
    var prepareDevice: (items: Int, directory: String, closing: Bool)?
    var repeatColdStart: (directory: String, times: Int)?
    var repeatBurst: Int?
    var repeatHostColdStart: (times: Int, records: Int)?

    /// Parses the command line; nil (after printing why) on a usage error.
    init?(_ arguments: [String]) {
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            switch argument {
            case "--json": json = true
            case "--quick": mode = .quick
            case ColdStartChild.argument:
                guard let directory = remaining.popFirst() else { return nil }
                coldStartChild = directory
            case "--prepare-device", "--prepare-killed-device":
                guard let items = remaining.popFirst().flatMap({ Int($0) }), let directory = remaining.popFirst()
                else { return nil }
                prepareDevice = (items, directory, argument == "--prepare-device")
            case "--repeat-cold-start":
                guard let directory = remaining.popFirst(), let times = remaining.popFirst().flatMap({ Int($0) })
                else { return nil }
                repeatColdStart = (directory, times)
            case "--repeat-host-cold-start":
                guard let times = remaining.popFirst().flatMap({ Int($0) }) else { return nil }
                var records = 100_000
                if let given = remaining.first.flatMap({ Int($0) }) {
                    records = given
                    remaining.removeFirst()
                }
                repeatHostColdStart = (times, records)
            case "--repeat-burst":
                guard let times = remaining.popFirst().flatMap({ Int($0) }) else { return nil }
                repeatBurst = times
            case "--only":
                guard let ids = remaining.popFirst() else { return nil }
                only = Set(ids.split(separator: ",").map(String.init))
                let known = Set(Benchmark.measurements.map(\.id))
                guard only!.isSubset(of: known) else {
                    FileHandle.standardError.write(Data("flatsync-bench: unknown measurement in \(ids)\n".utf8))
                    return nil
                }
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                FileHandle.standardError.write(Data("flatsync-bench: unknown argument \(argument)\n".utf8))
                return nil
            }
        }
    }
}

/// One step of a run: a function that measures some figures.
struct Measurement: Sendable {
    /// A short name for `--only`.
    var id: String
    var name: String
    var run: @Sendable (BenchContext) async throws -> Results
}

enum Benchmark {
    /// Every measurement, in run order; ``Report/rows`` lists the rows they fill.
    static let measurements: [Measurement] = [
        Measurement(id: "frame", name: "log frame size", run: Measurements.logFrame),
        Measurement(
            id: "enqueue", name: "durable enqueue beside bare append + fsync", run: Measurements.durableEnqueue),
        Measurement(id: "buffered", name: "buffered enqueue", run: Measurements.bufferedEnqueue),
        Measurement(id: "rewrite", name: "News-style full rewrite", run: Baselines.fullRewrite),
        Measurement(id: "burst", name: "burst", run: Measurements.burst),
        Measurement(id: "group", name: "concurrent durable writers (group commit)", run: Measurements.groupCommit),
        Measurement(id: "cold", name: "cold start", run: Measurements.coldStart),
        Measurement(id: "coalesce", name: "coalescing then sync", run: SyncMeasurements.coalescing),
        Measurement(id: "pushpull", name: "push 10k, pull on another device", run: SyncMeasurements.pushPull),
        Measurement(
            id: "pushpullhttp", name: "push 10k, pull on another device, through CKWS over HTTP",
            run: CloudKitMeasurements.pushPullOverHTTP),
        Measurement(id: "ckwsjson", name: "CKWS JSON per record", run: CloudKitMeasurements.jsonCodec),
        Measurement(
            id: "pushlatency", name: "push latency through the web courier over HTTP",
            run: PushMeasurements.latencyOverHTTP),
        Measurement(
            id: "idlepoll", name: "idle poll rate of a device following pushes", run: PushMeasurements.idlePollRate),
        Measurement(id: "host", name: "host-defined records", run: HostStoreMeasurements.all),
    ]

    /// Runs every measurement in `scratch`, an empty directory the caller removes afterwards.
    static func run(mode: RunMode, scratch: URL, only: Set<String>? = nil) async throws -> Results {
        var context = BenchContext(mode: mode, scratch: scratch, results: Results())
        context.results["load_average_start"] = loadAverage()
        for measurement in measurements where only?.contains(measurement.id) ?? true {
            let start = benchClock.now
            let results = try await measurement.run(context)
            context.results.merge(results)
            progress(
                String(format: "%@ done in %.1f s", measurement.name, (benchClock.now - start).milliseconds / 1000))
        }
        context.results["load_average_end"] = loadAverage()
        return context.results
    }
}

guard let arguments = Arguments(Array(CommandLine.arguments.dropFirst())) else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(2)
}

if let directory = arguments.coldStartChild {
    do {
        try await ColdStartChild.main(directory: directory)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("flatsync-bench child: \(error)\n".utf8))
        exit(1)
    }
}

// Every file the run makes goes under one scratch directory on the temporary directory's file system,
// removed at the end, on failure, and on SIGINT or SIGTERM.
let scratch = FileManager.default.temporaryDirectory
    .appendingPathComponent("flatsync-bench-\(getpid())-\(UUID().uuidString.prefix(8))")
func removeScratch() { try? FileManager.default.removeItem(at: scratch) }
let signalSources = [SIGINT, SIGTERM].map { number in
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler {
        removeScratch()
        exit(128 + number)
    }
    source.resume()
    return source
}

if let (directory, times) = arguments.repeatColdStart {
    do {
        try await Measurements.repeatColdStart(of: URL(fileURLWithPath: directory), times: times)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("flatsync-bench: \(error)\n".utf8))
        exit(1)
    }
}

/// Runs a profiling mode in the scratch directory, removes it (`exit` runs no `defer`) and exits.
func runInScratch(_ body: (URL) async throws -> Void) async -> Never {
    do {
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        try await body(scratch)
        removeScratch()
        exit(0)
    } catch {
        removeScratch()
        FileHandle.standardError.write(Data("flatsync-bench: \(error)\n".utf8))
        exit(1)
    }
}

if let (times, records) = arguments.repeatHostColdStart {
    await runInScratch { try await HostStoreMeasurements.repeatColdStart(in: $0, times: times, records: records) }
}

if let times = arguments.repeatBurst {
    await runInScratch { try await Measurements.repeatBurst(in: $0, times: times) }
}

if let (items, directory, closing) = arguments.prepareDevice {
    do {
        try await Measurements.prepareDevice(
            in: URL(fileURLWithPath: directory), items: items, pendingMutations: 1_000, closing: closing)
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("flatsync-bench: \(error)\n".utf8))
        exit(1)
    }
}

let started = Date()
let runStart = benchClock.now
do {
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { removeScratch() }
    let results = try await Benchmark.run(mode: arguments.mode, scratch: scratch, only: arguments.only)
    let seconds = (benchClock.now - runStart).milliseconds / 1000
    if arguments.json {
        print(Report.json(results, mode: arguments.mode, seconds: seconds))
    } else {
        print(Report.table(Report.withRatios(results), mode: arguments.mode, seconds: seconds, started: started))
    }
} catch {
    FileHandle.standardError.write(Data("flatsync-bench: \(error)\n".utf8))
    exit(1)
}

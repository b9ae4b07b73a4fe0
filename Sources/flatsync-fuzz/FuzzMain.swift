import FlatSyncFuzzing
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// FlatSync's libFuzzer targets (see `.ci/fuzz`, which builds this with `-sanitize=fuzzer` and
// `-DFLATSYNC_LIBFUZZER`).
//
//   flatsync-fuzz list                 the targets, one per line: name, then what it fuzzes
//   flatsync-fuzz seeds DIR            writes the seed corpus, made from real files, to DIR/<target>/
//   flatsync-fuzz run TARGET FILE...   runs inputs through a target (a crash to reproduce, say)
//   FLATSYNC_FUZZ_TARGET=NAME flatsync-fuzz [libFuzzer options] [CORPUS...]
//                                      fuzzes NAME (only in the libFuzzer build)

/// The target `FLATSYNC_FUZZ_TARGET` names. A global `let`: set once, before libFuzzer calls back.
let selectedTarget: FuzzTarget? = ProcessInfo.processInfo.environment["FLATSYNC_FUZZ_TARGET"].flatMap(
    FuzzTargets.named)

#if FLATSYNC_LIBFUZZER
    /// The function libFuzzer calls with each input: runs it through the selected target.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let input = data.map { Data(bytes: $0, count: size) } ?? Data()
        selectedTarget?.run(input)
        return 0
    }

    /// libFuzzer's driver, for a program with its own `main` (SwiftPM names the entry point of an executable).
    @_silgen_name("LLVMFuzzerRunDriver")
    func runLibFuzzer(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32
#endif

@main
enum FuzzMain {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        switch arguments.first {
        case "list":
            for target in FuzzTargets.all { print("\(target.name)\t\(target.summary)") }
        case "seeds" where arguments.count == 2:
            do {
                try await FuzzSeeds.write(to: URL(fileURLWithPath: arguments[1]))
            } catch {
                fail("could not make the seed corpus: \(error)")
            }
        case "run" where arguments.count >= 2:
            guard let target = FuzzTargets.named(arguments[1]) else { fail("no target \(arguments[1])") }
            for path in arguments.dropFirst(2) {
                guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
                target.run(data)
            }
        default:
            fuzz()
        }
    }

    static func fuzz() -> Never {
        #if FLATSYNC_LIBFUZZER
            guard selectedTarget != nil else {
                fail("set FLATSYNC_FUZZ_TARGET to one of: \(FuzzTargets.all.map(\.name).joined(separator: ", "))")
            }
            var argc = CommandLine.argc
            var argv = CommandLine.unsafeArgv
            exit(runLibFuzzer(&argc, &argv) { fuzzOneInput($0, $1) })
        #else
            fail("usage: flatsync-fuzz list | seeds DIR | run TARGET FILE... (fuzzing needs the build in .ci/fuzz)")
        #endif
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("flatsync-fuzz: \(message)\n".utf8))
        exit(2)
    }
}

import FlatSyncFuzzing
import Foundation
import Testing

@testable import FlatSync

/// The fuzz targets of `.ci/fuzz`, run in `swift test`: over the seed corpus made from real files, over
/// every input a fuzzer ever crashed on (`Regressions/<target>/`, one file each), and over a few thousand
/// seeded random mutations of the seeds — a small fuzzer that needs no special build.
@Suite struct FuzzRegressionTests {
    static let regressions = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Regressions")

    @Test func everyInputAFuzzerCrashedOnIsHandled() throws {
        var checked = 0
        for target in FuzzTargets.all {
            let folder = Self.regressions.appendingPathComponent(target.name)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            for name in names.sorted() {
                target.run(try Data(contentsOf: folder.appendingPathComponent(name)))
                checked += 1
            }
        }
        #expect(checked > 0)
        print("fuzz regressions: \(checked) inputs that once crashed a target, none crashes now")
    }

    @Test func theSeedsAndRandomMutationsOfThemAreHandled() async throws {
        let files = try await FuzzSeeds.make()
        for plist in files.plists {
            #expect(throws: Never.self, "every property list FlatSync writes passes its check") {
                try BinaryPropertyList.validate(plist)
            }
        }
        var random = SystemRandomNumberGenerator.seeded(2026)
        var runs = 0
        for target in FuzzTargets.all {
            let seeds = target.seeds(files)
            #expect(!seeds.isEmpty, "\(target.name) has no seeds")
            for seed in seeds {
                target.run(seed)
                for _ in 0..<150 {
                    var bytes = [UInt8](seed)
                    for _ in 0...(random.next() % 4) where !bytes.isEmpty {
                        let index = Int(random.next() % UInt64(bytes.count))
                        switch random.next() % 4 {
                        case 0: bytes[index] ^= UInt8(truncatingIfNeeded: random.next() | 1)
                        case 1: bytes = Array(bytes.prefix(index))
                        case 2: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: index)
                        default: bytes[index] = [0, 0xFF, 0x7F, 0x80][Int(random.next() % 4)]
                        }
                    }
                    target.run(Data(bytes))
                    runs += 1
                }
            }
        }
        print("fuzz targets in swift test: \(runs) mutated inputs, no crash")
    }
}

extension SystemRandomNumberGenerator {
    /// A seeded generator, so that the mutations repeat from run to run.
    static func seeded(_ seed: UInt64) -> SeededRandomNumberGenerator { SeededRandomNumberGenerator(seed: seed) }
}

import FlatSyncTestSupport
import FlatSyncTesting
import Foundation
import Testing

@testable import FlatSync

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

@Suite struct DurableFileWriterTests {
    @Test func writesTheContentWithMode0600AndLeavesNoTemporaryFile() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("store.plist")
            try DurableFileWriter().write(Data("first".utf8), to: url)
            #expect(try Data(contentsOf: url) == Data("first".utf8))
            #expect(permissions(of: url) == 0o600)

            try DurableFileWriter().write(Data("second, longer".utf8), to: url)
            #expect(try Data(contentsOf: url) == Data("second, longer".utf8))
            #expect(permissions(of: url) == 0o600)
            #expect(try fileNames(in: directory) == ["store.plist"])
        }
    }

    @Test func writesAnEmptyFile() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("empty")
            try DurableFileWriter().write(Data(), to: url)
            #expect(try Data(contentsOf: url).isEmpty)
        }
    }

    /// The calls of a durable replacement, and the name each reports in its error.
    static let steps: [(FaultyFileSystem.Call, String)] = [
        (.open, "open"), (.write, "write"), (.sync, "fsync"), (.rename, "rename"),
        (.syncDirectory, "fsync of the directory"),
    ]

    @Test(arguments: steps)
    func aFailureAtAnyStepIsReportedAndLeavesNoTemporaryFile(call: FaultyFileSystem.Call, name: String) throws {
        for old in [nil, Data("old content".utf8)] {
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent("store.plist")
                if let old { try DurableFileWriter().write(old, to: url) }
                let new = Data("new content".utf8)

                let faulty = FaultyFileSystem()
                faulty.failNext(call, with: .ioError)
                let writer = DurableFileWriter(fileSystem: FileSystem(faulty))
                let error = #expect(throws: FlatSyncError.self) { try writer.write(new, to: url) }
                #expect(error?.code == .ioFailed)
                #expect(error?.message.hasPrefix("\(name) failed") == true, "\(String(describing: error))")
                #expect((error?.cause as? POSIXError)?.code == .EIO)

                let content = try? Data(contentsOf: url)
                if call == .syncDirectory {
                    // The rename already happened: the path holds the new bytes, but the caller was told the
                    // replacement may not survive a power loss.
                    #expect(content == new)
                } else {
                    #expect(content == old, "the destination keeps its old content, or stays absent")
                }
                #expect(try fileNames(in: directory) == (old == nil && call != .syncDirectory ? [] : ["store.plist"]))
            }
        }
    }

    @Test func interruptedCallsAndShortWritesAreFinishedNotReported() throws {
        try withTemporaryDirectory { directory in
            let url = directory.appendingPathComponent("store.plist")
            let content = Data((0..<10_000).map { UInt8(truncatingIfNeeded: $0) })
            for call in [FaultyFileSystem.Call.open, .write, .rename] {
                let faulty = FaultyFileSystem()
                faulty.failNext(call, with: .interrupted)
                try DurableFileWriter(fileSystem: FileSystem(faulty)).write(content, to: url)
                #expect(try Data(contentsOf: url) == content, "\(call)")
            }
            for number in 1...6 {
                let faulty = FaultyFileSystem()
                faulty.inject(.shortWrite, atCall: number)
                try DurableFileWriter(fileSystem: FileSystem(faulty)).write(content, to: url)
                #expect(try Data(contentsOf: url) == content, "call \(number)")
            }
            #expect(try fileNames(in: directory) == ["store.plist"])
        }
    }

    @Test func removesLeftoverTemporaryFilesAndNothingElse() throws {
        try withTemporaryDirectory { directory in
            let prefix = DurableFileWriter.temporaryPrefix
            for name in ["\(prefix)store.plist-123-456", "\(prefix)commands.log-9-9", "store.plist", "lock", "tmp-x"] {
                try Data("x".utf8).write(to: directory.appendingPathComponent(name))
            }
            #expect(DurableFileWriter.removeLeftoverTemporaryFiles(in: directory) == 2)
            #expect(try fileNames(in: directory) == ["lock", "store.plist", "tmp-x"])
            #expect(DurableFileWriter.removeLeftoverTemporaryFiles(in: directory) == 0)
        }
    }

    @Test func removingLeftoversFromAMissingDirectoryFindsNone() {
        let missing = URL(fileURLWithPath: "/nonexistent-\(UUID().uuidString)")
        #expect(DurableFileWriter.removeLeftoverTemporaryFiles(in: missing) == 0)
    }
}

import FlatSyncTestSupport
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

    @Test(arguments: DurableFileWriter.Step.allCases)
    func aFailureAtAnyStepIsReportedAndLeavesNoTemporaryFile(step: DurableFileWriter.Step) throws {
        for old in [nil, Data("old content".utf8)] {
            try withTemporaryDirectory { directory in
                let url = directory.appendingPathComponent("store.plist")
                if let old { try DurableFileWriter().write(old, to: url) }
                let new = Data("new content".utf8)

                let writer = DurableFileWriter(injectedFailure: (step, EIO))
                let error = #expect(throws: FlatSyncError.self) { try writer.write(new, to: url) }
                #expect(error?.code == .ioFailed)
                #expect(error?.message.hasPrefix("\(step.rawValue) failed") == true, "\(String(describing: error))")
                #expect((error?.cause as? POSIXError)?.code == .EIO)

                let content = try? Data(contentsOf: url)
                if step == .syncDirectory {
                    // The rename already happened: the path holds the new bytes, but the caller was told the
                    // replacement may not survive a power loss.
                    #expect(content == new)
                } else {
                    #expect(content == old, "the destination keeps its old content, or stays absent")
                }
                #expect(try fileNames(in: directory) == (old == nil && step != .syncDirectory ? [] : ["store.plist"]))
            }
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

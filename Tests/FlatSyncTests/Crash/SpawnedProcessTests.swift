import FlatSyncTestSupport
import Foundation
import Testing

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#endif

/// The process launcher every test that runs an executable relies on (see `SpawnedProcess`).
@Suite("SpawnedProcess")
struct SpawnedProcessTests {
    private let shell = URL(fileURLWithPath: "/bin/sh")

    @Test func theChildGetsItsArgumentsEnvironmentAndDirectoryAndItsStatusComesBack() async throws {
        try await withTemporaryDirectory { directory in
            let child = try SpawnedProcess(
                shell, arguments: ["-c", "echo \"$GREETING\" \"$1\"; pwd; echo oops >&2; exit 3", "sh", "world"],
                environment: ["GREETING": "hello"], currentDirectory: directory, output: .pipe, error: .pipe)
            let output = String(decoding: try child.standardOutput!.readToEnd() ?? Data(), as: UTF8.self)
            let errors = String(decoding: try child.standardError!.readToEnd() ?? Data(), as: UTF8.self)
            #expect(await child.waitForExit() == SpawnedProcess.Exit(status: 3, signaled: false))
            let lines = output.split(separator: "\n").map(String.init)
            #expect(lines.first == "hello world")
            #expect(
                lines.last.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath() }
                    == directory.resolvingSymlinksInPath())
            #expect(errors == "oops\n")
            #expect(!child.isRunning)
        }
    }

    @Test func standardInputIsAPipeAndStandardErrorCanFollowOutput() throws {
        let child = try SpawnedProcess(
            shell, arguments: ["-c", "cat; echo done >&2"], input: .pipe, output: .pipe, error: .sameAsOutput)
        child.standardInput!.write(Data("typed\n".utf8))
        try child.standardInput!.close()
        let output = String(decoding: try child.standardOutput!.readToEnd() ?? Data(), as: UTF8.self)
        #expect(output == "typed\ndone\n")
        #expect(child.waitUntilExit() == SpawnedProcess.Exit(status: 0, signaled: false))
    }

    @Test func aSignalEndsTheChildAndIsReportedAsOne() async throws {
        let child = try SpawnedProcess(shell, arguments: ["-c", "read line"], input: .pipe)
        child.signal(SIGKILL)
        #expect(await child.waitForExit() == SpawnedProcess.Exit(status: SIGKILL, signaled: true))
        child.signal(SIGKILL)  // after the exit: nothing to signal, and no other process is hit
        #expect(await child.waitForExit() == SpawnedProcess.Exit(status: SIGKILL, signaled: true))
    }

    @Test func aMissingExecutableIsAnErrorNotAChild() {
        #expect(throws: SpawnedProcess.Failure.self) {
            try SpawnedProcess(URL(fileURLWithPath: "/nonexistent/flatsync-nothing"))
        }
    }

    #if os(Linux)
        @Test func theChildInheritsNoDescriptorBeyondItsThreeStreams() throws {
            // A descriptor the parent leaves open on exec, at a number the child's `ls` never reaches. (F_DUPFD
            // takes the lowest free number from 900 up: a fixed number could be another test's open file.)
            let file = open("/dev/null", O_RDONLY)
            #expect(file >= 0)
            let high = fcntl(file, F_DUPFD, 900)
            #expect(high >= 900)
            defer {
                close(high)
                close(file)
            }
            let child = try SpawnedProcess(
                URL(fileURLWithPath: "/bin/ls"), arguments: ["/proc/self/fd"], output: .pipe)
            let listed = String(decoding: try child.standardOutput!.readToEnd() ?? Data(), as: UTF8.self)
            #expect(child.waitUntilExit().status == 0)
            let numbers = Set(listed.split(separator: "\n").compactMap { Int32($0) })
            #expect(numbers.isSuperset(of: [0, 1, 2]))
            #expect(!numbers.contains(high), "\(numbers)")
        }
    #endif
}

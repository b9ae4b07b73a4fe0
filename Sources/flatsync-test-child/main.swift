import Foundation

// Output goes through FileHandle (unbuffered), so a parent reading a pipe sees each line at once.
// Child processes that FlatSync's tests start, and often kill with SIGKILL, to test what survives a
// real process death and what two processes do to shared files. Not part of the public surface.
//
//   flatsync-test-child hold-lock DIR            take DIR's directory lock, print "locked", wait for stdin EOF
//   flatsync-test-child cloud-writer CLOUD ...   write records into a DirectoryCloud (see CloudWriter.swift)
//   flatsync-test-child crash-child DIR ...      acknowledged mutations until killed (see CrashChild.swift)
//   flatsync-test-child writers-child DIR N ...  N concurrent writers until killed (see ConcurrentWritersChild.swift)

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
switch arguments.first {
case "hold-lock": status = runHoldLock(Array(arguments.dropFirst()))
case "cloud-writer": status = await runCloudWriter(Array(arguments.dropFirst()))
case "crash-child": status = await runCrashChild(Array(arguments.dropFirst()))
case "writers-child": status = await runConcurrentWritersChild(Array(arguments.dropFirst()))
default:
    FileHandle.standardError.write(
        Data("usage: flatsync-test-child hold-lock|cloud-writer|crash-child|writers-child ...\n".utf8))
    status = 2
}
exit(status)

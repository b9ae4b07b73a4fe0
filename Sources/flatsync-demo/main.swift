import Foundation

// Everything lives in Demo.run, which tests can call too; this file only turns its result into the
// process's exit status.
exit(await Demo.run(Array(CommandLine.arguments.dropFirst())).rawValue)

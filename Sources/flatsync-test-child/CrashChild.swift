import Foundation

func runCrashChild(_ arguments: [String]) async -> Int32 {
    FileHandle.standardError.write(Data("crash-child: not built yet\n".utf8))
    return 1
}

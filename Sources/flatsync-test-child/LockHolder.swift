import Foundation

func runHoldLock(_ arguments: [String]) -> Int32 {
    FileHandle.standardError.write(Data("hold-lock: not built yet\n".utf8))
    return 1
}

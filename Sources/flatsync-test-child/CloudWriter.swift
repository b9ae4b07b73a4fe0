import Foundation

func runCloudWriter(_ arguments: [String]) async -> Int32 {
    FileHandle.standardError.write(Data("cloud-writer: not built yet\n".utf8))
    return 1
}

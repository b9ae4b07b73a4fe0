import FlatSync
import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `hold-lock DIR`: takes DIR's directory lock, prints `locked`, then holds it until standard input reaches
/// end of file (the parent closed it, or died) or the process is killed.
func runHoldLock(_ arguments: [String]) -> Int32 {
    guard arguments.count == 1 else {
        FileHandle.standardError.write(Data("usage: flatsync-test-child hold-lock DIR\n".utf8))
        return 2
    }
    let lock: DirectoryLock
    do {
        lock = try DirectoryLock.acquire(in: URL(fileURLWithPath: arguments[0]))
    } catch {
        FileHandle.standardError.write(Data("hold-lock: \(error)\n".utf8))
        return 1
    }
    FileHandle.standardOutput.write(Data("locked\n".utf8))
    var buffer = [UInt8](repeating: 0, count: 256)
    while true {
        let count = read(STDIN_FILENO, &buffer, buffer.count)
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
    }
    lock.release()
    return 0
}

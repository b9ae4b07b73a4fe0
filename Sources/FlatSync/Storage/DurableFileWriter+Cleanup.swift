import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension DurableFileWriter {
    /// Deletes the temporary files a writer left in `directory` when it was killed mid-write (names that
    /// start with ``temporaryPrefix``), and returns how many it deleted.
    ///
    /// A temporary file never holds anything that was acknowledged: it only becomes data once it is renamed
    /// over its destination. Call this only while holding the directory's lock, so that no live writer in
    /// another process is using the files.
    @discardableResult
    package static func removeLeftoverTemporaryFiles(in directory: URL) -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        var removed = 0
        for name in names where name.hasPrefix(temporaryPrefix) {
            if unlink(directory.appendingPathComponent(name).path) == 0 { removed += 1 }
        }
        return removed
    }
}

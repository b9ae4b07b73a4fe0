#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension DurableFileWriter {
    /// Deletes the temporary files a writer left in `directory` when it was killed mid-write (names that
    /// start with ``temporaryPrefix``), and returns how many it deleted.
    ///
    /// A temporary file never holds anything that was acknowledged: it only becomes data once it is renamed
    /// over its destination. Call this only while holding the directory's lock, so that no live writer in
    /// another process is using the files.
    @discardableResult
    package static func removeLeftoverTemporaryFiles(in directory: URL, fileSystem: FileSystem = .posix) -> Int {
        fileSystem.removeFiles(in: directory.path, withPrefix: temporaryPrefix)
    }
}

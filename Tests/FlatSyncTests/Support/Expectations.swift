import Testing

@testable import FlatSync

/// Expects `body` to throw a ``FlatSyncError`` with `code`.
func expectError<R>(
    _ code: FlatSyncError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> R
) {
    #expect(sourceLocation: sourceLocation) {
        _ = try body()
    } throws: { error in
        (error as? FlatSyncError)?.code == code
    }
}

/// Expects the async `body` to throw a ``FlatSyncError`` with `code`.
func expectError<R>(
    _ code: FlatSyncError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> R
) async {
    await #expect(sourceLocation: sourceLocation) {
        _ = try await body()
    } throws: { error in
        (error as? FlatSyncError)?.code == code
    }
}

import FlatSync

/// A test cloud that serves arbitrary requests against its `CloudDatabase`, counted and faulted like the
/// `CloudTransport` calls: what ``CloudKitWebServicesServer`` serves from.
///
/// The CloudKit Web Services emulator needs server-side steps that no `CloudTransport` call expresses
/// (CKWS's `update` operation checks a change tag and then writes only the sent fields; CKWS allows 200
/// operations a request, not 400; the writer's device ID arrives as a field), and they must run inside
/// the same counted request as the change itself. ``InMemoryCloud`` and ``DirectoryCloud`` conform.
package protocol CloudDatabaseServing: CloudAdministration {
    /// Serves one client request exactly as `CloudDatabase.perform` does: counts it under `kind`,
    /// consults the fault plan, then runs `body` on the database unless a fault says otherwise, keeping
    /// whatever `body` changed.
    ///
    /// - Throws: the `CloudError` of an injected fault or the one `body` threw (a lost response is
    ///   `CloudError.Code.networkFailure` after `body` ran); `CancellationError` when the
    ///   caller was cancelled before the request was served.
    /// - Parameter records: the records the request saves or deletes, which a fault plan's targeted faults
    ///   look for (`CloudDatabase.perform`).
    func serve<Response: Sendable>(
        _ kind: RequestKind,
        records: [RecordID],
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> Response
    ) async throws -> Response
}

extension CloudDatabaseServing {
    /// Serves a request that carries no records: one no targeted fault matches.
    package func serve<Response: Sendable>(
        _ kind: RequestKind,
        _ body: @escaping @Sendable (inout CloudDatabase) throws(CloudError) -> Response
    ) async throws -> Response {
        try await serve(kind, records: [], body)
    }
}

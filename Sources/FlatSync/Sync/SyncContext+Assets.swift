#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension SyncContext {
    /// Keeps `data` as an asset's bytes in the store's directory, durably, and returns the asset to put in a
    /// field of a value you save (see ``CloudAsset``): the context uploads the bytes when it sends the
    /// record. An asset no record holds when the context next opens is deleted then.
    ///
    /// ```swift
    /// let image = try await context.makeAsset(jpegData)
    /// try await context.records(Photo.self).save(Photo(id: "p1", caption: "Tides", image: image))
    /// ```
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/recordTooLarge`` for more than
    ///   ``LocalStore/maximumAssetSize`` bytes; ``FlatSyncError/Code-swift.struct/ioFailed`` when the file
    ///   cannot be written.
    public nonisolated func makeAsset(_ data: Data) async throws -> CloudAsset {
        try await localStore.makeAsset(data)
    }

    /// The bytes of an asset that `value`'s record holds (see ``CloudAsset``): read from the store's
    /// directory for an asset made on this device, else downloaded from the server now. FlatSync keeps no
    /// copy of a download: keep one yourself if you need it offline or again soon.
    ///
    /// CloudKit's download links expire after a while it does not document. When the server refuses the
    /// link the asset carries, the context looks the record up again and downloads through the fresh
    /// link its copy holds, once.
    ///
    /// ```swift
    /// if let photo = await context.records(Photo.self).value(id), let image = photo.image {
    ///     let bytes = try await context.data(of: image, in: photo)
    /// }
    /// ```
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when the file of an asset made here cannot be
    ///   read; ``CloudError``: ``CloudError/Code-swift.struct/unknownItem`` when the server no longer gives
    ///   the bytes (their record deleted or no longer holding them: CloudKit forgets them lazily, so a
    ///   record another device deleted may still download for a while, until the deletion is fetched);
    ///   ``CloudError/Code-swift.struct/notAuthenticated`` while syncing waits for the account (see
    ///   ``PauseReason/notAuthenticated``), or with no account; ``CloudError/Code-swift.struct/networkUnavailable``
    ///   offline; the server's other failures otherwise, which a later call may not meet.
    public func data<Value: SyncableRecord>(of asset: CloudAsset, in value: Value) async throws -> Data {
        try await data(of: asset, inRecord: Value.recordID(value.id))
    }

    /// ``data(of:in:)`` for the record `id`.
    func data(of asset: CloudAsset, inRecord id: RecordID) async throws -> Data {
        if asset.localFile != nil { return try localStore.localData(of: asset) }
        // As for a push or a fetch: while the host has not named the account, the transport may be signed
        // in as someone else.
        guard !waitsForTheAccount, let transport = account?.transport else {
            throw CloudError(
                .notAuthenticated,
                "No account is signed in to download the \(asset) from: name it with accountDidChange(to:).")
        }
        do {
            return try await transport.downloadAsset(asset)
        } catch let error as CloudError where error.code == .unknownItem {
            // The link may have expired: the record's copy on the server carries a fresh one.
            guard let record = try await transport.lookupRecords([id])[id] else {
                throw CloudError(.unknownItem, "The record \(id) that held the \(asset) is gone from the server.")
            }
            guard let fresh = record.fields.values.lazy.compactMap(CloudAsset.init).first(where: { $0 == asset })
            else {
                throw CloudError(.unknownItem, "The record \(id) no longer holds the \(asset).")
            }
            return try await transport.downloadAsset(fresh)
        }
    }

    /// Before a batch goes out: a save that creates its record anew and holds assets the server returned.
    /// That happens when another device deleted the record (or the owner it belongs to) while this one
    /// edited it, and the edit wins, or when the server lost the zone. CloudKit takes a description back
    /// only from an upload, or from `assets/rereference` of a record that exists, so the record would go
    /// without them. Their bytes are downloaded instead, while the server may still have them, kept as
    /// assets made on this device, and uploaded with the new record.
    ///
    /// Bytes the server no longer gives (`unknownItem`, or over ``LocalStore/maximumAssetSize``) are
    /// reported as an error event, and the record goes without them, as it would have. Returns a stop when a
    /// download or the file failed for a reason a retry may fix: the batch then waits, rather than lose them.
    func keepServerAssets(of batch: [RecordChange], via transport: any CloudTransport) async -> Stop? {
        for (id, field, asset) in await localStore.serverAssetsToKeep(in: batch) {
            let local: CloudAsset?
            do {
                local = try await localStore.makeAsset(try await transport.downloadAsset(asset))
            } catch let error as CloudError where error.code == .unknownItem {
                local = nil
                emit(
                    .error(
                        SyncProblem(
                            .serverError(.unknownItem), zone: id.zone,
                            message: "The record \(id.name) comes back as new (the server no longer has it, and this "
                                + "device's edit wins), but the server no longer gives the bytes of its \(field) "
                                + "(\(error.message)): it is sent without them.")))
            } catch let error as FlatSyncError where error.code == .recordTooLarge {
                local = nil
                emit(
                    .error(
                        SyncProblem(
                            .deviceError(.recordTooLarge), zone: id.zone,
                            message: "The record \(id.name) comes back as new, but its \(field) is larger than "
                                + "FlatSync uploads (\(error.message)): it is sent without it.")))
            } catch {
                return .from(error)
            }
            await localStore.replaceServerAsset(asset, in: id, field: field, with: local)
        }
        return nil
    }
}

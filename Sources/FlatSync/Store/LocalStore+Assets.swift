#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Assets made on this device: their bytes, one file each in the directory's `assets` folder, written
/// durably before the asset is handed out, so that a record saved with one never names bytes a crash lost.
extension LocalStore {
    /// The largest asset a device makes: 15 MB, as the CloudKit Web Services page on uploads says ("the
    /// maximum file size is 15 MB"; its limits page says 50 MB for an asset field, and which one the server
    /// holds an upload to is not known), taken as 15,000,000 bytes.
    public static let maximumAssetSize = 15_000_000

    /// The folder of asset files.
    package nonisolated var assetsDirectory: URL {
        directory.appendingPathComponent(Self.assetsFolderName, isDirectory: true)
    }

    /// Keeps `data` as an asset's bytes, durably, and returns the asset to put in a field of a value you
    /// save (see ``CloudAsset``). An asset no record holds when the store next opens is deleted then.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/recordTooLarge`` for more than ``maximumAssetSize``
    ///   bytes; ``FlatSyncError/Code-swift.struct/ioFailed`` when the file cannot be written;
    ///   ``FlatSyncError/Code-swift.struct/storeClosed`` once the store is closed.
    public nonisolated func makeAsset(_ data: Data) async throws -> CloudAsset {
        guard data.count <= Self.maximumAssetSize else {
            throw FlatSyncError(
                .recordTooLarge,
                "The asset is \(data.count) bytes; CloudKit Web Services uploads at most \(Self.maximumAssetSize).")
        }
        try await checkOpen()
        // Off the actor: an asset's write and flush may take a while, and nothing else here waits on it.
        let fileSystem = options.fileSystem
        try fileSystem.createDirectory(assetsDirectory.path)
        let name = UUID().uuidString.lowercased()
        try DurableFileWriter(fileSystem: fileSystem).write(data, to: assetsDirectory.appendingPathComponent(name))
        return CloudAsset(CloudAsset.localFieldValue(file: name, size: Int64(data.count)))!
    }

    /// The bytes of an asset made on this device.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/ioFailed`` when its file cannot be read, or is gone.
    package nonisolated func localData(of asset: CloudAsset) throws(FlatSyncError) -> Data {
        let path = assetPath(asset.localFile ?? "")
        guard let data = try options.fileSystem.readFile(path) else {
            throw FlatSyncError(.ioFailed, "The file of the \(asset) is gone.", path: path)
        }
        return data
    }

    /// The whole path of the asset file `name`.
    package nonisolated func assetPath(_ name: String) -> String {
        assetsDirectory.appendingPathComponent(name).path
    }

    /// True when the file of an asset made on this device is in the folder.
    package nonisolated func hasLocalFile(_ asset: CloudAsset) -> Bool {
        guard let name = asset.localFile, !name.contains("/"), name != "..", name != "." else { return false }
        return options.fileSystem.exists(assetPath(name))
    }

    /// The server's assets held by the records that saves among `changes` create anew (the server has no
    /// version of them: their change tags are unknown), by record and field: what ``SyncContext`` downloads
    /// and keeps as this device's own before sending them (see `SyncContext.keepServerAssets(of:via:)`).
    /// Lists of assets are not among them. Only a change whose own record holds an asset is looked at: the
    /// record is not built from memory for the others, so a push of records without assets pays one scan
    /// of each change's fields (an asset a fetch merged in after the change was made is missed, as before).
    package func serverAssetsToKeep(in changes: [RecordChange]) -> [(id: RecordID, field: String, asset: CloudAsset)] {
        var found: [(id: RecordID, field: String, asset: CloudAsset)] = []
        for change in changes where !change.isDelete && isHostRecord(change.recordID) {
            guard change.carriedRecord.fields.values.contains(where: CloudAsset.holdsAssets) else { continue }
            let id = change.recordID
            guard changeTag(for: id) == nil, let record = zones.record(for: id),
                record.fields.values.contains(where: CloudAsset.holdsAssets)
            else { continue }
            for (field, value) in record.fields.sorted(by: { $0.key < $1.key }) {
                guard let asset = CloudAsset(value), asset.localFile == nil else { continue }
                found.append((id, field, asset))
            }
        }
        return found
    }

    /// Puts `local` (an asset made on this device of the same bytes), or nothing, in place of the server's
    /// `asset` in `field` of the record `id`, in memory and in the next snapshot, as a fetch keeps the
    /// server's version: the change waiting to be sent stays as it is, and sends the record as memory holds
    /// it. A crash before the snapshot brings the server's description back, and the next push downloads it
    /// again (the file made for it goes at the next open). Nothing changes when the field no longer holds
    /// `asset` (the host saved meanwhile).
    package func replaceServerAsset(_ asset: CloudAsset, in id: RecordID, field: String, with local: CloudAsset?) {
        guard var record = zones.record(for: id), let held = record.fields[field]?.assetValue, held == asset,
            held.localFile == nil
        else { return }
        record.fields[field] = local?.fieldValue
        zones.store(record)
        stateDidChange(id.zone)
        recordChangeHub.emit(zone: id.zone, changed: [(record.type, id.name)])
    }

    /// `fields` with each asset made on this device carrying its file's whole path, for a transport to upload.
    package nonisolated func withAssetPaths(_ fields: [String: FieldValue]) -> [String: FieldValue] {
        guard fields.values.contains(where: CloudAsset.isLocal) else { return fields }
        var resolved = fields
        for (key, value) in fields {
            guard let asset = CloudAsset(value), let name = asset.localFile else { continue }
            resolved[key] = CloudAsset.localFieldValue(file: name, size: asset.size, path: assetPath(name))
        }
        return resolved
    }

    /// The name of the folder of asset files, in the store's directory.
    static let assetsFolderName = "assets"

    /// Deletes the asset files no record and no pending change names: assets made and never saved, or
    /// dropped since. Called as the store opens, before anything can name a new one; a folder that is
    /// missing or empty costs one directory read. Returns how many it deleted.
    ///
    /// Not while the directory holds the snapshot of a zone this run does not open (no store registers its
    /// type): its records are not read, and the assets they name must wait for a run that opens it.
    @discardableResult
    static func removeUnnamedAssets(
        in directory: URL, zones: ZoneStates, hostZones: [ZoneID], pending: PendingCommands, fileSystem: FileSystem
    ) -> Int {
        let folder = directory.appendingPathComponent(assetsFolderName, isDirectory: true)
        guard let names = try? fileSystem.contentsOfDirectory(folder.path), !names.isEmpty else { return 0 }
        let opened = Set((ZoneID.builtIn + hostZones).map(snapshotFileName))
        guard let stored = try? fileSystem.contentsOfDirectory(directory.path),
            !stored.contains(where: { $0.hasPrefix("zone-") && $0.hasSuffix(".plist") && !opened.contains($0) })
        else { return 0 }
        var named = Set<String>()
        func note(_ fields: [String: FieldValue]) {
            for value in fields.values where CloudAsset.isLocal(value) {
                if let file = CloudAsset(value)?.localFile { named.insert(file) }
            }
        }
        // Every zone memory holds: the built-in ones (a host type may live in the reading list's zone) and
        // every host zone, a zone no store registers included (the log's replay rebuilds it).
        for zone in Set(ZoneID.builtIn + hostZones).union(zones.hostZones.keys) {
            let table = zones.hostRecords(in: zone)
            for entry in table.entries { note(table.fields(of: entry).all) }
        }
        for command in pending.allCommands {
            for change in command.changes.values where !change.isDelete { note(change.carriedRecord.fields) }
        }
        var removed = 0
        for name in names where !named.contains(name) && !name.hasPrefix(DurableFileWriter.temporaryPrefix) {
            if (try? fileSystem.unlink(folder.appendingPathComponent(name).path)) != nil { removed += 1 }
        }
        DurableFileWriter.removeLeftoverTemporaryFiles(in: folder, fileSystem: fileSystem)
        return removed
    }
}

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

    /// True when `name`, read from a record or a field, names a file in a folder and nothing outside it.
    static func isPlainFileName(_ name: String) -> Bool {
        !name.contains("/") && name != ".." && name != "."
    }

    /// True when the file of an asset made on this device is in the folder.
    package nonisolated func hasLocalFile(_ asset: CloudAsset) -> Bool {
        guard let name = asset.localFile, Self.isPlainFileName(name) else { return false }
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

    // MARK: - Uploads: the server's name for bytes made here

    /// The folder of upload notes, in the store's directory: for an asset file made here and uploaded, a file
    /// of the same name holding the checksum the server gave the upload.
    static let uploadsFolderName = "asset-uploads"

    /// The folder of upload notes.
    package nonisolated var uploadsDirectory: URL {
        directory.appendingPathComponent(Self.uploadsFolderName, isDirectory: true)
    }

    /// After the server saved `sent` and answered `answer`: for each field where `sent` held an asset made
    /// on this device and the answer holds the server's description of it (a checksum, the same size), notes
    /// that checksum as the upload's (see ``keepingOwnUploads(_:)``). CloudKit's modify answer is a record
    /// dictionary (ModifyRecords.html), but whether it carries an asset field's description is not
    /// documented: a fetch of the version the save made notes it as well.
    package func noteUploads(sent: Record, answer: Record) {
        for (key, value) in sent.fields where CloudAsset.isLocal(value) {
            guard let mine = CloudAsset(value), let file = mine.localFile, let theirs = answer.fields[key]?.assetValue,
                let checksum = theirs.fileChecksum, theirs.size == mine.size
            else { continue }
            noteUpload(of: file, checksum: checksum)
        }
    }

    /// `changed`, records a fetch brought, with each server asset put back as this device's own where the
    /// record here holds, in the same field, an asset made on this device whose upload the server named
    /// so: the same bytes, which the device goes on reading from its own file (offline too, and without
    /// downloading what it uploaded) when another device's edit of the record's other fields arrives, until
    /// a version with other bytes does. The checksum is the server's name for the bytes and nothing more:
    /// how CloudKit computes it is not documented, and the test clouds number uploads. A version this
    /// device's own save made (its change tag, nothing pending) names the upload's checksum too, and is
    /// noted.
    package func keepingOwnUploads(_ changed: [Record]) -> [Record] {
        var result = changed
        for (index, record) in changed.enumerated() where isHostRecord(record.id) {
            guard record.fields.values.contains(where: CloudAsset.holdsAssets),
                let local = zones.record(for: record.id),
                local.type == record.type, local.fields.values.contains(where: CloudAsset.isLocal)
            else { continue }
            let ownVersion =
                record.changeTag != nil && record.changeTag == changeTag(for: record.id)
                && pending.latestChange(for: record.id) == nil
            for (key, value) in local.fields where CloudAsset.isLocal(value) {
                guard let mine = CloudAsset(value), let file = mine.localFile,
                    let theirs = record.fields[key]?.assetValue, let checksum = theirs.fileChecksum,
                    theirs.size == mine.size
                else { continue }
                if ownVersion { noteUpload(of: file, checksum: checksum) }
                if uploadedChecksum(of: file) == checksum { result[index].fields[key] = value }
            }
        }
        return result
    }

    /// Keeps `checksum` as the server's name for the bytes of the asset file `file`: in memory, and in a
    /// file for later runs. The file need not survive: a note lost (a failed write, a crash before the
    /// flush) costs one download of bytes this device has, once another device's version of the record
    /// arrives, and nothing else; so a failure here is told to no one.
    private func noteUpload(of file: String, checksum: String) {
        guard uploadedChecksums[file] != checksum, Self.isPlainFileName(file) else { return }
        uploadedChecksums[file] = checksum
        let fileSystem = options.fileSystem
        do {
            try fileSystem.createDirectory(uploadsDirectory.path)
            try DurableFileWriter(fileSystem: fileSystem).write(
                Data(checksum.utf8), to: uploadsDirectory.appendingPathComponent(file))
        } catch {
            // Costs a download later, as above.
        }
    }

    /// The checksum the server gave the upload of the asset file `file`, if this device noted one.
    private func uploadedChecksum(of file: String) -> String? {
        if let known = uploadedChecksums[file] { return known.isEmpty ? nil : known }
        guard Self.isPlainFileName(file),
            let data = try? options.fileSystem.readFile(uploadsDirectory.appendingPathComponent(file).path),
            !data.isEmpty
        else {
            uploadedChecksums[file] = ""  // none: not read again by every fetch
            return nil
        }
        let checksum = String(decoding: data, as: UTF8.self)
        uploadedChecksums[file] = checksum
        return checksum
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
        // The upload notes of the files that go, and of any gone before.
        let uploads = directory.appendingPathComponent(uploadsFolderName, isDirectory: true)
        if let notes = try? fileSystem.contentsOfDirectory(uploads.path), !notes.isEmpty {
            for note in notes where !named.contains(note) && !note.hasPrefix(DurableFileWriter.temporaryPrefix) {
                try? fileSystem.unlink(uploads.appendingPathComponent(note).path)
            }
            DurableFileWriter.removeLeftoverTemporaryFiles(in: uploads, fileSystem: fileSystem)
        }
        return removed
    }
}

extension SyncContext {
    /// Makes sure the server pushes changes of these zones to the account's devices, once per zone,
    /// remembered in `device.plist`; only zones known to exist are subscribed.
    ///
    /// Never stops sync: a failure is reported as an ``SyncEvent/error(_:)`` event and the zone stays
    /// unsubscribed, so the next ``start()`` or ``networkDidBecomeAvailable()`` tries again. Nothing is lost
    /// meanwhile, since every fetch finds every change; only pushes may not arrive. Subscriptions are never
    /// deleted.
    func ensureSubscribed(_ zones: [ZoneID], epoch: Int) async {
        let needed = zones.filter { preparedZones.contains($0) && !subscribedZones.contains($0) }
        // Paused for want of an account, the transport may be signed in as someone else: no request.
        guard !needed.isEmpty, epoch == accountEpoch, !isClosed, !waitsForTheAccount,
            let transport = account?.transport
        else { return }
        let names = needed.map(\.name).joined(separator: ", ")
        do {
            try await transport.subscribeToChanges(in: needed)
        } catch is CancellationError {
            return
        } catch {
            let reason = (error as? CloudError)?.message ?? (error as? FlatSyncError)?.message ?? "\(error)"
            let kind: SyncProblem.Kind =
                (error as? FlatSyncError).map { .deviceError($0.code) }
                ?? .serverError((error as? CloudError)?.code ?? .internalError)
            emit(
                .error(
                    SyncProblem(
                        kind,
                        message: "subscribing to changes in \(names) failed: \(reason). Pushes for them may not "
                            + "arrive; fetches still find every change, and the next start, or the network coming back, tries "
                            + "again.")))
            return
        }
        guard epoch == accountEpoch else { return }
        subscribedZones.formUnion(needed)
        do {
            try await savePreparedZones()
        } catch {
            // Kept in memory; after a restart the zones are subscribed once more, which changes nothing.
            emit(.error(.onDevice(error, message: "saving the subscribed zones failed: \(error)")))
        }
    }
}

/// Following a source of push notifications, for a host without APNs.
extension SyncContext {
    /// Follows `source`, such as `LongPollNotificationSource` (CloudKit's web courier, in
    /// `FlatSyncCloudKit`): each notification it yields is handled as ``handleRemoteNotification(_:)``
    /// handles it, until the context closes, follows another source, or is signed out.
    ///
    /// ```swift
    /// await context.follow(LongPollNotificationSource(transport: transport))
    /// ```
    ///
    /// A source that stops (it throws `CloudError` `notAuthenticated` when nobody is signed in) is reported
    /// as ``SyncEvent/error(_:)`` and followed again when ``accountDidChange(to:)`` names an account: a
    /// source asks the server for a push token of the session signed in when it starts, so a switch to
    /// another account restarts it too. A host whose accounts each have a transport of their own follows
    /// the new one's source instead. Pushes coalesce and can be missed, so a source also asks for whole
    /// fetches now and then (see ``CloudNotificationSource``); a notification that arrives while syncing
    /// is paused for want of an account fetches nothing. A stream that ends without an error, which a
    /// source should not do, is reported as ``CloudError/Code-swift.struct/internalError``.
    ///
    /// The reading holds the context, as its timers do: ``close()`` ends it.
    public func follow(_ source: any CloudNotificationSource) async {
        // Another call (`follow`, `accountDidChange`) may start reading while this one waits for the old
        // task: stop that too, so that the source read is the one kept.
        repeat { await stopFollowing() } while followTask != nil
        guard !isClosed else { return }
        followedSource = source
        startFollowing()
    }

    /// Starts reading ``followedSource``'s stream, unless it is read already or there is none.
    func startFollowing() {
        // Nobody signed in (or an account change under way): `accountDidChange(to:)` starts it.
        guard let source = followedSource, followTask == nil, !isClosed, account != nil else { return }
        followGeneration += 1
        let generation = followGeneration
        // Isolated to the context (it uses `self`): each notification is handled in the order it came.
        followTask = Task {
            do {
                for try await notification in source.notifications() {
                    guard generation == self.followGeneration else { return }
                    self.handleRemoteNotification(notification)
                }
                self.followEnded(nil, generation: generation)
            } catch {
                self.followEnded(error, generation: generation)
            }
        }
    }

    /// The stream of the source read since `generation` ended, with `error` if it threw.
    private func followEnded(_ error: (any Error)?, generation: UInt64) {
        guard generation == followGeneration else { return }
        followTask = nil
        guard !isClosed, !(error is CancellationError) else { return }
        let problem: SyncProblem
        switch error {
        case let error as CloudError:
            problem = SyncProblem(.serverError(error.code), message: "push notifications stopped: \(error.message)")
        case let error?:
            problem = .onDevice(error, message: "push notifications stopped: \(error)")
        case nil:
            problem = SyncProblem(.serverError(.internalError), message: "push notifications stopped: the source ended")
        }
        emit(.error(problem))
    }

    /// Stops reading the followed source's stream and waits until its task is done (a cancelled stream ends
    /// at once). The source is kept, to be followed again.
    func stopFollowing() async {
        followGeneration += 1
        let task = followTask
        followTask = nil
        task?.cancel()
        await task?.value
    }
}

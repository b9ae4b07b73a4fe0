/// A source of the server's push notifications, for a host that gets no APNs pushes (a command-line tool,
/// a server, Linux).
///
/// A host that gets APNs pushes calls ``SyncContext/handleRemoteNotification(userInfo:)`` from its push
/// handler and needs none of this. Otherwise the context follows a source
/// (``SyncContext/follow(_:)``), reading it until it closes:
///
/// ```swift
/// await context.follow(LongPollNotificationSource(transport: transport))
/// ```
///
/// Pushes coalesce and can be missed (a device that was offline gets only the last one, as APNs keeps one
/// notification per app), so a source also yields ``CloudNotification/wholeDatabase(_:)`` whenever one may have been
/// lost: after it connects or reconnects, and after every wait that ended without a notification.
public protocol CloudNotificationSource: Sendable {
    /// The notifications as they arrive. The sequence ends when the consuming task is cancelled; it throws
    /// only for a failure that waiting will not cure (nobody signed in).
    func notifications() -> AsyncThrowingStream<CloudNotification, any Error>
}

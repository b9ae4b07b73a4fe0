/// A source of the server's "these zones changed" signals, for a host that has no push notifications
/// (a command-line tool, a server, Linux).
///
/// A host that gets APNs pushes calls ``SyncContext/handleRemoteNotification(zones:)`` from its push
/// handler and needs none of this. Otherwise it can follow a source:
///
/// ```swift
/// let source = LongPollNotificationSource(transport: transport)
/// Task {
///     for try await zones in source.notifications() {
///         await context.handleRemoteNotification(zones: zones)
///     }
/// }
/// ```
public protocol CloudNotificationSource: Sendable {
    /// The zones named by each notification, as they arrive. The sequence ends when the consuming task is
    /// cancelled; it throws only for a failure that waiting will not cure (nobody signed in).
    func notifications() -> AsyncThrowingStream<[ZoneID], any Error>
}

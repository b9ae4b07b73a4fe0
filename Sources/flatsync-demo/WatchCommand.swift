import FlatSync
import FlatSyncCloudKit
import Foundation

/// `watch`: a device that stays in touch with a CloudKit Web Services endpoint (`cloud serve`, or CloudKit
/// itself). It syncs once (which also makes sure the server pushes changes of the zones), then receives
/// the server's pushes through a ``LongPollNotificationSource`` (a push token and its web courier, as
/// CloudKit JS does) and, for each notification, opens the device, hands the notification to the engine
/// (``SyncContext/handleRemoteNotification(_:)``), lets it fetch, and closes the device again. Between
/// notifications it holds no lock, so `save`, `sync` and the other commands work on the same device
/// meanwhile.
///
/// It prints one line per notification whose fetch brought changes; the whole-database fetches that follow
/// a quiet poll or a reconnection (pushes can be missed) stay silent when they find nothing.
struct WatchCommand {
    let device: URL
    let connection: CloudConnection
    let output: Output

    func run() async throws -> Demo.ExitStatus {
        guard case .service(let endpoint) = connection.location else {
            preconditionFailure("the parser lets watch take a URL cloud only")
        }
        let transport = try connection.serviceTransport(endpoint: endpoint, device: device)
        let account = try await connection.account(device: device)
        let first = try await syncRound(account: account, notification: nil)
        output.console.out(
            "watching \(endpoint.absoluteString) for \(device.path) (\(first.description)); Ctrl-C stops")

        let source = LongPollNotificationSource(transport: transport)
        return try await withThrowingTaskGroup(of: Demo.ExitStatus.self) { group in
            group.addTask {
                for try await notification in source.notifications() {
                    let tally: RoundTally
                    do {
                        tally = try await syncRound(account: account, notification: notification)
                    } catch let error as CloudError where error.code == .notAuthenticated {
                        throw error
                    } catch {
                        // The server may be restarting: the source reconnects and asks for a fetch then.
                        output.console.error("\(Self.time()) fetching failed (\(error)); waiting for the server")
                        continue
                    }
                    guard tally.changedSomething else { continue }
                    let cause = notification.reason == .gap ? "caught up" : "pushed"
                    output.console.out(
                        "\(Self.time()) \(tally.zonesChanged.map(\.name).joined(separator: ", ")) changed: "
                            + "\(tally.description) (\(cause))")
                }
                return .success
            }
            group.addTask {
                _ = await Interrupts.wait()
                return .success
            }
            let status = try await group.next() ?? .success
            group.cancelAll()
            output.console.out("stopped watching")
            return status
        }
    }

    /// Opens the device, syncs, hands the engine the notification (none on the first round), waits for what
    /// it fetches, closes, and returns what happened.
    private func syncRound(account: CloudAccount, notification: CloudNotification?) async throws -> RoundTally {
        let context = try await DeviceDirectory.open { () async throws -> SyncContext in
            try await SyncContext.open(directory: device, account: account, configuration: .demo)
        }
        let events = context.events()
        let counting = Task {
            var tally = RoundTally()
            for await event in events { tally.record(event) }
            return tally
        }
        do {
            try await context.start()
            if let notification { await context.handleRemoteNotification(notification) }
            await context.waitUntilIdle()
        } catch {
            try? await context.close()
            _ = await counting.value
            throw error
        }
        try await context.close()
        return await counting.value
    }

    private static func time() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: Date())
    }
}

/// What one round of `watch` did.
struct RoundTally: Sendable {
    var fetched = 0
    var deleted = 0
    var sent = 0
    /// The zones whose fetch brought changes or deletions, in order of arrival.
    var zonesChanged: [ZoneID] = []

    mutating func record(_ event: SyncEvent) {
        switch event {
        case .didFetch(let zone, let changed, let deleted):
            fetched += changed
            self.deleted += deleted
            if changed + deleted > 0, !zonesChanged.contains(zone) { zonesChanged.append(zone) }
        case .didSend(_, let saved, let deleted, _): sent += saved + deleted
        default: break
        }
    }

    /// True when the round fetched something.
    var changedSomething: Bool { !zonesChanged.isEmpty }

    var description: String { "fetched \(fetched), deleted \(deleted), sent \(sent)" }
}

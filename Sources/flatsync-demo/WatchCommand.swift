import FlatSync
import FlatSyncCloudKit
import Foundation

/// `watch`: a device that stays in touch with a `cloud serve` endpoint. It syncs once, then long-polls the
/// server's notification URL and, whenever zones changed, opens the device, hands the notification to the
/// engine (``SyncContext/handleRemoteNotification(zones:)``), lets it fetch, and closes the device again,
/// printing what arrived. Between notifications it holds no lock, so `save`, `sync` and the other
/// commands work on the same device meanwhile.
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
        let first = try await syncRound(account: account, notified: nil)
        output.console.out(
            "watching \(endpoint.absoluteString) for \(device.path) (\(first.description)); Ctrl-C stops")

        let source = LongPollNotificationSource(transport: transport)
        return try await withThrowingTaskGroup(of: Demo.ExitStatus.self) { group in
            group.addTask {
                for try await zones in source.notifications() {
                    let tally = try await syncRound(account: account, notified: zones)
                    output.console.out(
                        "\(Self.time()) \(zones.map(\.name).joined(separator: ", ")) changed: \(tally.description)")
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

    /// Opens the device, tells the engine what the server said changed (nothing on the first round),
    /// syncs, closes, and returns what happened.
    private func syncRound(account: CloudAccount, notified zones: [ZoneID]?) async throws -> RoundTally {
        let context = try await DeviceDirectory.open { () async throws -> SyncContext in
            try await SyncContext.open(directory: device, account: account)
        }
        let events = context.events()
        let counting = Task {
            var tally = RoundTally()
            for await event in events { tally.record(event) }
            return tally
        }
        do {
            if let zones { await context.handleRemoteNotification(zones: zones) }
            try await context.start()
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

    mutating func record(_ event: SyncEvent) {
        switch event {
        case .didFetch(_, let changed, let deleted):
            fetched += changed
            self.deleted += deleted
        case .didSend(_, let saved, let deleted, _): sent += saved + deleted
        default: break
        }
    }

    var description: String { "fetched \(fetched), deleted \(deleted), sent \(sent)" }
}

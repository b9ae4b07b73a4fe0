import FlatSync
import FlatSyncTesting
import Foundation

/// The `cloud` commands: what a person does to the shared cloud from outside any device — read its
/// counters, expire its change tokens, delete a zone as the user, inject faults — on a `DirectoryCloud`
/// directory, or through the administration endpoint of `cloud serve`.
///
/// They go through ``CloudAdministration``, whose calls are neither counted nor faulted, so `cloud stats`
/// shows only what the devices sent and `cloud faults --rate 0` works however faulty the cloud is.
struct CloudCommands {
    let location: CloudLocation
    let output: Output

    func run(_ command: DemoCommand) async throws -> Demo.ExitStatus {
        let cloud = try Self.administration(of: location)
        switch command {
        case .cloudStats:
            let counters = try await cloud.counters()
            let report = CloudStatsReport(
                requests: counters.requests, modifyRequests: counters.modifyRequests,
                recordsSaved: counters.recordsSaved, recordsDeleted: counters.recordsDeleted
            )
            let plan = try await cloud.faultPlan()
            try output.emit(report) { Self.describe(counters, faults: plan) }
        case .cloudExpireTokens:
            try await cloud.expireAllChangeTokens()
            try output.emit(CloudActionReport(done: "expire-tokens")) {
                "expired every change token: each device's next sync fetches every zone from the start, keeping its pending changes"
            }
        case .cloudDeleteZone(let zone):
            do {
                try await cloud.deleteZoneAsUser(zone)
            } catch let error as CloudError where error.code == .zoneNotFound {
                throw DemoFailure(
                    "cloud delete-zone failed: the cloud at \(location) has no \(zone) zone (no device has synced "
                        + "it yet, or it is already deleted); sync a device first"
                )
            }
            try output.emit(CloudActionReport(done: "delete-zone", zone: zone.name)) {
                "deleted \(zone) as the user: every device wipes it on its next sync"
            }
        case .cloudFaults(let rate, let seed):
            if rate == 0 {
                try await cloud.setFaultPlan(.none)
                try output.emit(CloudActionReport(done: "faults", rate: 0)) { "faults off: every request is served" }
            } else {
                let seed = seed ?? UInt64.random(in: 0...UInt64(Int64.max))
                try await cloud.setFaultPlan(.random(rate: rate, seed: seed))
                try output.emit(CloudActionReport(done: "faults", rate: rate, seed: seed)) {
                    "faults on: \(Self.percent(rate)) of requests fail or lose their response (seed \(seed)); "
                        + "`flatsync-demo cloud faults --rate 0` turns them off"
                }
            }
        default:
            preconditionFailure("\(command.name) is not a cloud command")
        }
        return .success
    }

    /// The administration of the cloud at `location`.
    static func administration(of location: CloudLocation) throws -> any CloudAdministration {
        switch location {
        case .directory(let directory):
            return try DirectoryCloud(directory: directory)
        case .service(let url):
            // The emulator's administration endpoint: CloudKit itself has none.
            return HTTPCloudAdministration(baseURL: url)
        }
    }

    private static func describe(_ counters: CloudCounters, faults plan: FaultPlan) -> String {
        var lines = [
            "requests         \(counters.requests)",
            "modify requests  \(counters.modifyRequests)",
            "records saved    \(counters.recordsSaved)",
            "records deleted  \(counters.recordsDeleted)",
            "records returned \(counters.recordsReturned)",
        ]
        let kinds = RequestKind.allCases.compactMap { kind in
            counters.requestsByKind[kind].map { "\(kind.rawValue) \($0)" }
        }
        if !kinds.isEmpty { lines.append("by kind          " + kinds.joined(separator: ", ")) }
        if counters.totalFaultsInjected > 0 {
            let faults = counters.faultsInjected.keys.sorted().map { "\($0) \(counters.faultsInjected[$0]!)" }
            lines.append("faults injected  \(counters.totalFaultsInjected): " + faults.joined(separator: ", "))
        }
        if let random = plan.random, random.rate > 0 {
            lines.append("faults           on: \(percent(random.rate)) of requests (seed \(random.seed))")
        } else {
            lines.append("faults           off")
        }
        return lines.joined(separator: "\n")
    }

    private static func percent(_ rate: Double) -> String {
        "\((rate * 100).formatted(.number.precision(.fractionLength(0...1))))%"
    }
}

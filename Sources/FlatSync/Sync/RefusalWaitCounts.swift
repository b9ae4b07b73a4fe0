/// How many pushes in a row waited on refusals that carried `retryAfter` (``SyncContext/refusalWaits`` by
/// record, ``SyncContext/requestRefusalWaits`` by zone), in the form `device.plist` keeps them.
struct RefusalWaitCounts: Equatable, Sendable {
    var records: [RecordID: Int] = [:]
    var requests: [ZoneID: Int] = [:]

    init(records: [RecordID: Int] = [:], requests: [ZoneID: Int] = [:]) {
        self.records = records
        self.requests = requests
    }

    /// The counts `file` holds (none in a file written before they were kept).
    init(_ file: DeviceFile) {
        for (zone, names) in file.refusalWaits ?? [:] {
            for (name, count) in names where count > 0 {
                records[RecordID(zone: ZoneID(zone), name: name)] = count
            }
        }
        for (zone, count) in file.requestRefusalWaits ?? [:] where count > 0 { requests[ZoneID(zone)] = count }
    }

    /// Puts the counts in `file`, leaving the keys out while there are none.
    func write(to file: inout DeviceFile) {
        var byZone: [String: [String: Int]] = [:]
        for (id, count) in records { byZone[id.zone.name, default: [:]][id.name] = count }
        file.refusalWaits = byZone.isEmpty ? nil : byZone
        file.requestRefusalWaits =
            requests.isEmpty ? nil : Dictionary(uniqueKeysWithValues: requests.map { ($0.key.name, $0.value) })
    }
}

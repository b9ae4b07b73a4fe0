import FlatSync
import Foundation

/// Runs arbitrary bytes through everything the CKWS transport does with a response body, for the
/// libFuzzer target `ckws-response` (`Sources/FlatSyncFuzzing`). Never traps on any input.
package enum CloudKitResponseFuzzing {
    package static func run(_ data: Data) {
        // As the body of a 200 of every operation.
        let zone = ZoneID("Fuzz")
        if let json = try? JSONValue.parse(data) {
            _ = try? CloudKitWire.ZonesResponse(json: json)
            _ = try? CloudKitWire.DatabaseChangesResponse(json: json)
            if let records = try? CloudKitWire.RecordsResponse(json: json) {
                for entry in records.records { _ = try? CloudKitWire.record(from: entry, in: zone) }
            }
            if let changes = try? CloudKitWire.ZoneChangesResponse(json: json) {
                for page in changes.zones {
                    for entry in page.records { _ = try? CloudKitWire.record(from: entry, in: zone) }
                }
            }
            _ = CloudKitWire.CurrentUser(json: json)
            _ = try? CloudKitWire.CourierPoll(json: json)
            _ = CloudKitWire.ErrorFields.of(json)
        }
        // As the body of an error of every status class, on a change fetch sent with a token.
        for status in [400, 421, 429, 500, 503] {
            let response = HTTPExchangeResponse(status: status, headers: ["Retry-After": "3"], body: data)
            let error = CloudKitErrorMapping.error(for: response, operation: .zoneChanges, sentChangeToken: true)
            precondition(!error.message.isEmpty, "an error without a message")
        }
    }
}

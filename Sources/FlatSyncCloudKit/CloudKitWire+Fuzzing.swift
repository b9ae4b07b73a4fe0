import FlatSync
import Foundation

/// Runs arbitrary bytes through everything the CKWS transport does with a response body, for the
/// libFuzzer target `ckws-response` (`Sources/FlatSyncFuzzing`). Never traps on any input.
package enum CloudKitResponseFuzzing {
    package static func run(_ data: Data) {
        // As the body of a 200 of every operation.
        let zone = ZoneID("Fuzz")
        _ = try? CloudKitWire.readBody(CloudKitWire.ZonesResponse.self, from: data)
        _ = try? CloudKitWire.readBody(CloudKitWire.DatabaseChangesResponse.self, from: data)
        if case .answer(let records)? = try? CloudKitWire.readBody(CloudKitWire.RecordsResponse.self, from: data) {
            for entry in records.records { _ = try? CloudKitWire.record(from: entry, in: zone) }
        }
        if case .answer(let changes)? = try? CloudKitWire.readBody(
            CloudKitWire.ZoneChangesResponse.self, from: data)
        {
            for page in changes.zones {
                for entry in page.records { _ = try? CloudKitWire.record(from: entry, in: zone) }
            }
        }
        _ = try? CloudKitWire.readBody(CloudKitWire.CurrentUser.self, from: data)
        _ = try? CloudKitWire.readBody(CloudKitWire.TokensCreateResponse.self, from: data)
        _ = try? CloudKitWire.readBody(CloudKitWire.SubscriptionsResponse.self, from: data)
        // As a web courier's notification, read as an iOS app's `userInfo` is.
        if let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
            _ = CloudNotification(userInfo: object)
        }
        _ = CloudKitWire.ErrorFields.of(body: data)
        // Walked with the reader's objects and arrays, the text gives what the tree parser parses, and is
        // refused when it refuses it.
        let tree = try? JSONValue.parse(data)
        let read = try? JSONValue.Reader.read(data) { try rebuilt(from: &$0) }
        precondition(tree == read, "the reader and the parser disagree")
        let skipped = (try? JSONValue.Reader.read(data) { try $0.skip() }) != nil
        precondition(skipped == (tree != nil), "skipping refuses what the parser refuses, and only that")
        // As the body of an error of every status class, on a change fetch sent with a token.
        for status in [400, 421, 429, 500, 503] {
            let response = HTTPExchangeResponse(status: status, headers: ["Retry-After": "3"], body: data)
            let error = CloudKitErrorMapping.error(for: response, operation: .zoneChanges, sentChangeToken: true)
            precondition(!error.message.isEmpty, "an error without a message")
        }
    }

    /// The next value, read through ``JSONValue/Reader``'s objects and arrays into a tree.
    package static func rebuilt(from reader: inout JSONValue.Reader) throws -> JSONValue {
        switch try reader.peek() {
        case .object:
            var members: [(key: String, value: JSONValue)] = []
            try reader.readObject { key, reader in members.append((key, try rebuilt(from: &reader))) }
            return .object(members)
        case .array:
            var elements: [JSONValue] = []
            try reader.readArray { reader in elements.append(try rebuilt(from: &reader)) }
            return .array(elements)
        case .string:
            return .string(try reader.string() ?? "")
        case .number, .bool, .null:
            return try reader.value()
        }
    }
}

import FlatSync
import FlatSyncCloudKit
import Foundation

// `/_admin/…`: the backing store's CloudAdministration over HTTP. Not CloudKit: never counted, never
// faulted, JSON through JSONEncoder/JSONDecoder of FlatSync's Codable types (the client is
// HTTPCloudAdministration).

extension CloudKitEmulator {
    private struct ZoneBody: Decodable {
        var zone: String?
    }

    private struct LimitBody: Decodable {
        var limit: Int?
    }

    /// `{"schema": CloudSchema}` or `{"schema": null}`.
    private struct SchemaBody: Codable {
        var schema: CloudSchema?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(schema, forKey: .schema)  // `null` rather than leaving the key out
        }
    }

    /// Serves one administration call.
    ///
    /// | request | answer |
    /// |---|---|
    /// | `GET counters` | ``CloudCounters`` |
    /// | `POST reset-counters` | `{}` |
    /// | `GET faults` | ``FaultPlan`` |
    /// | `POST faults` with a ``FaultPlan`` | `{}` |
    /// | `POST expire-tokens` with `{}` or `{"zone":"X"}` | `{}` |
    /// | `POST delete-zone` with `{"zone":"X"}` | `{}`, or 404 `ZONE_NOT_FOUND` |
    /// | `POST history-limit` with `{"limit":N}` or `{"limit":null}` | `{}` |
    /// | `GET schema` | `{"schema": CloudSchema or null}` |
    /// | `POST schema` with `{"schema": CloudSchema}` or `{"schema": null}` | `{}` |
    /// | `GET records?zone=X` | `[Record]` |
    /// | `GET subscriptions` | `[CloudSubscription]` |
    /// | `POST upload-asset` with the bytes | the ``FieldValue`` a save carries to attach them |
    /// | `POST expire-asset-links` | `{}`: download links given so far stop working |
    func admin(_ request: HTTPServerRequest, _ action: String) async -> HTTPServerReply {
        let getters = ["counters", "faults", "records", "schema", "subscriptions"]
        let posters = [
            "reset-counters", "faults", "expire-tokens", "delete-zone", "history-limit", "schema", "upload-asset",
            "expire-asset-links",
        ]
        guard getters.contains(action) || posters.contains(action) else {
            return .response(Self.errorResponse(404, "NOT_FOUND", "There is no administration call \(action)."))
        }
        let allowed = (getters.contains(action) ? ["GET"] : []) + (posters.contains(action) ? ["POST"] : [])
        guard allowed.contains(request.method) else {
            return methodNotAllowed(request, allowed: allowed.joined(separator: " or "))
        }
        do {
            switch (request.method, action) {
            case ("GET", "counters"):
                return try Self.encoded(try await backing.counters())
            case ("POST", "reset-counters"):
                try await backing.resetCounters()
            case ("GET", "faults"):
                return try Self.encoded(try await backing.faultPlan())
            case ("POST", "faults"):
                try await backing.setFaultPlan(try Self.decode(FaultPlan.self, request.body))
            case ("POST", "expire-tokens"):
                if let zone = try Self.decode(ZoneBody.self, request.body).zone {
                    try await backing.expireChangeTokens(in: ZoneID(zone))
                } else {
                    try await backing.expireAllChangeTokens()
                }
            case ("POST", "delete-zone"):
                guard let zone = try Self.decode(ZoneBody.self, request.body).zone, !zone.isEmpty else {
                    return .response(Self.errorResponse(400, "BAD_REQUEST", "delete-zone needs {\"zone\": name}."))
                }
                try await backing.deleteZoneAsUser(ZoneID(zone))
                push.notify([zone])
            case ("GET", "subscriptions"):
                return try Self.encoded(try await backing.subscriptions())
            case ("GET", "schema"):
                return try Self.encoded(SchemaBody(schema: try await backing.productionSchema()))
            case ("POST", "schema"):
                try await backing.setProductionSchema(try Self.decode(SchemaBody.self, request.body).schema)
            case ("POST", "upload-asset"):
                return try Self.encoded(try await backing.uploadAsset(request.body))
            case ("POST", "expire-asset-links"):
                assetLinks.expireAll()
            case ("POST", "history-limit"):
                let limit = try Self.decode(LimitBody.self, request.body).limit
                guard (limit ?? 0) >= 0 else {
                    return .response(Self.errorResponse(400, "BAD_REQUEST", "The history limit must not be negative."))
                }
                try await backing.setChangeHistoryLimit(limit)
            default:  // GET records
                guard let zone = request.queryValue("zone"), !zone.isEmpty else {
                    return .response(Self.errorResponse(400, "BAD_REQUEST", "records needs ?zone=name."))
                }
                return try Self.encoded(try await backing.records(in: ZoneID(zone)))
            }
            return Self.ok([:])
        } catch let error as CloudError {
            let (status, code) = CloudKitWireError.wire(error.code, guessedCodes: false)
            return .response(Self.errorResponse(status, code, error.message))
        } catch is DecodingError {
            return .response(Self.errorResponse(400, "BAD_REQUEST", "The body of \(action) is not the JSON it takes."))
        } catch {
            return .response(Self.errorResponse(500, "INTERNAL_ERROR", "\(action) failed: \(error)"))
        }
    }

    private static func encoded(_ value: some Encodable) throws -> HTTPServerReply {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return .response(
            HTTPServerResponse(
                status: 200, headers: [("Content-Type", "application/json; charset=utf-8")],
                body: try encoder.encode(value)))
    }

    /// Decodes a body; an empty body reads as `{}`.
    private static func decode<T: Decodable>(_ type: T.Type, _ body: Data) throws -> T {
        try JSONDecoder().decode(type, from: body.isEmpty ? Data("{}".utf8) : body)
    }
}

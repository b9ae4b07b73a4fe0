import FlatSync
import FlatSyncCloudKit
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``CloudAdministration`` of a ``CloudKitWebServicesServer`` from another process: its `/_admin/`
/// endpoints over HTTP (emulator-defined, not CloudKit). `flatsync-demo cloud stats --cloud URL` uses it.
///
/// Requests go through an `HTTPExchange`, by default `URLSessionExchange.shared`: one long-lived
/// ephemeral `URLSession` without cache or cookies, cancelled from another queue, with whole-second
/// timeouts, as Foundation on Linux needs.
///
/// Errors are `CloudError`s: `CloudError.Code.zoneNotFound` when
/// ``deleteZoneAsUser(_:)`` names no zone; `CloudError.Code.networkUnavailable` when the
/// server cannot be reached; `CloudError.Code.networkFailure` when the connection failed
/// midway; `CloudError.Code.internalError` with the server's reason otherwise.
public struct HTTPCloudAdministration: CloudAdministration {
    /// The server's address, such as `http://127.0.0.1:8080`.
    public let baseURL: URL
    /// How long one call may take (whole seconds, at least one).
    public var timeout: Duration
    private let http: any HTTPExchange

    /// Administration of the server at `baseURL`.
    public init(baseURL: URL, timeout: Duration = .seconds(30), http: any HTTPExchange = URLSessionExchange.shared) {
        self.baseURL = baseURL
        self.timeout = timeout
        self.http = http
    }

    /// Makes every change token minted so far fail with `CloudError.Code.changeTokenExpired`. Over HTTP, through
    /// the emulator's administration endpoint.
    public func expireAllChangeTokens() async throws {
        _ = try await send("POST", "expire-tokens", body: [String: String]())
    }

    /// Makes the change tokens minted so far for one zone fail with `CloudError.Code.changeTokenExpired`. Over
    /// HTTP, through the emulator's administration endpoint.
    public func expireChangeTokens(in zone: ZoneID) async throws {
        _ = try await send("POST", "expire-tokens", body: ["zone": zone.name])
    }

    /// Deletes a zone and its records as the user would from Settings. Over HTTP, through the emulator's
    /// administration endpoint.
    public func deleteZoneAsUser(_ zone: ZoneID) async throws {
        _ = try await send("POST", "delete-zone", body: ["zone": zone.name])
    }

    private struct SchemaBody: Codable {
        var schema: CloudSchema?

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(schema, forKey: .schema)  // `null` rather than leaving the key out
        }
    }

    /// Makes the server a production environment deployed with `schema` (`nil`: a development one). Over HTTP,
    /// through the emulator's administration endpoint.
    public func setProductionSchema(_ schema: CloudSchema?) async throws {
        _ = try await send("POST", "schema", body: SchemaBody(schema: schema))
    }

    /// The production schema the server enforces, or `nil` in development. Over HTTP, through the emulator's
    /// administration endpoint.
    public func productionSchema() async throws -> CloudSchema? {
        try decode(SchemaBody.self, try await send("GET", "schema")).schema
    }

    /// Replaces the fault plan (and restarts its random generator from the plan's seed). Over HTTP, through the
    /// emulator's administration endpoint.
    public func setFaultPlan(_ plan: FaultPlan) async throws {
        _ = try await send("POST", "faults", body: plan)
    }

    /// The fault plan as it stands: scripted faults already used up are gone. Over HTTP, through the emulator's
    /// administration endpoint.
    public func faultPlan() async throws -> FaultPlan {
        try decode(FaultPlan.self, try await send("GET", "faults"))
    }

    /// Sets how many record changes each zone keeps (`nil`: all). Over HTTP, through the emulator's administration
    /// endpoint.
    public func setChangeHistoryLimit(_ limit: Int?) async throws {
        struct Limit: Encodable {
            var limit: Int?
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(limit, forKey: .limit)  // `null` rather than leaving the key out
            }
            enum CodingKeys: String, CodingKey { case limit }
        }
        _ = try await send("POST", "history-limit", body: Limit(limit: limit))
    }

    /// What the server has served since it was created or the counters were reset. Over HTTP, through the
    /// emulator's administration endpoint.
    public func counters() async throws -> CloudCounters {
        try decode(CloudCounters.self, try await send("GET", "counters"))
    }

    /// Sets every counter back to zero. Over HTTP, through the emulator's administration endpoint.
    public func resetCounters() async throws {
        _ = try await send("POST", "reset-counters", body: [String: String]())
    }

    /// The records the server holds in `zone`, sorted by name, with their change tags. Over HTTP, through the
    /// emulator's administration endpoint.
    public func records(in zone: ZoneID) async throws -> [Record] {
        let name = zone.name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? zone.name
        return try decode([Record].self, try await send("GET", "records", query: "zone=\(name)"))
    }

    /// The zone subscriptions the server holds, sorted by ID. Over HTTP, through the emulator's administration
    /// endpoint.
    public func subscriptions() async throws -> [CloudSubscription] {
        try decode([CloudSubscription].self, try await send("GET", "subscriptions"))
    }

    /// Stores bytes as another client's upload would and returns the field value its save carries to attach
    /// them. Over HTTP, through the emulator's administration endpoint.
    public func uploadAsset(_ data: Data) async throws -> FieldValue {
        try decode(FieldValue.self, try await exchange("POST", "upload-asset", query: nil, body: data))
    }

    /// Makes every asset download link the server has given stop working, as CloudKit's signed links do after
    /// a while. Over HTTP, through the emulator's administration endpoint.
    public func expireAssetLinks() async throws {
        _ = try await send("POST", "expire-asset-links", body: [String: String]())
    }

    // MARK: - Requests

    private func send(_ method: String, _ action: String, query: String? = nil) async throws -> Data {
        try await exchange(method, action, query: query, body: nil)
    }

    private func send(_ method: String, _ action: String, body: some Encodable) async throws -> Data {
        let data: Data
        do {
            data = try JSONEncoder().encode(body)
        } catch {
            throw CloudError(.invalidArguments, "The \(action) request cannot be encoded: \(error)")
        }
        return try await exchange(method, action, query: nil, body: data)
    }

    private func exchange(_ method: String, _ action: String, query: String?, body: Data?) async throws -> Data {
        var text = baseURL.absoluteString
        while text.hasSuffix("/") { text.removeLast() }
        text += "/_admin/\(action)" + (query.map { "?\($0)" } ?? "")
        guard let url = URL(string: text) else {
            throw CloudError(.invalidArguments, "\(text) is not a URL.")
        }
        let request = HTTPExchangeRequest(
            method: method, url: url,
            headers: body == nil ? [:] : ["Content-Type": "application/json; charset=utf-8"], body: body,
            timeout: timeout)
        let response: HTTPExchangeResponse
        do {
            response = try await http.send(request)
        } catch let error as URLError {
            throw Self.error(for: error, action: action)
        }
        guard response.status == 200 else {
            let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]
            let code = object?["serverErrorCode"] as? String
            let reason = object?["reason"] as? String ?? "HTTP \(response.status)"
            throw CloudError(
                code == "ZONE_NOT_FOUND" ? .zoneNotFound : .internalError,
                "The emulator refused \(action): \(reason)", serverErrorCode: code)
        }
        return response.body
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch {
            throw CloudError(.internalError, "The emulator's answer could not be read as \(T.self): \(error)")
        }
    }

    private static func error(for error: URLError, action: String) -> any Error {
        switch error.code {
        case .cancelled:
            return CancellationError()
        case .cannotConnectToHost, .cannotFindHost, .notConnectedToInternet, .dnsLookupFailed:
            return CloudError(
                .networkUnavailable, "Could not reach the emulator for \(action) (URLError \(error.code.rawValue)).")
        default:
            return CloudError(
                .networkFailure, "The \(action) request to the emulator failed (URLError \(error.code.rawValue)).")
        }
    }
}

import FlatSync
import FlatSyncCloudKit
import FlatSyncTesting
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Runs `body` with a started emulator over `backing` (a fresh InMemoryCloud by default), and stops the
/// emulator afterwards whatever `body` did.
func withEmulator(
    backing: (any CloudDatabaseServing)? = nil,
    options: CloudKitWebServicesServer.Options = .init(),
    _ body: (CloudKitWebServicesServer, WireClient) async throws -> Void
) async throws {
    let server: CloudKitWebServicesServer
    if let backing {
        server = try CloudKitWebServicesServer(serving: backing, options: options)
    } else {
        server = try CloudKitWebServicesServer(options: options)
    }
    do {
        try await body(server, WireClient(baseURL: server.baseURL))
    } catch {
        await server.stop()
        throw error
    }
    await server.stop()
}

/// A response as a test reads it.
struct WireResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data

    func header(_ name: String) -> String? {
        headers.first { $0.key.lowercased() == name.lowercased() }?.value
    }

    /// The body as a JSON object (empty when it is not one).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
    }

    /// The rotated web auth token.
    var webAuthToken: String? { header("X-Apple-CloudKit-Web-Auth-Token") }
}

/// Sends raw CKWS JSON to the emulator with `URLSession` (through FlatSync's `URLSessionExchange`, which
/// adds nothing to the body), independent of the transport's wire types.
struct WireClient: Sendable {
    let baseURL: URL
    var container = "iCloud.dev.flatsync.tests"
    var environment = "development"
    var apiToken: String? = "test-api-token"

    /// The URL of `operation` with the tokens in the query, percent-encoded by hand.
    func url(_ operation: String, database: String = "private", webAuthToken: String? = nil) -> URL {
        var query: [String] = []
        if let apiToken { query.append("ckAPIToken=" + Self.escape(apiToken)) }
        if let webAuthToken { query.append("ckWebAuthToken=" + Self.escape(webAuthToken)) }
        let root = operation.hasPrefix("tokens/") ? "device" : "database"
        let databasePart = root == "device" ? "" : "/\(database)"
        return URL(
            string: "\(baseURL.absoluteString)/\(root)/1/\(container)/\(environment)\(databasePart)/\(operation)?"
                + query.joined(separator: "&"))!
    }

    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
    }

    /// POSTs `body` (a JSON object, or raw bytes) to a CKWS operation.
    @discardableResult
    func post(_ operation: String, _ body: Any, database: String = "private", webAuthToken: String? = nil)
        async throws -> WireResponse
    {
        let data = try (body as? Data) ?? JSONSerialization.data(withJSONObject: body)
        return try await send("POST", url(operation, database: database, webAuthToken: webAuthToken), body: data)
    }

    /// GETs a CKWS operation.
    func get(_ operation: String, database: String = "private", webAuthToken: String? = nil) async throws
        -> WireResponse
    {
        try await send("GET", url(operation, database: database, webAuthToken: webAuthToken))
    }

    /// Sends any request to the emulator.
    func send(_ method: String, _ url: URL, body: Data? = nil, timeout: Duration = .seconds(20)) async throws
        -> WireResponse
    {
        let response = try await URLSessionExchange.shared.send(
            HTTPExchangeRequest(
                method: method, url: url, headers: body == nil ? [:] : ["Content-Type": "application/json"],
                body: body, timeout: timeout))
        return WireResponse(status: response.status, headers: response.headers, body: response.body)
    }

    /// Sends a request to a path of the emulator (with its query, if any).
    func send(_ method: String, path: String, body: Data? = nil, timeout: Duration = .seconds(20)) async throws
        -> WireResponse
    {
        try await send(method, URL(string: baseURL.absoluteString + path)!, body: body, timeout: timeout)
    }

    // MARK: - Shortcuts

    @discardableResult
    func createZones(_ names: [String]) async throws -> WireResponse {
        try await post(
            "zones/modify",
            ["operations": names.map { ["operationType": "create", "zone": ["zoneID": ["zoneName": $0]]] }])
    }

    /// `subscriptions/modify` creating a zone subscription for `zone` (ID `sub-<zone>` unless given), as a
    /// silent push.
    @discardableResult
    func subscribe(_ zone: String, id: String? = nil) async throws -> WireResponse {
        let response = try await post(
            "subscriptions/modify",
            [
                "operations": [
                    [
                        "operationType": "create",
                        "subscription": [
                            "subscriptionID": id ?? "sub-\(zone)", "subscriptionType": "zone",
                            "zoneID": ["zoneName": zone], "notificationInfo": ["shouldSendContentAvailable": true],
                        ] as [String: Any],
                    ] as [String: Any]
                ]
            ])
        #expect(response.status == 200)
        return response
    }

    /// `records/modify` in `zone` with `operations` (each `[operationType, record]`).
    @discardableResult
    func modify(_ zone: String, _ operations: [[String: Any]], atomic: Bool? = nil) async throws -> WireResponse {
        var body: [String: Any] = ["operations": operations, "zoneID": ["zoneName": zone]]
        if let atomic { body["atomic"] = atomic }
        return try await post("records/modify", body)
    }
}

/// One `records/modify` operation.
func operation(
    _ type: String, _ name: String, tag: String? = nil, fields: [String: Any]? = nil, recordType: String = "Note"
)
    -> [String: Any]
{
    var record: [String: Any] = ["recordName": name]
    if !type.lowercased().hasSuffix("delete") {
        record["recordType"] = recordType
        record["fields"] = fields ?? ["title": ["value": name, "type": "STRING"]]
    }
    if let tag { record["recordChangeTag"] = tag }
    return ["operationType": type, "record": record]
}

extension [String: Any] {
    /// The array at `key` as JSON objects.
    func objects(_ key: String) -> [[String: Any]] {
        self[key] as? [[String: Any]] ?? []
    }

    /// The object at `key`.
    func object(_ key: String) -> [String: Any] {
        self[key] as? [String: Any] ?? [:]
    }
}

/// The keys of a record entry the emulator sends for a saved record.
let recordKeys: Set<String> = [
    "recordName", "recordType", "recordChangeTag", "fields", "zoneID", "created", "modified", "deleted",
]

import FlatSync
import Foundation

/// A response type read from JSON; a missing key a type needs is a ``CloudKitWire/FieldProblem``.
protocol JSONReadable {
    init(json: JSONValue) throws(CloudKitWire.FieldProblem)
}

/// A request type written as JSON.
protocol JSONWritable {
    func write(to writer: inout JSONValue.Writer) throws(CloudKitWire.FieldProblem)
}

/// The JSON of CloudKit Web Services as ``CloudKitWebServicesTransport`` sends and reads it.
///
/// Shapes follow Apple's CloudKit Web Services Reference (2016) plus what other clients observed against
/// the live server; where a shape is a guess, the comment says so. Every key a response may lack is
/// optional here, so a response that lacks one is reported as
/// `CloudError.Code.unexpectedServerResponse` by the code that needs it, never a crash.
/// Keys a response may carry that FlatSync does not use are ignored.
enum CloudKitWire {
    /// Why a field cannot be sent, or a response cannot be read.
    struct FieldProblem: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// `{"zoneName": …, "ownerRecordName": …}`; responses may add `zoneType`.
    struct ZoneID: Hashable, JSONReadable {
        var zoneName: String

        init(_ zone: FlatSync.ZoneID) {
            zoneName = zone.name
        }

        init(json: JSONValue) throws(FieldProblem) {
            guard let name = json["zoneName"]?.stringValue else { throw FieldProblem("a zoneID has no zoneName") }
            zoneName = name
        }

        func write(to writer: inout JSONValue.Writer) {
            writer.object { $0.member("zoneName") { $0.string(zoneName) } }
        }
    }

    /// The keys of an error: a whole request's (the body of a non-200 response) or one item's (a record
    /// or a zone inside a 200). `retryAfter` is in seconds (Apple does not say; every client assumes it).
    struct ErrorFields: Hashable, JSONReadable {
        var serverErrorCode: String?
        var reason: String?
        var retryAfter: Double?
        var redirectURL: String?

        init(serverErrorCode: String?, reason: String? = nil, retryAfter: Double? = nil, redirectURL: String? = nil) {
            self.serverErrorCode = serverErrorCode
            self.reason = reason
            self.retryAfter = retryAfter
            self.redirectURL = redirectURL
        }

        init(json: JSONValue) {
            serverErrorCode = json["serverErrorCode"]?.stringValue
            reason = json["reason"]?.stringValue
            retryAfter = json["retryAfter"]?.doubleValue
            redirectURL = json["redirectURL"]?.stringValue
        }

        /// The error keys of an item, when it is an error.
        static func of(_ json: JSONValue) -> ErrorFields? {
            guard json["serverErrorCode"]?.stringValue != nil else { return nil }
            return ErrorFields(json: json)
        }
    }

    /// A list under `key` (missing or null: empty), each element read as `Element`.
    static func list<Element: JSONReadable>(_ json: JSONValue, _ key: String) throws(FieldProblem) -> [Element] {
        guard let value = json[key], value != .null else { return [] }
        guard let elements = value.arrayValue else { throw FieldProblem("\(key) is not a list") }
        var result: [Element] = []
        result.reserveCapacity(elements.count)
        for element in elements { result.append(try Element(json: element)) }
        return result
    }

    // MARK: - Zones

    /// An entry of `zones/list`, `zones/modify` and `changes/database`: a zone, a deleted zone, or an error.
    struct ZoneEntry: JSONReadable {
        var zoneID: ZoneID?
        var deleted: Bool?
        /// Not documented: the emulator's mark of a zone the user deleted. Apple documents no such flag.
        var purged: Bool?
        var error: ErrorFields?

        init(json: JSONValue) throws(FieldProblem) {
            guard json.isObject else { throw FieldProblem("a zone entry is not an object") }
            zoneID = try json["zoneID"].map { (value) throws(FieldProblem) in try ZoneID(json: value) }
            deleted = json["deleted"]?.boolValue
            purged = json["purged"]?.boolValue
            error = ErrorFields.of(json)
        }
    }

    struct ZonesResponse: JSONReadable {
        var zones: [ZoneEntry]
        init(json: JSONValue) throws(FieldProblem) {
            guard json["zones"] != nil else { throw FieldProblem("the key zones is missing") }
            zones = try list(json, "zones")
        }
    }

    struct ZonesModifyRequest: JSONWritable {
        var operationType: String
        var zones: [FlatSync.ZoneID]

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                request.member("operations") {
                    $0.array(zones) { writer, zone in
                        writer.object {
                            $0.member("operationType") { $0.string(operationType) }
                            $0.member("zone") { $0.object { $0.member("zoneID") { ZoneID(zone).write(to: &$0) } } }
                        }
                    }
                }
            }
        }
    }

    struct DatabaseChangesRequest: JSONWritable {
        var syncToken: String?

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                if let syncToken { request.member("syncToken") { $0.string(syncToken) } }
            }
        }
    }

    struct DatabaseChangesResponse: JSONReadable {
        var zones: [ZoneEntry]
        var syncToken: String?
        var moreComing: Bool?

        init(json: JSONValue) throws(FieldProblem) {
            guard json["zones"] != nil else { throw FieldProblem("the key zones is missing") }
            zones = try list(json, "zones")
            syncToken = json["syncToken"]?.stringValue
            moreComing = json["moreComing"]?.boolValue
        }
    }

    // MARK: - Records

    struct ZoneChangesRequest: JSONWritable {
        var zone: FlatSync.ZoneID
        /// Sent even when empty: an empty token is a token the server must refuse, not "from the start".
        var syncToken: String?
        var resultsLimit: Int

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                request.member("zones") {
                    $0.array([zone]) { writer, zone in
                        writer.object {
                            $0.member("zoneID") { ZoneID(zone).write(to: &$0) }
                            if let syncToken { $0.member("syncToken") { $0.string(syncToken) } }
                            $0.member("resultsLimit") { $0.int(Int64(resultsLimit)) }
                        }
                    }
                }
                request.member("resultsLimit") { $0.int(Int64(resultsLimit)) }
            }
        }
    }

    struct ZoneChangesResponse: JSONReadable {
        struct Zone: JSONReadable {
            var zoneID: ZoneID?
            var records: [RecordEntry]
            var syncToken: String?
            /// "Sometimes null" in live responses: missing means false.
            var moreComing: Bool?
            var error: ErrorFields?

            init(json: JSONValue) throws(FieldProblem) {
                guard json.isObject else { throw FieldProblem("a zone entry is not an object") }
                zoneID = try json["zoneID"].map { (value) throws(FieldProblem) in try ZoneID(json: value) }
                records = try list(json, "records")
                syncToken = json["syncToken"]?.stringValue
                moreComing = json["moreComing"]?.boolValue
                error = ErrorFields.of(json)
            }
        }
        var zones: [Zone]

        init(json: JSONValue) throws(FieldProblem) {
            guard json["zones"] != nil else { throw FieldProblem("the key zones is missing") }
            zones = try list(json, "zones")
        }
    }

    /// An entry of a `records` array in a response: a record, a deleted record (`deleted: true`, maybe
    /// with nothing but its name), or an error for one record.
    struct RecordEntry: JSONReadable {
        var recordName: String?
        var recordType: String?
        var recordChangeTag: String?
        var fields: [String: FieldValue]
        /// The writer's device ID as `modified.deviceID` reports it.
        var modifiedBy: String?
        var deleted: Bool?
        var error: ErrorFields?

        init(json: JSONValue) throws(FieldProblem) {
            guard json.isObject else { throw FieldProblem("a record entry is not an object") }
            recordName = json["recordName"]?.stringValue
            recordType = json["recordType"]?.stringValue
            recordChangeTag = json["recordChangeTag"]?.stringValue
            modifiedBy = json["modified"]?["deviceID"]?.stringValue
            deleted = json["deleted"]?.boolValue
            error = ErrorFields.of(json)
            fields = [:]
            if case .object(let members)? = json["fields"] {
                fields.reserveCapacity(members.count)
                for (key, field) in members {
                    do throws(FieldProblem) {
                        if let value = try Field.value(of: field) { fields[key] = value }
                    } catch {
                        throw FieldProblem("field \(key) of \(recordName ?? "a record"): \(error.description)")
                    }
                }
            }
        }
    }

    struct RecordsResponse: JSONReadable {
        var records: [RecordEntry]
        init(json: JSONValue) throws(FieldProblem) {
            guard json["records"] != nil else { throw FieldProblem("the key records is missing") }
            records = try list(json, "records")
        }
    }

    /// One `records/modify` operation: its type and record (a save's whole record, a delete's name and tag).
    struct RecordOperation {
        var operationType: String
        var recordName: String
        var recordType: String?
        var recordChangeTag: String?
        var fields: [String: FieldValue]?
    }

    struct RecordsModifyRequest: JSONWritable {
        var operations: [RecordOperation]
        var zone: FlatSync.ZoneID
        var atomic: Bool

        func write(to writer: inout JSONValue.Writer) throws(FieldProblem) {
            var problem: FieldProblem?
            writer.object { request in
                request.member("operations") {
                    $0.array(operations) { writer, operation in
                        writer.object { entry in
                            entry.member("operationType") { $0.string(operation.operationType) }
                            entry.member("record") {
                                $0.object { record in
                                    record.member("recordName") { $0.string(operation.recordName) }
                                    if let type = operation.recordType {
                                        record.member("recordType") { $0.string(type) }
                                    }
                                    if let tag = operation.recordChangeTag {
                                        record.member("recordChangeTag") { $0.string(tag) }
                                    }
                                    guard let fields = operation.fields else { return }
                                    record.member("fields") {
                                        $0.object { object in
                                            for (key, value) in fields {
                                                object.member(key) {
                                                    do throws(FieldProblem) {
                                                        try Field.write(value, to: &$0)
                                                    } catch {
                                                        problem =
                                                            problem
                                                            ?? FieldProblem(
                                                                "field \(key) of \(operation.recordName): \(error.description)"
                                                            )
                                                        $0.bool(false)
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                request.member("zoneID") { ZoneID(zone).write(to: &$0) }
                request.member("atomic") { $0.bool(atomic) }
            }
            if let problem { throw problem }
        }
    }

    struct RecordsLookupRequest: JSONWritable {
        var names: [String]
        var zone: FlatSync.ZoneID

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                request.member("records") {
                    $0.array(names) { writer, name in writer.object { $0.member("recordName") { $0.string(name) } } }
                }
                request.member("zoneID") { ZoneID(zone).write(to: &$0) }
            }
        }
    }

    // MARK: - Users and push

    struct CurrentUser: JSONReadable {
        var userRecordName: String?
        var firstName: String?
        var lastName: String?

        init(json: JSONValue) {
            userRecordName = json["userRecordName"]?.stringValue
            firstName = json["firstName"]?.stringValue
            lastName = json["lastName"]?.stringValue
        }
    }

    struct TokensCreateRequest: JSONWritable {
        var apnsEnvironment: String

        func write(to writer: inout JSONValue.Writer) {
            writer.object { $0.member("apnsEnvironment") { $0.string(apnsEnvironment) } }
        }
    }

    struct TokensCreateResponse: JSONReadable {
        var webcourierURL: String?
        init(json: JSONValue) { webcourierURL = json["webcourierURL"]?.stringValue }
    }

    /// The emulator's long-poll answer: `{"zoneIDs":[{"zoneName":…}]}`.
    struct CourierPoll: JSONReadable {
        var zoneIDs: [ZoneID]
        init(json: JSONValue) throws(FieldProblem) {
            guard json["zoneIDs"] != nil else { throw FieldProblem("the key zoneIDs is missing") }
            zoneIDs = try list(json, "zoneIDs")
        }
    }
}

import FlatSync
import Foundation

/// A response type read from a JSON object member by member, in one pass (``JSONValue/Reader``); a missing
/// key a type needs is a ``CloudKitWire/FieldProblem``.
///
/// Reading throws only what the reader throws (text that is not JSON). A value that is not what a member
/// needs is kept as a problem and reported by ``finish(wasObject:)`` once the object was read whole, as a
/// tree of it would have been: so a key given twice means its last value even when the first could not be
/// used, and a body's error keys are found whatever else it holds.
protocol JSONReadable {
    /// Nothing read yet.
    init()
    /// Reads the value of the member `key` and returns true, or returns false without reading it for a key
    /// the type does not use. A key given twice means its last value.
    mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool
    /// Checks what was read once the object ended; `wasObject` is false when the value was no object.
    func finish(wasObject: Bool) throws(CloudKitWire.FieldProblem)
}

extension JSONReadable {
    func finish(wasObject: Bool) throws(CloudKitWire.FieldProblem) {}

    /// Reads the next value as this type: the value, or the problem that keeps it from being one once it
    /// was read whole. Throws what the reader throws.
    static func read(from reader: inout JSONValue.Reader) throws -> Result<Self, CloudKitWire.FieldProblem> {
        var value = Self()
        let wasObject = try reader.readObject { key, reader in
            if try !value.read(key, from: &reader) { try reader.skip() }
        }
        return Result { () throws(CloudKitWire.FieldProblem) in
            try value.finish(wasObject: wasObject)
            return value
        }
    }
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

    /// A response body: the answer, or the error keys a body may carry at its top level instead.
    enum Body<Answer> {
        case answer(Answer)
        case error(ErrorFields)
    }

    /// Reads a response body as `Answer` in one pass, with the error keys beside it: when the top level
    /// carries a `serverErrorCode` (a string), the body is that error, whatever else it holds. Throws
    /// ``JSONValue/ParseError`` for text that is not JSON, else ``FieldProblem`` for JSON that is not the
    /// answer.
    static func readBody<Answer: JSONReadable>(_ type: Answer.Type, from data: Data) throws -> Body<Answer> {
        var answer = Answer()
        var error = ErrorFields()
        let wasObject = try JSONValue.Reader.read(data) { reader in
            try reader.readObject { key, reader in
                if try !answer.read(key, from: &reader), try !error.read(key, from: &reader) { try reader.skip() }
            }
        }
        if error.isError { return .error(error) }
        try answer.finish(wasObject: wasObject)
        return .answer(answer)
    }

    /// `{"zoneName": …, "ownerRecordName": …}`; responses may add `zoneType`.
    struct ZoneID: Hashable, JSONReadable {
        /// Nil only while being read: a zone ID read without one is refused.
        private var name: String?
        var zoneName: String { name ?? "" }

        init(_ zone: FlatSync.ZoneID) {
            name = zone.name
        }

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            guard key == "zoneName" else { return false }
            name = try reader.string()
            return true
        }

        func finish(wasObject: Bool) throws(FieldProblem) {
            guard name != nil else { throw FieldProblem("a zoneID has no zoneName") }
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
        /// "A unique identifier for this error" (CloudKit JS's `CKError.uuid`; CKWS's error dictionaries carry
        /// it): what Apple's support can look up.
        var uuid: String?

        init(serverErrorCode: String?, reason: String? = nil, retryAfter: Double? = nil, redirectURL: String? = nil) {
            self.serverErrorCode = serverErrorCode
            self.reason = reason
            self.retryAfter = retryAfter
            self.redirectURL = redirectURL
        }

        init() {}

        /// True when the keys read name an error (a `serverErrorCode`).
        var isError: Bool { serverErrorCode != nil }

        /// These keys when they name an error, else nil.
        var ifError: ErrorFields? { isError ? self : nil }

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "serverErrorCode": serverErrorCode = try reader.string()
            case "reason": reason = try reader.string()
            case "retryAfter": retryAfter = try reader.double()
            case "redirectURL": redirectURL = try reader.string()
            case "uuid": uuid = try reader.string()
            default: return false
            }
            return true
        }

        /// The error a body holds at its top level, or nil when it holds none or is not JSON.
        static func of(body: Data) -> ErrorFields? {
            guard case .error(let fields)? = try? readBody(Nothing.self, from: body) else { return nil }
            return fields
        }

        /// A body that holds nothing but perhaps an error.
        private struct Nothing: JSONReadable {
            mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool { false }
        }
    }

    /// A list (null: empty), each element read as `Element`, or the first problem among them; `key` names
    /// it in a problem. Throws what the reader throws.
    static func list<Element: JSONReadable>(
        _ reader: inout JSONValue.Reader, _ key: String
    ) throws -> Result<[Element], FieldProblem> {
        switch try reader.peek() {
        case .null:
            try reader.skip()
            return .success([])
        case .array:
            var elements: [Element] = []
            var problem: FieldProblem?
            try reader.readArray { reader in
                switch try Element.read(from: &reader) {
                case .success(let element): elements.append(element)
                case .failure(let failure): problem = problem ?? failure
                }
            }
            return problem.map { .failure($0) } ?? .success(elements)
        default:
            try reader.skip()
            return .failure(FieldProblem("\(key) is not a list"))
        }
    }

    /// The name of the one list a ``ListResponse`` holds.
    protocol ListName {
        static var key: String { get }
        /// Whether a response without the key is read as an empty list. Apple's pages show these lists but
        /// never say an empty one is sent rather than left out (other clients default a missing one to
        /// empty), so where an empty list is harmless it is read either way.
        static var emptyWhenMissing: Bool { get }
    }

    /// `zones`: of `zones/list`, `zones/modify` and `changes/zone`. Required: a `zones/list` read as empty
    /// would say that every zone is gone.
    enum Zones: ListName {
        static let key = "zones"
        static let emptyWhenMissing = false
    }
    /// `records`: of `records/modify` and `records/lookup`. Required: an answer without them answers nothing.
    enum Records: ListName {
        static let key = "records"
        static let emptyWhenMissing = false
    }

    /// A response that is one list: `{"zones": […]}`, `{"records": […]}`; the key is required unless
    /// ``ListName/emptyWhenMissing``.
    struct ListResponse<Element: JSONReadable, Name: ListName>: JSONReadable {
        /// Nil until read.
        private var readList: Result<[Element], FieldProblem>?
        var elements: [Element] { (try? readList?.get()) ?? [] }
        /// Whether the response held the list's key.
        var isListed: Bool { readList != nil }

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            guard key == Name.key else { return false }
            readList = try list(&reader, key)
            return true
        }

        func finish(wasObject: Bool) throws(FieldProblem) {
            try finish(wasObject: wasObject, emptyWhenMissing: Name.emptyWhenMissing)
        }

        /// Checks the list, taking a missing key as an empty list if `emptyWhenMissing`.
        func finish(wasObject: Bool, emptyWhenMissing: Bool) throws(FieldProblem) {
            guard wasObject else { throw FieldProblem("the response is not an object") }
            guard let readList else {
                if emptyWhenMissing { return }
                throw FieldProblem("the key \(Name.key) is missing")
            }
            _ = try readList.get()
        }
    }

    // MARK: - Zones

    /// An entry of `zones/list`, `zones/modify` and `changes/database`: a zone, a deleted zone, or an error.
    struct ZoneEntry: JSONReadable {
        private var readZoneID: Result<ZoneID, FieldProblem>?
        var zoneID: ZoneID? { try? readZoneID?.get() }
        var deleted: Bool?
        /// Not documented: the emulator's mark of a zone the user deleted. Apple documents no such flag.
        var purged: Bool?
        var errorFields = ErrorFields()
        var error: ErrorFields? { errorFields.ifError }

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "zoneID": readZoneID = try ZoneID.read(from: &reader)
            case "deleted": deleted = try reader.bool()
            case "purged": purged = try reader.bool()
            default: return try errorFields.read(key, from: &reader)
            }
            return true
        }

        func finish(wasObject: Bool) throws(FieldProblem) {
            guard wasObject else { throw FieldProblem("a zone entry is not an object") }
            _ = try readZoneID?.get()
        }
    }

    typealias ZonesResponse = ListResponse<ZoneEntry, Zones>

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
        private var listed = ZonesResponse()
        var zones: [ZoneEntry] { listed.zones }
        /// Whether the answer held `zones` (an answer to a request without a token must: see
        /// `fetchDatabaseChanges(since:)`).
        var listsZones: Bool { listed.isListed }
        var syncToken: String?
        var moreComing: Bool?

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "syncToken": syncToken = try reader.string()
            case "moreComing": moreComing = try reader.bool()
            default: return try listed.read(key, from: &reader)
            }
            return true
        }

        /// A missing `zones` reads as an empty list here: whether that may stand for "no zone changed" depends
        /// on the request, so ``listsZones`` lets the transport refuse it for a listing from no token.
        func finish(wasObject: Bool) throws(FieldProblem) {
            try listed.finish(wasObject: wasObject, emptyWhenMissing: true)
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

    typealias ZoneChangesResponse = ListResponse<ZoneChangesPage, Zones>

    /// One zone's page of `changes/zone`: its changed and deleted records, or its error.
    struct ZoneChangesPage: JSONReadable {
        /// The page's zone and error, read as a zone entry's.
        private var entry = ZoneEntry()
        var zoneID: ZoneID? { entry.zoneID }
        var error: ErrorFields? { entry.error }
        private var readRecords: Result<[RecordEntry], FieldProblem> = .success([])
        var records: [RecordEntry] { (try? readRecords.get()) ?? [] }
        var syncToken: String?
        /// "Sometimes null" in live responses: missing means false.
        var moreComing: Bool?

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "records": readRecords = try list(&reader, key)
            case "syncToken": syncToken = try reader.string()
            case "moreComing": moreComing = try reader.bool()
            default: return try entry.read(key, from: &reader)
            }
            return true
        }

        func finish(wasObject: Bool) throws(FieldProblem) {
            try entry.finish(wasObject: wasObject)
            _ = try readRecords.get()
        }
    }

    /// An entry of a `records` array in a response: a record, a deleted record (`deleted: true`, maybe
    /// with nothing but its name), or an error for one record.
    struct RecordEntry: JSONReadable {
        var recordName: String?
        var recordType: String?
        var recordChangeTag: String?
        var fields: [String: FieldValue] = [:]
        var deleted: Bool?
        var errorFields = ErrorFields()
        var error: ErrorFields? { errorFields.ifError }

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "recordName": recordName = try reader.string()
            case "recordType": recordType = try reader.string()
            case "recordChangeTag": recordChangeTag = try reader.string()
            case "deleted": deleted = try reader.bool()
            case "fields":
                fields = [:]
                try reader.readObject { key, reader in
                    if let value = try Field.read(from: &reader) { fields[key] = value }
                }
            default: return try errorFields.read(key, from: &reader)
            }
            return true
        }

        func finish(wasObject: Bool) throws(FieldProblem) {
            guard wasObject else { throw FieldProblem("a record entry is not an object") }
        }
    }

    typealias RecordsResponse = ListResponse<RecordEntry, Records>

    /// One `records/modify` operation: its type and record (a save's whole record, a delete's name and tag).
    struct RecordOperation {
        var operationType: String
        var recordName: String
        var recordType: String?
        var recordChangeTag: String?
        var fields: [String: FieldValue]?
        /// The declared type of each field, where the transport has a schema (lists go out with it).
        var types: [String: CloudSchema.FieldType] = [:]
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
                                                        try Field.write(
                                                            value, declared: operation.types[key], to: &$0)
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

    /// `assets/upload`: `{"zoneID", "tokens": [{"recordName", "recordType", "fieldName"}]}` (UploadAssets.html).
    struct AssetUploadRequest: JSONWritable {
        var zone: FlatSync.ZoneID
        var tokens: [(recordName: String, recordType: String, fieldName: String)]

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                request.member("tokens") {
                    $0.array(tokens) { writer, token in
                        writer.object {
                            $0.member("fieldName") { $0.string(token.fieldName) }
                            $0.member("recordName") { $0.string(token.recordName) }
                            $0.member("recordType") { $0.string(token.recordType) }
                        }
                    }
                }
                request.member("zoneID") { ZoneID(zone).write(to: &$0) }
            }
        }
    }

    /// `assets/rereference`: `{"zoneID", "assets": [{"recordName", "fieldName"}]}` (RereferenceAssets.html).
    struct AssetRereferenceRequest: JSONWritable {
        var zone: FlatSync.ZoneID
        var assets: [(recordName: String, fieldName: String)]

        func write(to writer: inout JSONValue.Writer) {
            writer.object { request in
                request.member("assets") {
                    $0.array(assets) { writer, asset in
                        writer.object {
                            $0.member("fieldName") { $0.string(asset.fieldName) }
                            $0.member("recordName") { $0.string(asset.recordName) }
                        }
                    }
                }
                request.member("zoneID") { ZoneID(zone).write(to: &$0) }
            }
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

    // MARK: - Users

    struct CurrentUser: JSONReadable {
        var userRecordName: String?
        var firstName: String?
        var lastName: String?

        init() {}

        mutating func read(_ key: String, from reader: inout JSONValue.Reader) throws -> Bool {
            switch key {
            case "userRecordName": userRecordName = try reader.string()
            case "firstName": firstName = try reader.string()
            case "lastName": lastName = try reader.string()
            default: return false
            }
            return true
        }
    }
}

extension CloudKitWire.ListResponse where Name == CloudKitWire.Zones {
    var zones: [Element] { elements }
}

extension CloudKitWire.ListResponse where Name == CloudKitWire.Records {
    var records: [Element] { elements }
}

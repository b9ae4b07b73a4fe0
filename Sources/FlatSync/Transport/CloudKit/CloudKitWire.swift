import Foundation

/// The JSON of CloudKit Web Services as ``CloudKitWebServicesTransport`` sends and reads it.
///
/// Shapes follow Apple's CloudKit Web Services Reference (2016) plus what other clients observed against
/// the live server; where a shape is a guess, the comment says so. Every key a response may lack is
/// optional here, so a response that lacks one is reported as
/// ``CloudError/Code-swift.struct/unexpectedServerResponse`` by the code that needs it, never a crash.
enum CloudKitWire {
    /// `{"zoneName": …, "ownerRecordName": …}`; responses may add `zoneType`.
    struct ZoneID: Codable, Hashable {
        var zoneName: String
        var ownerRecordName: String?
        var zoneType: String?

        init(_ zone: FlatSync.ZoneID) {
            zoneName = zone.name
        }
    }

    /// The keys of an error: a whole request's (the body of a non-200 response) or one item's (a record
    /// or a zone inside a 200). `retryAfter` is in seconds (Apple does not say; every client assumes it).
    struct ErrorFields: Decodable, Hashable {
        var serverErrorCode: String?
        var reason: String?
        var retryAfter: Double?
        var uuid: String?
        var redirectURL: String?
    }

    // MARK: - Zones

    /// An entry of `zones/list`, `zones/modify` and `changes/database`: a zone, a deleted zone, or an error.
    struct ZoneEntry: Decodable {
        var zoneID: ZoneID?
        var syncToken: String?
        var deleted: Bool?
        /// Not documented: the emulator's mark of a zone the user deleted. Apple documents no such flag.
        var purged: Bool?
        var serverErrorCode: String?
        var reason: String?
        var retryAfter: Double?
        var redirectURL: String?

        var error: ErrorFields? {
            serverErrorCode.map {
                ErrorFields(serverErrorCode: $0, reason: reason, retryAfter: retryAfter, redirectURL: redirectURL)
            }
        }
    }

    struct ZonesResponse: Decodable {
        var zones: [ZoneEntry]
    }

    struct ZonesModifyRequest: Encodable {
        struct Operation: Encodable {
            struct Zone: Encodable { var zoneID: ZoneID }
            var operationType: String
            var zone: Zone
        }
        var operations: [Operation]
    }

    struct DatabaseChangesRequest: Encodable {
        var syncToken: String?
        var resultsLimit: Int?
    }

    struct DatabaseChangesResponse: Decodable {
        var zones: [ZoneEntry]
        var syncToken: String?
        var moreComing: Bool?
    }

    // MARK: - Records

    struct ZoneChangesRequest: Encodable {
        struct Zone: Encodable {
            var zoneID: ZoneID
            /// Sent even when empty: an empty token is a token the server must refuse, not "from the start".
            var syncToken: String?
            var resultsLimit: Int
        }
        var zones: [Zone]
        var resultsLimit: Int
    }

    struct ZoneChangesResponse: Decodable {
        struct Zone: Decodable {
            var zoneID: ZoneID?
            var records: [RecordEntry]?
            var syncToken: String?
            /// "Sometimes null" in live responses: missing means false.
            var moreComing: Bool?
            var serverErrorCode: String?
            var reason: String?
            var retryAfter: Double?
            var redirectURL: String?
        }
        var zones: [Zone]
    }

    /// Who wrote a version and when (`created`, `modified`).
    struct AuditInfo: Codable, Hashable {
        var timestamp: Double?
        var userRecordName: String?
        var deviceID: String?
    }

    /// A record as sent in `records/modify`.
    struct OutgoingRecord: Encodable {
        var recordName: String
        /// Absent for deletes.
        var recordType: String?
        var recordChangeTag: String?
        /// Absent for deletes.
        var fields: [String: Field]?
    }

    /// An entry of a `records` array in a response: a record, a deleted record (`deleted: true`, maybe
    /// with nothing but its name), or an error for one record.
    struct RecordEntry: Decodable {
        var recordName: String?
        var recordType: String?
        var recordChangeTag: String?
        var fields: [String: Field]?
        var created: AuditInfo?
        var modified: AuditInfo?
        var deleted: Bool?
        var serverErrorCode: String?
        var reason: String?
        var retryAfter: Double?
        var redirectURL: String?

        var error: ErrorFields? {
            serverErrorCode.map {
                ErrorFields(serverErrorCode: $0, reason: reason, retryAfter: retryAfter, redirectURL: redirectURL)
            }
        }
    }

    struct RecordsResponse: Decodable {
        var records: [RecordEntry]
    }

    struct RecordsModifyRequest: Encodable {
        struct Operation: Encodable {
            var operationType: String
            var record: OutgoingRecord
        }
        var operations: [Operation]
        var zoneID: ZoneID
        var atomic: Bool
    }

    struct RecordsLookupRequest: Encodable {
        struct Name: Encodable { var recordName: String }
        var records: [Name]
        var zoneID: ZoneID
    }

    // MARK: - Users and push

    struct CurrentUser: Decodable {
        var userRecordName: String?
        var firstName: String?
        var lastName: String?
    }

    struct TokensCreateRequest: Encodable {
        var apnsEnvironment: String
    }

    struct TokensCreateResponse: Decodable {
        var apnsEnvironment: String?
        var apnsToken: String?
        var webcourierURL: String?
    }
}

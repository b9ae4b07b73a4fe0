import FlatSync
import Foundation

/// The controls a test (or the demo) has over a test cloud, beyond what a client can do through
/// `CloudTransport`: expiring tokens, deleting a zone the way a user would, injecting faults, and
/// reading the server's counters and records.
///
/// Administration calls are never faulted and never counted in ``CloudCounters``.
public protocol CloudAdministration: Sendable {
    /// Makes every change token minted so far (zone and database tokens) fail with
    /// `CloudError.Code.changeTokenExpired`, as CloudKit does after it compacts history.
    func expireAllChangeTokens() async throws

    /// Makes the change tokens minted so far for one zone fail with
    /// `CloudError.Code.changeTokenExpired`; other zones' tokens stay valid.
    func expireChangeTokens(in zone: ZoneID) async throws

    /// Deletes a zone and its records as the user would from Settings. Until a client creates the zone
    /// again, requests for it fail with `CloudError.Code.userDeletedZone`, and database
    /// changes report it with `ZoneDeletion.Reason.deletedByUser`. Over CloudKit Web Services, which has
    /// no code for it, they fail as `ZONE_NOT_FOUND` and the zone is reported `"deleted": true` (unless
    /// the emulator runs with its guessed codes; see the CloudKit transport's "Meeting CloudKit"). Throws
    /// `CloudError.Code.zoneNotFound` if the zone does not exist.
    func deleteZoneAsUser(_ zone: ZoneID) async throws

    /// Replaces the fault plan (and restarts its random generator from the plan's seed).
    func setFaultPlan(_ plan: FaultPlan) async throws

    /// The fault plan as it stands: scripted faults already used up are gone.
    func faultPlan() async throws -> FaultPlan

    /// Sets how many record changes each zone keeps (`nil`: all). Tokens older than the last
    /// `limit` changes of their zone fail with `CloudError.Code.changeTokenExpired`.
    func setChangeHistoryLimit(_ limit: Int?) async throws

    /// What the server has served since it was created or the counters were reset.
    func counters() async throws -> CloudCounters

    /// Makes the server a production environment deployed with `schema` (`nil`: a development one, which
    /// takes any record type and field, and keeps the type a field's first value gave it: a later value of
    /// another type is refused, record by record, "Invalid value, expected type …").
    ///
    /// In production, CloudKit refuses, record by record, a save whose record type or field the deployed
    /// schema lacks, or whose value is of another type, or whose field's encryption differs from the
    /// schema's. The server does the same: that record fails with `CloudError.Code.invalidArguments`
    /// (`BAD_REQUEST` over CKWS, with the wording seen live: "Cannot create or modify field 'X' in record
    /// 'Y' in production schema"), and the rest of the request is applied. It serves one database whatever
    /// environment a request names, so a transport configured for `.development` is held to the schema too.
    func setProductionSchema(_ schema: CloudSchema?) async throws

    /// The production schema the server enforces, or `nil` in development.
    func productionSchema() async throws -> CloudSchema?

    /// Sets every counter back to zero.
    func resetCounters() async throws

    /// Stores `data` as another client's upload would (CloudKit Web Services' `assets/upload`, then a POST of
    /// the bytes), and returns the value that client's save carries in an asset field to attach them: an
    /// `ASSETID` description with the upload's receipt. A test saves it in a record through a transport, as
    /// a native app saving a `CKAsset` would, and reads it back as a `CloudAsset`. A save of an asset
    /// description without such a receipt (one a fetch returned) is refused.
    func uploadAsset(_ data: Data) async throws -> FieldValue

    /// The records the server holds in `zone`, sorted by name, with their change tags; empty when the
    /// zone does not exist. For comparing devices with the server.
    func records(in zone: ZoneID) async throws -> [Record]

    /// The zone subscriptions the server holds, sorted by ID (see ``CloudSubscription``).
    func subscriptions() async throws -> [CloudSubscription]
}

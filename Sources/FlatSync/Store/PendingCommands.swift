/// The queue of commands waiting to be sent, coalesced: a pure value type with no I/O and no clock.
///
/// Each zone has its own first-in-first-out list of commands. A record appears at most once among the
/// commands that are not being sent, because every new change is coalesced with the change already
/// pending for its record (see ``RecordChange/coalesced(with:)``), wherever that change sits in the
/// zone's queue. Changes of the same kind also join the zone's last command, so many small mutations
/// leave few commands.
///
/// Sending works in rounds. ``seal(_:)`` hands out every pending command of a zone and marks them as
/// being sent; coalescing never touches a sealed command, so a change made while a round is on the wire
/// becomes a new command and is sent in the next round. ``acknowledge(_:in:)`` removes records the
/// server confirmed; a command leaves the queue when its last record is acknowledged.
/// ``unseal(_:)`` ends a round that could not finish: what is left goes back to pending, and a record
/// changed again meanwhile keeps one change, the two coalesced.
///
/// The command queue logs every transition, so replaying the log through the same transitions
/// rebuilds the same queue after a restart.
package struct PendingCommands: Sendable {
    private var commands: [CommandID: Command] = [:]
    /// Each zone's commands, oldest first.
    private var order: [ZoneID: [CommandID]] = [:]
    /// Where the change of each record that is not being sent lives.
    private var location = HashedTable<RecordID, Location>()
    /// Where the change of each record that is being sent lives.
    private var sealedLocation = HashedTable<RecordID, Location>()
    /// The commands being sent, per zone.
    private var sealed: [ZoneID: Set<CommandID>] = [:]
    /// The ID the next new command gets.
    package private(set) var nextCommandID: UInt64 = 1
    /// The records whose deletes a cascade from each owner made (``RecordChange/cascadeOwner``), by owner,
    /// while they may still be pending (``cascadedDeletes(of:)``): an entry can outlive its change (coalesced
    /// with a newer one), so each is checked where it is used.
    private var cascadedDeletes: [RecordID: [RecordID]] = [:]

    /// A record's change: its command, and its position in the command's ``Command/slots``.
    private struct Location: Hashable {
        var command: CommandID
        var slot: Int
    }

    /// An empty queue.
    package init() {}

    // MARK: - Reading

    /// A zone's commands, oldest first, including those being sent.
    package func commands(in zone: ZoneID) -> [Command] {
        (order[zone] ?? []).compactMap { commands[$0] }
    }

    /// Every command, zone by zone, oldest first within a zone.
    package var allCommands: [Command] {
        order.keys.sorted().flatMap { commands(in: $0) }
    }

    /// The number of commands waiting or being sent.
    package var commandCount: Int { commands.count }

    /// The zones with a command waiting or being sent.
    package var zones: [ZoneID] { order.filter { !$0.value.isEmpty }.keys.sorted() }

    /// The keys every pending change of a record (waiting and being sent) changed: what this device
    /// changed since the server version it last knew.
    package func changedKeys(of id: RecordID) -> Set<String> {
        var keys = Set<String>()
        for found in [location[id], sealedLocation[id]].compactMap({ $0 }) {
            if let change = change(at: found) { keys.formUnion(change.changedKeys) }
        }
        return keys
    }

    /// `fields` (a record's, holding every pending change of it) with each key those changes changed as it
    /// was before the first of them (``RecordChange/baseValues``): the version they were made over. Nil when
    /// a change does not know its keys' earlier values.
    package func baseFields(of id: RecordID, over fields: [String: FieldValue]) -> [String: FieldValue]? {
        // The change being sent first, then the one waiting, which came after it: the earlier value of a key
        // wins, unless the later change was made over a merged version (``RecordChange/rebases``).
        var before: [String: FieldValue?] = [:]
        for found in [sealedLocation[id], location[id]] {
            guard let found, let change = change(at: found) else { continue }
            guard let base = change.baseValues else { return nil }
            if change.rebases { before = [:] }
            for key in change.changedKeys where before[key] == nil { before[key] = .some(base[key]) }
        }
        var fields = fields
        for (key, value) in before { fields[key] = value }
        return fields
    }

    /// The number of record changes waiting or being sent, in one zone or in all.
    package func recordCount(in zone: ZoneID? = nil) -> Int {
        guard let zone else { return location.count + sealedLocation.count }
        return commands(in: zone).reduce(0) { $0 + $1.recordCount }
    }

    /// The oldest command of a zone.
    package func head(of zone: ZoneID) -> Command? {
        order[zone]?.first.flatMap { commands[$0] }
    }

    /// A command by ID.
    package func command(_ id: CommandID) -> Command? { commands[id] }

    /// True while a round of `zone` is being sent.
    package func isSending(_ zone: ZoneID) -> Bool { !(sealed[zone]?.isEmpty ?? true) }

    /// The records whose saves are in the round of `zone` being sent.
    package func savesBeingSent(in zone: ZoneID) -> [RecordID] {
        (sealed[zone] ?? []).sorted().flatMap { id in
            (commands[id]?.slots ?? []).compactMap { change in change.flatMap { $0.isDelete ? nil : $0.recordID } }
        }
    }

    /// True when the command is part of the round being sent.
    package func isSealed(_ id: CommandID) -> Bool {
        guard let zone = commands[id]?.zone else { return false }
        return sealed[zone]?.contains(id) ?? false
    }

    /// True when no command is waiting or being sent.
    package var isEmpty: Bool { commands.isEmpty }

    /// The newest change of a record that is waiting or being sent.
    package func latestChange(for id: RecordID) -> RecordChange? {
        if let found = location[id] { return change(at: found) }
        if let found = sealedLocation[id] { return change(at: found) }
        return nil
    }

    /// The change of a record waiting to be sent, not the one being sent, if there is one.
    package func waitingChange(for id: RecordID) -> RecordChange? {
        location[id].flatMap { change(at: $0) }
    }

    /// The change of a record in one command, if the command holds one (a lookup, where
    /// ``Command/changes`` builds a dictionary of all of them).
    package func change(of recordID: RecordID, in commandID: CommandID) -> RecordChange? {
        if let found = sealedLocation[recordID], found.command == commandID { return change(at: found) }
        if let found = location[recordID], found.command == commandID { return change(at: found) }
        return nil
    }

    /// Makes the changes of `id` (waiting and being sent) update the record rather than replace it: the
    /// server's newer version they were merged with wins over the delete they stood for. Not logged: after a
    /// restart the log's change would replace again, but the store sends a record merged since its last save
    /// as an update of every field (``ZoneState/sendWhole``, kept in the snapshot with the merge).
    package mutating func stopReplacing(_ id: RecordID) {
        for found in [location[id], sealedLocation[id]].compactMap({ $0 }) {
            if commands[found.command]?.slots[found.slot]?.replacesRecord == true {
                commands[found.command]!.markReplacing(at: found.slot, false)
            }
        }
    }

    /// True when a save of the record waiting or being sent replaces it (``RecordChange/replacesRecord``).
    package func hasPendingReplace(of id: RecordID) -> Bool {
        for found in [location[id], sealedLocation[id]] {
            if let found, change(at: found)?.replacesRecord == true { return true }
        }
        return false
    }

    /// True when a change of the record waiting or being sent deletes it: a delete, or a save that
    /// replaces it (a delete followed by a new record, ``RecordChange/replacesRecord``). Until the server
    /// has answered it, the deletes a cascade from the record made wait (``RecordChange/cascadeOwner``).
    package func hasPendingDeleteOrReplace(of id: RecordID) -> Bool {
        for found in [location[id], sealedLocation[id]] {
            if let found, let change = change(at: found), change.isDelete || change.replacesRecord { return true }
        }
        return false
    }

    /// The pending deletes a cascade from `owner` made (``RecordChange/cascadeOwner``), waiting or being sent.
    package func cascadedDeletes(of owner: RecordID) -> [RecordChange] {
        guard let children = cascadedDeletes[owner] else { return [] }
        var changes: [RecordChange] = []
        for child in Set(children).sorted() {
            for found in [location[child], sealedLocation[child]] {
                if let found, let change = change(at: found), change.cascadeOwner == owner.name {
                    changes.append(change)
                }
            }
        }
        return changes
    }

    /// The command holding the newest change of a record that is waiting or being sent.
    package func commandID(of recordID: RecordID) -> CommandID? {
        (location[recordID] ?? sealedLocation[recordID])?.command
    }

    private func change(at location: Location) -> RecordChange? {
        commands[location.command]?.slots[location.slot]
    }

    /// The IDs of every record with a change waiting or being sent in `zone`.
    package func recordIDs(in zone: ZoneID) -> Set<RecordID> {
        var ids = Set<RecordID>()
        for command in commands(in: zone) {
            for case let change? in command.slots { ids.insert(change.recordID) }
        }
        return ids
    }

    /// Problems with the queue's bookkeeping, none when it is sound: every change sits in its command at
    /// the place the index of its records (the sealed one for a command being sent) says, each record has
    /// at most one change waiting and one being sent, and every command is in its zone's order. For tests.
    package func inconsistencies() -> [String] {
        var problems: [String] = []
        var indexed = 0
        for (id, command) in commands {
            let isBeingSent = isSealed(id)
            let index = isBeingSent ? sealedLocation : location
            if command.recordCount == 0 { problems.append("command \(id) is empty") }
            if !(order[command.zone]?.contains(id) ?? false) { problems.append("command \(id) is not in its zone") }
            var filled = 0
            for (slot, change) in command.slots.enumerated() {
                guard let change else { continue }
                filled += 1
                if change.commandKind != command.kind {
                    problems.append("\(change.recordID) in \(id) of the wrong kind")
                }
                if index[change.recordID] != Location(command: id, slot: slot) {
                    problems.append(
                        "\(change.recordID) at \(id)[\(slot)] is indexed at \(String(describing: index[change.recordID]))"
                    )
                }
            }
            if filled != command.recordCount {
                problems.append("command \(id) counts \(command.recordCount), holds \(filled)")
            }
            indexed += filled
        }
        if indexed != location.count + sealedLocation.count {
            problems.append("\(location.count + sealedLocation.count) records indexed, \(indexed) in commands")
        }
        return problems
    }

    // MARK: - Enqueueing and coalescing

    /// What ``enqueue(_:)`` did.
    package struct EnqueueResult: Hashable, Sendable {
        /// Commands the mutation created.
        package var newCommands: [CommandID] = []
        /// Changes folded into a change already pending for the same record.
        package var coalescedChanges: Int = 0
    }

    /// Adds a mutation's changes, coalescing each with the change pending for its record.
    ///
    /// The mutation is taken by value: when the caller passes its last copy, the changes move into the queue
    /// instead of being copied (and the mutation's array released change by change afterwards).
    @discardableResult
    package mutating func enqueue(_ mutation: consuming Mutation) -> EnqueueResult {
        var result = EnqueueResult()
        let zone = mutation.zone
        // Taken out of the mutation (not copied), so the array is unique when the caller passed its last copy.
        var incomingChanges: [RecordChange] = []
        swap(&incomingChanges, &mutation.changes)
        let count = incomingChanges.count
        if count > 16 {
            // A large batch: grow the index once instead of rehashing it at every doubling.
            location.reserveCapacity(location.count + count)
        }
        // Taken from the back, one by one, so each change moves out of the array: reversed first (a swap
        // of bits, no retains) to take them in the order they were made.
        if count > 1 { incomingChanges.withUnsafeMutableBufferPointer { $0.reverse() } }
        // The command the previous change went to, held out of `commands` while changes are added to it
        // (one dictionary lookup per batch instead of one per change); it is the zone's last command, so
        // the next change of the same kind goes there too.
        var held: Command?
        var reservationBudget = count > 16 ? count : 0
        while var incoming = incomingChanges.popLast() {
            let recordID = incoming.recordID
            precondition(recordID.zone == zone, "a mutation's changes must be in its zone")
            if let owner = incoming.cascadeOwner {
                cascadedDeletes[RecordID(zone: zone, name: owner), default: []].append(recordID)
            }
            if let heldID = held?.id, held!.kind == incoming.commandKind {
                // The common case, a record with nothing pending joining the held command: one lookup both
                // checks the index and claims the record's place in it, the next slot of the command.
                let next = Location(command: heldID, slot: held!.slots.count)
                guard let existing = location.updateValue(next, forKey: recordID) else {
                    held!.append(consume incoming)
                    continue
                }
                location[recordID] = existing
            }
            if let existing = location[recordID] {
                let isHeld = held?.id == existing.command
                if let pendingChange = isHeld ? held!.slots[existing.slot] : change(at: existing) {
                    result.coalescedChanges += 1
                    incoming = pendingChange.coalesced(with: incoming)
                    if isHeld, held!.kind == incoming.commandKind {
                        held!.replace(at: existing.slot, with: consume incoming)
                        continue
                    }
                    if !isHeld, commands[existing.command]!.kind == incoming.commandKind {
                        commands[existing.command]!.replace(at: existing.slot, with: consume incoming)
                        continue
                    }
                    // The change leaves its command for one of the other kind: the held command goes back
                    // first, so that removing (which may drop an emptied command) sees the whole queue.
                    if let command = held.take() { commands[command.id] = command }
                    removeChange(at: existing)
                }
            }
            if count == 1 {
                // One change (every replayed single mutation): taking its command out and back would cost
                // more than the one lookup it saves.
                let target = targetCommand(in: zone, kind: incoming.commandKind, result: &result)
                location[recordID] = Location(command: target, slot: commands[target]!.slots.count)
                commands[target]!.append(consume incoming)
                continue
            }
            if held?.kind != incoming.commandKind {
                if let command = held.take() { commands[command.id] = command }
                let target = targetCommand(in: zone, kind: incoming.commandKind, result: &result)
                held = commands.removeValue(forKey: target)
                if reservationBudget > 0 {
                    // Room for the run of changes of this kind that follows, out of a budget of one slot per
                    // change in the batch: reserving all that remained for every new command made a batch that
                    // alternates saves and deletes (a command each) reserve quadratically (3 GB of address
                    // space for 4,000 changes).
                    var run = 1
                    var next = incomingChanges.count - 1
                    while run < reservationBudget, next >= 0, incomingChanges[next].commandKind == held!.kind {
                        run += 1
                        next -= 1
                    }
                    reservationBudget -= run
                    held!.reserveCapacity(forMore: run)
                }
            }
            location[recordID] = Location(command: held!.id, slot: held!.slots.count)
            held!.append(consume incoming)
        }
        if let command = held.take() { commands[command.id] = command }
        return result
    }

    /// Forgets that `change`, leaving the queue, was a cascade's delete.
    private mutating func forgetCascade(of change: RecordChange) {
        guard !cascadedDeletes.isEmpty, let owner = change.cascadeOwner else { return }
        let ownerID = RecordID(zone: change.recordID.zone, name: owner)
        cascadedDeletes[ownerID]?.removeAll { $0 == change.recordID }
        if cascadedDeletes[ownerID]?.isEmpty == true { cascadedDeletes[ownerID] = nil }
    }

    /// The zone's last command if it is waiting and of `kind`, else a new command at the end.
    private mutating func targetCommand(in zone: ZoneID, kind: Command.Kind, result: inout EnqueueResult) -> CommandID {
        if let lastID = order[zone]?.last, let last = commands[lastID], last.kind == kind,
            !(sealed[zone]?.contains(lastID) ?? false)
        {
            return lastID
        }
        let id = CommandID(nextCommandID)
        nextCommandID += 1
        var command = Command(id: id, zone: zone, kind: kind)
        if firstNewCommandCapacity > 0 {
            command.reserveCapacity(forMore: firstNewCommandCapacity)
            firstNewCommandCapacity = 0
        }
        commands[id] = command
        order[zone, default: []].append(id)
        result.newCommands.append(id)
        return id
    }

    /// Removes the change at `location` from its command, dropping the command once it is empty, and
    /// closing its gaps once most of its slots are empty (unless the caller is walking its slots). The
    /// caller updates the record's own entry in the index.
    private mutating func removeChange(at location: Location, compacting: Bool = true) {
        // In place: a copy of the command would copy all its changes for every record removed, which made
        // acknowledging a large command quadratic.
        let commandID = location.command
        guard commands[commandID] != nil else { return }
        commands[commandID]!.remove(at: location.slot)
        if commands[commandID]!.recordCount > 0 {
            if compacting { compactIfSparse(commandID) }
            return
        }
        guard let zone = commands.removeValue(forKey: commandID)?.zone else { return }
        if let index = order[zone]?.lastIndex(of: commandID) {
            order[zone]!.remove(at: index)
            if order[zone]!.isEmpty { order[zone] = nil }
        }
        sealed[zone]?.remove(commandID)
    }

    /// Closes the gaps of a command whose slots are mostly empty (a command that kept a few records while
    /// many left it, one at a time), moving its records' entries in the index along: without it, a record
    /// that changes kind back and forth would grow its command by a slot each time.
    private mutating func compactIfSparse(_ commandID: CommandID) {
        guard let command = commands[commandID], command.isSparse else { return }
        let compacted = command.compacted()
        let isBeingSent = isSealed(commandID)
        for (slot, change) in compacted.slots.enumerated() {
            let moved = Location(command: commandID, slot: slot)
            if isBeingSent {
                sealedLocation[change!.recordID] = moved
            } else {
                location[change!.recordID] = moved
            }
        }
        commands[commandID] = compacted
        compactionCount += 1
    }

    /// How many times a command's gaps were closed (tests check that a workload reached that path).
    package private(set) var compactionCount = 0

    // MARK: - Sending

    /// Starts a round: marks every command of `zone` as being sent and returns them, oldest first.
    /// Returns an empty list while a round of the zone is already being sent.
    package mutating func seal(_ zone: ZoneID) -> [Command] {
        guard !isSending(zone), let ids = order[zone], !ids.isEmpty else { return [] }
        sealed[zone] = Set(ids)
        let sealedCommands = ids.compactMap { commands[$0] }
        for command in sealedCommands {
            for (slot, change) in command.slots.enumerated() {
                guard let recordID = change?.recordID else { continue }
                location[recordID] = nil
                sealedLocation[recordID] = Location(command: command.id, slot: slot)
            }
        }
        return sealedCommands
    }

    /// Removes records the server acknowledged (or that were dropped) from a command being sent.
    /// Returns true when that emptied the command, so it left the queue.
    @discardableResult
    package mutating func acknowledge(_ recordIDs: [RecordID], in commandID: CommandID) -> Bool {
        guard commands[commandID] != nil else { return false }
        for recordID in recordIDs {
            if let found = sealedLocation[recordID], found.command == commandID {
                sealedLocation[recordID] = nil
                if !cascadedDeletes.isEmpty, let change = change(at: found) { forgetCascade(of: change) }
                removeChange(at: found)
            } else if let found = location[recordID], found.command == commandID {
                location[recordID] = nil
                if !cascadedDeletes.isEmpty, let change = change(at: found) { forgetCascade(of: change) }
                removeChange(at: found)
            }
        }
        return commands[commandID] == nil
    }

    /// Ends a round of `zone`: what was not acknowledged goes back to pending. A record changed again
    /// while the round was out keeps one change, the two coalesced as if the round had never been sent:
    /// the newer record already holds the older change, but it was made with only its own keys (a save's
    /// keys are what the user changed since the record stood as the older change left it), so the older
    /// change's keys go with it, or they would never reach the server. A newer save over a delete, or over
    /// a save that replaces the record, replaces it too.
    package mutating func unseal(_ zone: ZoneID) {
        guard let ids = sealed[zone] else { return }
        sealed[zone] = nil
        for id in ids.sorted() {
            guard let command = commands[id] else { continue }
            for (slot, change) in command.slots.enumerated() {
                guard let recordID = change?.recordID else { continue }
                let here = Location(command: id, slot: slot)
                sealedLocation[recordID] = nil
                if let newer = location[recordID] {
                    if let newerChange = self.change(at: newer) {
                        commands[newer.command]!.replace(at: newer.slot, with: change!.coalesced(with: newerChange))
                    }
                    // Not compacted while its slots are walked here: that would move the ones still to come.
                    removeChange(at: here, compacting: false)
                } else {
                    location[recordID] = here
                }
            }
            compactIfSparse(id)
        }
    }

    // MARK: - Clearing and restoring

    /// Drops every command of a zone, sent or not.
    package mutating func clear(zone: ZoneID) {
        for id in order[zone] ?? [] {
            guard let command = commands.removeValue(forKey: id) else { continue }
            for case let change? in command.slots {
                location[change.recordID] = nil
                sealedLocation[change.recordID] = nil
            }
        }
        order[zone] = nil
        sealed[zone] = nil
        if !cascadedDeletes.isEmpty { cascadedDeletes = cascadedDeletes.filter { $0.key.zone != zone } }
    }

    /// Drops every command.
    package mutating func clearAll() {
        let nextID = nextCommandID
        self = PendingCommands()
        nextCommandID = nextID
    }

    /// Puts a command back exactly as it was, without coalescing (used when reading a compacted log,
    /// which restores a zone's sealed commands, then seals, then restores the rest). A log written by this
    /// code holds each record once among the commands not being sent; for a damaged one, a record's later
    /// change wins (the one later in the command, or in the command restored later), and an empty command
    /// is not kept.
    package mutating func restore(_ command: consuming Command) {
        precondition(commands[command.id] == nil, "restoring a command twice")
        nextCommandID = max(nextCommandID, command.id.rawValue + 1)
        // Room for its records at once: a compacted log restores one large command per zone, and growing
        // the index a step at a time was half the cost of restoring it.
        location.reserveCapacity(location.count + command.slots.count)
        for slot in command.slots.indices {
            guard let recordID = command.slots[slot]?.recordID else { continue }
            if let owner = command.slots[slot]!.cascadeOwner {
                cascadedDeletes[RecordID(zone: command.zone, name: owner), default: []].append(recordID)
            }
            let here = Location(command: command.id, slot: slot)
            guard let earlier = location.updateValue(here, forKey: recordID) else { continue }
            if earlier.command == command.id {
                command.remove(at: earlier.slot)
            } else {
                removeChange(at: earlier)
            }
        }
        guard command.recordCount > 0 else { return }
        order[command.zone, default: []].append(command.id)
        let id = command.id
        commands[id] = consume command
        compactIfSparse(id)
    }

    /// Makes room for about `count` records in the index of pending changes (reading a log of that many
    /// entries grows it once instead of at every doubling).
    package mutating func reserveCapacity(forRecordsAbout count: Int) {
        location.reserveCapacity(location.count + count)
        firstNewCommandCapacity = count
    }

    /// Room to give the next command created (then zero): a log of single-record mutations replays them
    /// into one command, whose slots otherwise grow, and move every change, at each doubling.
    private var firstNewCommandCapacity = 0

    /// Makes sure new commands get IDs above `value` (used when reading a compacted log).
    package mutating func raiseNextCommandID(to value: UInt64) {
        nextCommandID = max(nextCommandID, value)
    }
}

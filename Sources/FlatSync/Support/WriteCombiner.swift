import Synchronization

/// Lets concurrent writers share one trip into the store actor (flat combining): the role of combiner,
/// and the inbox of work handed to it.
///
/// A writer that finds no combiner at work takes the role (``tryToCombine()``): it enters the actor, does
/// its own work and then everything handed in meanwhile (``takeInbox()``), and gives the role up when the
/// inbox is empty. A writer that finds a combiner at work hands its work in (``handIn(_:)``) and waits to
/// be told how it went, without entering the actor. Every hop off a busy actor schedules the actor again
/// and can wake a thread: with 16 writers on two cores, each writer's hop into the store and back out was
/// what kept the threads switching (see ``LocalStore/applyDurably(_:)``).
///
/// The role is never left with work in the inbox: work is handed in only while the role is held, and the
/// role is given up only by finding the inbox empty, under the same lock.
package final class WriteCombiner<Work: Sendable>: Sendable {
    private struct State {
        var combining = false
        var inbox: [Work] = []
    }

    private let state = Mutex(State())

    package init() {}

    /// Takes the combiner's role: true when the caller has it now, false when another combiner is at work.
    package func tryToCombine() -> Bool {
        state.withLock { s in
            if s.combining { return false }
            s.combining = true
            return true
        }
    }

    /// Hands `work` to the combiner at work and returns true; when none is at work, the caller takes the
    /// role instead and `work` is not kept (false).
    package func handIn(_ work: Work) -> Bool {
        state.withLock { s in
            if s.combining {
                s.inbox.append(work)
                return true
            }
            s.combining = true
            return false
        }
    }

    /// The combiner's next batch: everything handed in since the last call, oldest first; nil when nothing
    /// was, and then the caller no longer holds the role.
    package func takeInbox() -> [Work]? {
        state.withLock { s in
            if s.inbox.isEmpty {
                s.combining = false
                return nil
            }
            defer { s.inbox = [] }
            return s.inbox
        }
    }

    /// Everything handed in since the last call, oldest first (empty when nothing was); the caller keeps
    /// the role either way. A combiner calls it when it comes onto the actor, so that its own work can join
    /// what was handed in while it came.
    package func takeInboxKeepingRole() -> [Work] {
        state.withLock { s in
            if s.inbox.isEmpty { return [] }
            defer { s.inbox = [] }
            return s.inbox
        }
    }

    /// How much work waits in the inbox.
    package var inboxCount: Int {
        state.withLock { $0.inbox.count }
    }
}

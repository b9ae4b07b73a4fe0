import Dispatch
import Foundation
import Synchronization

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Ctrl-C (SIGINT) and SIGTERM as an async wait, for the commands that run until stopped (`cloud serve`,
/// `watch`): they stop cleanly instead of dying mid-write.
enum Interrupts {
    /// Returns the signal once SIGINT or SIGTERM arrives. From the first call on, the process no longer
    /// dies of either signal; the command that waits decides when to exit.
    static func wait() async -> Int32 {
        let waiter = Mutex<CheckedContinuation<Int32, Never>?>(nil)
        let arrived = Mutex<Int32?>(nil)
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                // The first signal wins; one that comes before the wait starts is kept for it.
                let first = arrived.withLock { arrived -> Bool in
                    guard arrived == nil else { return false }
                    arrived = number
                    return true
                }
                if first { waiter.withLock { $0.take() }?.resume(returning: number) }
            }
            source.resume()
            sources.append(source)
        }
        let number = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let already = arrived.withLock { arrived -> Int32? in
                if arrived == nil { waiter.withLock { $0 = continuation } }
                return arrived
            }
            if let already { continuation.resume(returning: already) }
        }
        for source in sources { source.cancel() }
        return number
    }
}

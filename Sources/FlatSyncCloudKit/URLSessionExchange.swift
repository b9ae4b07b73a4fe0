import FlatSync
import Dispatch
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// ``HTTPExchange`` over Foundation's `URLSession` (FoundationNetworking, libcurl underneath, on Linux).
///
/// It works around what swift-corelibs-foundation gets wrong on Linux (see the project's reference
/// notes on Foundation networking):
/// - one long-lived ephemeral session without a URL cache or cookie storage: a session per request can
///   crash when it is torn down, and cancelling a finished task traps when the session has a cache;
/// - cancellation calls `URLSessionTask.cancel()` from another queue, never from inside the cancellation
///   handler, where it can deadlock against the session's network thread;
/// - timeouts are whole seconds of at least one: libcurl is handed whole milliseconds of whole seconds,
///   and a timeout under a second fails at once.
public final class URLSessionExchange: HTTPExchange {
    /// One session for the whole process.
    public static let shared = URLSessionExchange()
    /// A second long-lived session, for CloudKit's web courier: its long polls stay off the connections
    /// of the API host (see `LongPollNotificationSource.courierHTTP`).
    public static let courier = URLSessionExchange()
    /// A third, for asset downloads, which go to another host than the API's (live captures show
    /// `cvws.icloud-content.com`): MistKit met "421 Misdirected Request" when one HTTP/2 connection served
    /// both.
    public static let assets = URLSessionExchange()

    private let session: URLSession

    /// An exchange with its own ephemeral session. Prefer ``shared``.
    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.httpCookieStorage = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    /// Sends `request` with this exchange's session and returns the response, whatever its status; a
    /// failure of the connection throws its `URLError`, and cancelling the task cancels the request
    /// (throwing `CancellationError`).
    public func send(_ request: HTTPExchangeRequest) async throws -> HTTPExchangeResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.timeoutInterval = Self.wholeSeconds(request.timeout)
        for (name, value) in request.headers {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        let pending = PendingTask()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<HTTPExchangeResponse, any Error>) in
                let task = session.dataTask(with: urlRequest) { data, response, error in
                    if let error {
                        let cancelled = (error as? URLError)?.code == .cancelled && pending.wasCancelled
                        continuation.resume(throwing: cancelled ? CancellationError() : error)
                        return
                    }
                    guard let response = response as? HTTPURLResponse else {
                        continuation.resume(throwing: URLError(.badServerResponse))
                        return
                    }
                    var headers: [String: String] = [:]
                    for (name, value) in response.allHeaderFields {
                        if let name = name as? String, let value = value as? String { headers[name] = value }
                    }
                    continuation.resume(
                        returning: HTTPExchangeResponse(
                            status: response.statusCode, headers: headers, body: data ?? Data()))
                }
                if pending.start(task) { task.resume() }
            }
        } onCancel: {
            pending.cancel()
        }
    }

    /// `duration` as whole seconds, rounded up, at least one.
    static func wholeSeconds(_ duration: Duration) -> TimeInterval {
        max(1, duration.seconds.rounded(.up))
    }
}

/// The data task of one ``URLSessionExchange/send(_:)`` call, which its cancellation handler may reach
/// from another thread before or after the task exists.
private final class PendingTask: Sendable {
    private struct State {
        var task: URLSessionDataTask?
        var cancelled = false
    }

    // The Mutex orders the task's creation against a cancellation arriving from another thread.
    private let state = Mutex<State>(State())

    var wasCancelled: Bool { state.withLock { $0.cancelled } }

    /// Records the task; false if the call was cancelled first (the task is then cancelled, not started).
    func start(_ task: URLSessionDataTask) -> Bool {
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.cancelled
        }
        if cancelled {
            // Resumed only to be cancelled, so that its completion handler runs and ends the wait.
            task.resume()
            Self.cancelLater(task)
            return false
        }
        return true
    }

    func cancel() {
        let task = state.withLock { state -> URLSessionDataTask? in
            state.cancelled = true
            return state.task
        }
        if let task { Self.cancelLater(task) }
    }

    /// Cancels from another queue: `cancel()` inside a cancellation handler can deadlock in corelibs
    /// Foundation (swift-corelibs-foundation#5412, fixed after Swift 6.3).
    private static func cancelLater(_ task: URLSessionDataTask) {
        DispatchQueue.global().async { task.cancel() }
    }
}

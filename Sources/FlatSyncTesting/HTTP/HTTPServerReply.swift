import Foundation

/// What a ``LoopbackHTTPServer`` handler answers.
package enum HTTPServerReply: Sendable {
    /// Send this response; keep the connection open unless the client asked to close it.
    case response(HTTPServerResponse)
    /// Write `partialBytes` (such as a status line and half a header), then shut the connection down:
    /// a response lost on the way.
    ///
    /// Some bytes must be written. A connection closed with zero bytes written looks, to libcurl, like
    /// a kept-alive connection that went stale, and it silently sends the request again on a new one,
    /// which would apply a POST twice; a partial response is never retried. Cut the response inside its
    /// body, after a whole header block: Foundation on Linux crashes the client process when a connection
    /// closes inside the header block.
    case dropConnection(partialBytes: Data)
}

import Foundation
import Testing

@testable import FlatSyncTesting

@Suite("HTTP request parser")
struct HTTPRequestParserTests {
    /// Feeds `text` in pieces of `chunk` bytes and collects what the parser makes of it.
    private func parse(_ text: String, chunk: Int) -> (requests: [HTTPServerRequest], failure: String?) {
        var parser = HTTPRequestParser()
        var requests: [HTTPServerRequest] = []
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            parser.append(bytes[offset..<min(offset + chunk, bytes.count)])
            offset += chunk
            draining: while true {
                switch parser.next() {
                case .request(let request): requests.append(request)
                case .needMoreData: break draining
                case .failure(let reason): return (requests, reason)
                }
            }
        }
        return (requests, nil)
    }

    private let twoRequests =
        "POST /one?a=%2B HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nCONTENT-length: 4\r\nX-A: 1\r\nx-a: 2\r\n\r\nbody"
        + "GET /two HTTP/1.1\r\nConnection: close\r\n\r\n"

    @Test(arguments: [1, 2, 3, 7, 64, 10_000])
    func requestsSplitAnywhereParseTheSame(chunk: Int) {
        let (requests, failure) = parse(twoRequests, chunk: chunk)
        #expect(failure == nil)
        #expect(requests.map(\.path) == ["/one", "/two"])
        #expect(requests.first?.body == Data("body".utf8))
        #expect(requests.first?.header("host") == "127.0.0.1:8080")
        #expect(requests.first?.header("X-A") == "1, 2")
        #expect(requests.first?.queryValue("a") == "+")
        #expect(requests.first?.keepAlive == true)
        #expect(requests.last?.keepAlive == false)
        #expect(requests.last?.body.isEmpty == true)
    }

    @Test func queryItemsArePercentDecodedWithPlusAsSpace() {
        let items = HTTPRequestParser.decodeQuery("ckAPIToken=a%2Bb%2Fc%3D&ckWebAuthToken=a+b&flag&=x")
        #expect(items?.map(\.name) == ["ckAPIToken", "ckWebAuthToken", "flag", ""])
        #expect(items?.map(\.value) == ["a+b/c=", "a b", "", "x"])
        #expect(HTTPRequestParser.decodeQuery("a=%G0") == nil)
    }

    @Test func http10ClosesUnlessAskedToKeepAlive() {
        #expect(parse("GET / HTTP/1.0\r\n\r\n", chunk: 100).requests.first?.keepAlive == false)
        #expect(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", chunk: 100).requests.first?.keepAlive == true)
    }

    @Test func expectContinueIsAnnouncedOnceBeforeTheBody() {
        var parser = HTTPRequestParser()
        parser.append(Array("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n".utf8))
        guard case .needMoreData(sendContinue: true) = parser.next() else {
            Issue.record("expected a 100 Continue")
            return
        }
        guard case .needMoreData(sendContinue: false) = parser.next() else {
            Issue.record("expected no second 100 Continue")
            return
        }
        parser.append(Array("ok".utf8))
        guard case .request(let request) = parser.next() else {
            Issue.record("expected the request")
            return
        }
        #expect(request.body == Data("ok".utf8))
    }

    @Test func headerBlockIsRefusedOnceItPasses64KiBWithoutEnding() {
        var parser = HTTPRequestParser()
        parser.append(Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "y", count: 70_000)).utf8))
        guard case .failure(let reason) = parser.next() else {
            Issue.record("expected a failure")
            return
        }
        #expect(reason.contains("64 KiB"))
    }
}

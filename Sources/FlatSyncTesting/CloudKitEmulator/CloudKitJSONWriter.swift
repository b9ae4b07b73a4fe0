import Foundation

/// Writes the emulator's response dictionaries as JSON text: objects with sorted keys, strings with
/// only the escapes JSON requires (slashes stay as they are), integers exactly, doubles in their
/// shortest round-tripping form.
///
/// The dictionaries are the same untyped `[String: Any]` trees `JSONSerialization` takes; only the
/// writing is the emulator's own, because Foundation's writer on Linux spends 25–50 ms on a page of 200
/// records (most of it checking and bridging each value), which alone would make a 10,000-record sync
/// through the emulator take seconds.
///
/// Values: `String`, `Int64`, `Int`, `Bool`, `Double` (a non-finite one is written as `null`, JSON has
/// no such number), `NSNull`, arrays and `[String: Any]` of them. Anything else is written as `null`.
struct CloudKitJSONWriter {
    private(set) var bytes: [UInt8] = []

    /// `value` as JSON bytes.
    static func data(_ value: Any) -> Data {
        var writer = CloudKitJSONWriter()
        writer.bytes.reserveCapacity(4_096)
        writer.write(value)
        return Data(writer.bytes)
    }

    private mutating func write(_ value: Any) {
        switch value {
        case let string as String:
            write(string: string)
        case let int as Int64:
            bytes.append(contentsOf: String(int).utf8)
        case let bool as Bool:
            bytes.append(contentsOf: (bool ? "true" : "false").utf8)
        case let object as [String: Any]:
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in object.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(string: key)
                bytes.append(UInt8(ascii: ":"))
                write(object[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        case let array as [Any]:
            bytes.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case let double as Double:
            // Swift's description is the shortest text that reads back as the same double.
            bytes.append(contentsOf: (double.isFinite ? double.description : "null").utf8)
        case let int as Int:
            bytes.append(contentsOf: String(int).utf8)
        default:
            bytes.append(contentsOf: "null".utf8)
        }
    }

    private mutating func write(string: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

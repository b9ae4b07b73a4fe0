#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The values of a snapshot's top-level dictionary, with `Data` values left in the file as byte ranges.
struct SnapshotPlist {
    enum Value {
        case int(UInt64)
        case string(String)
        case data(Range<Int>)
        case dictionary([String: Value])
        case other
        /// What a checked structure's object was not, though it had to be (only while reading).
        case bad(String)
    }

    let values: [String: Value]

    /// Reads the structure of the binary property list in `source`, checked as every property list FlatSync
    /// reads is (``BinaryPropertyList/Structure``); throws `damagedFile` when it is not one, and the read's
    /// own error when the file cannot be read.
    init(_ source: some SnapshotSource) throws(FlatSyncError) {
        let bytes = WindowedBytes(source)
        let structure: BinaryPropertyList.Structure<WindowedBytes>
        switch BinaryPropertyList.Structure.read(bytes) {
        case .success(let read): structure = read
        case .failure(let problem):
            if let failure = bytes.failure { throw failure }
            throw Self.damaged(problem.text)
        }
        let problem = structure.checkObjects()
        if let failure = bytes.failure { throw failure }
        if let problem { throw Self.damaged(problem) }
        guard case .dictionary(let top) = Self.value(of: structure.topObject, in: structure, depth: 0) else {
            if let failure = bytes.failure { throw failure }
            throw Self.damaged("the top object is not a dictionary")
        }
        if let failure = bytes.failure { throw failure }
        values = try Self.checked(top)
    }

    private static func damaged(_ what: String) -> FlatSyncError {
        FlatSyncError(.damagedFile, "The snapshot is not a readable property list: \(what).")
    }

    /// A value read from a structure whose objects were checked: each is in bounds, so reading it cannot
    /// fail; a kind a snapshot does not use is `.other`, and one that is not what it must be `.bad`.
    private static func value(
        of object: Int, in structure: BinaryPropertyList.Structure<WindowedBytes>, depth: Int
    ) -> Value {
        guard let start = structure.offset(of: object) else { return .bad("bad object reference") }
        let marker = structure.bytes[start]
        let low = Int(marker & 0x0F)
        switch marker >> 4 {
        case 0x1:
            let size = 1 << low
            if size == 16 {
                // A 128-bit integer: how values above Int64.max are written; the high half must be zero.
                guard structure.unsigned64(at: start + 1, size: 8) == 0 else { return .bad("integer too large") }
                return .int(structure.unsigned64(at: start + 9, size: 8))
            }
            return .int(structure.unsigned64(at: start + 1, size: size))
        case 0x4:
            guard let (count, body) = structure.count(ofObjectAt: start) else { return .bad("bad length") }
            return .data(body..<body + count)
        case 0x5:
            guard let (count, body) = structure.count(ofObjectAt: start) else { return .bad("bad length") }
            let ascii = (body..<body + count).map { structure.bytes[$0] }
            guard ascii.allSatisfy({ $0 < 0x80 }) else { return .bad("bad ASCII string") }
            return .string(String(decoding: ascii, as: UTF8.self))
        case 0x6:
            guard let (count, body) = structure.count(ofObjectAt: start) else { return .bad("bad length") }
            let units = (0..<count).map {
                UInt16(structure.bytes[body + 2 * $0]) << 8 | UInt16(structure.bytes[body + 2 * $0 + 1])
            }
            guard let string = String(validating: units, as: UTF16.self) else { return .bad("bad UTF-16") }
            return .string(string)
        case 0xD:
            guard depth < 2 else { return .bad("dictionaries nested too deep") }
            guard let (count, body) = structure.count(ofObjectAt: start) else { return .bad("bad length") }
            var values: [String: Value] = [:]
            for index in 0..<count {
                let size = structure.referenceSize
                guard let key = structure.unsigned(at: body + index * size, size: size),
                    let member = structure.unsigned(at: body + (count + index) * size, size: size)
                else { return .bad("bad object reference") }
                guard case .string(let name) = value(of: key, in: structure, depth: depth + 1) else {
                    return .bad("a dictionary key is not a string")
                }
                values[name] = value(of: member, in: structure, depth: depth + 1)
            }
            return .dictionary(values)
        default:
            return .other
        }
    }

    /// `values`, or the first problem found in them (and in a dictionary among them) as an error.
    private static func checked(_ values: [String: Value]) throws(FlatSyncError) -> [String: Value] {
        for value in values.values {
            switch value {
            case .bad(let what): throw damaged(what)
            case .dictionary(let nested): _ = try checked(nested)
            default: continue
            }
        }
        return values
    }
}

/// A snapshot's bytes, read from its file through a 4 KB window: what ``BinaryPropertyList/Structure``
/// checks. A read that fails gives zeros and keeps its error in ``failure``, which the reader checks
/// before it trusts what it found.
final class WindowedBytes: PlistBytes {
    private let source: any SnapshotSource
    private var window: [UInt8] = []
    private var windowStart = 0
    private(set) var failure: FlatSyncError?

    init(_ source: some SnapshotSource) {
        self.source = source
    }

    var count: Int { source.count }

    subscript(position: Int) -> UInt8 {
        if position < windowStart || position >= windowStart + window.count {
            guard failure == nil, position >= 0, position < source.count else { return 0 }
            let length = min(source.count - position, 4096)
            do throws(FlatSyncError) {
                window = try source.bytes(at: position, count: length)
                windowStart = position
            } catch {
                failure = error
                return 0
            }
        }
        return window[position - windowStart]
    }
}

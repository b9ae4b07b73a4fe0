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
        let top: Value
        do throws(FlatSyncError) {
            top = try Self.value(of: structure.topObject, in: structure, depth: 0)
        } catch {
            throw bytes.failure ?? error
        }
        if let failure = bytes.failure { throw failure }
        guard case .dictionary(let values) = top else { throw Self.damaged("the top object is not a dictionary") }
        self.values = values
    }

    private static func damaged(_ what: String) -> FlatSyncError {
        FlatSyncError(.damagedFile, "The snapshot is not a readable property list: \(what).")
    }

    /// A value read from a structure whose objects were checked: each is in bounds, so only what it holds
    /// can be wrong; a kind a snapshot does not use is `.other`.
    private static func value(
        of object: Int, in structure: BinaryPropertyList.Structure<WindowedBytes>, depth: Int
    ) throws(FlatSyncError) -> Value {
        guard let start = structure.offset(of: object) else { throw damaged("bad object reference") }
        let marker = structure.bytes[start]
        let low = Int(marker & 0x0F)
        switch marker >> 4 {
        case 0x1:
            let size = 1 << low
            if size == 16 {
                // A 128-bit integer: how values above Int64.max are written; the high half must be zero.
                guard structure.unsigned64(at: start + 1, size: 8) == 0 else { throw damaged("integer too large") }
                return .int(structure.unsigned64(at: start + 9, size: 8))
            }
            return .int(structure.unsigned64(at: start + 1, size: size))
        case 0x4:
            guard let (count, body) = structure.count(ofObjectAt: start) else { throw damaged("bad length") }
            return .data(body..<body + count)
        case 0x5:
            guard let (count, body) = structure.count(ofObjectAt: start) else { throw damaged("bad length") }
            let ascii = (body..<body + count).map { structure.bytes[$0] }
            guard ascii.allSatisfy({ $0 < 0x80 }) else { throw damaged("bad ASCII string") }
            return .string(String(decoding: ascii, as: UTF8.self))
        case 0x6:
            guard let (count, body) = structure.count(ofObjectAt: start) else { throw damaged("bad length") }
            let units = (0..<count).map {
                UInt16(structure.bytes[body + 2 * $0]) << 8 | UInt16(structure.bytes[body + 2 * $0 + 1])
            }
            guard let string = String(validating: units, as: UTF16.self) else { throw damaged("bad UTF-16") }
            return .string(string)
        case 0xD:
            guard depth < 2 else { throw damaged("dictionaries nested too deep") }
            guard let (count, body) = structure.count(ofObjectAt: start) else { throw damaged("bad length") }
            var values: [String: Value] = [:]
            let size = structure.referenceSize
            for index in 0..<count {
                guard let key = structure.unsigned(at: body + index * size, size: size),
                    let member = structure.unsigned(at: body + (count + index) * size, size: size)
                else { throw damaged("bad object reference") }
                guard case .string(let name) = try value(of: key, in: structure, depth: depth + 1) else {
                    throw damaged("a dictionary key is not a string")
                }
                values[name] = try value(of: member, in: structure, depth: depth + 1)
            }
            return .dictionary(values)
        default:
            return .other
        }
    }
}

/// A snapshot's bytes, read from its file a 4 KB page at a time: what ``BinaryPropertyList/Structure``
/// checks. It keeps the two pages used last, because the reader goes back and forth between the objects
/// near the start of the file and the offset table at its end; with one window each step was a `pread`.
/// A read that fails gives zeros and keeps its error in ``failure``, which the reader checks before it
/// trusts what it found.
final class WindowedBytes: PlistBytes {
    private static let pageSize = 4096
    private let source: any SnapshotSource
    /// The page used last, and the one before it.
    private var current: (start: Int, bytes: [UInt8]) = (0, [])
    private var previous: (start: Int, bytes: [UInt8]) = (0, [])
    private(set) var failure: FlatSyncError?

    init(_ source: some SnapshotSource) {
        self.source = source
    }

    var count: Int { source.count }

    subscript(position: Int) -> UInt8 {
        if position < current.start || position >= current.start + current.bytes.count {
            if position >= previous.start && position < previous.start + previous.bytes.count {
                swap(&current, &previous)
            } else {
                guard failure == nil, position >= 0, position < source.count else { return 0 }
                let start = position - position % Self.pageSize
                let length = min(source.count - start, Self.pageSize)
                do throws(FlatSyncError) {
                    let bytes = try source.bytes(at: start, count: length)
                    previous = current
                    current = (start, bytes)
                } catch {
                    failure = error
                    return 0
                }
            }
        }
        return current.bytes[position - current.start]
    }
}

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Binary property lists, the format of every FlatSync file but the command log: encoding, and the check
/// every file read from disk passes before `PropertyListDecoder` sees it.
///
/// Why the check: Foundation's binary plist decoder trusts lengths and offsets it reads from the file. A
/// damaged file whose string runs past the end of the data traps inside it (found by fuzzing
/// `device-file`), and a file whose objects refer to each other in a cycle, or nest very deep, could recurse
/// until the stack runs out. A trap while opening a store would crash the app at every launch, so FlatSync
/// checks the structure itself first — every offset, length and reference in bounds, no cycle, little
/// nesting — and reports anything else as a damaged file.
package enum BinaryPropertyList {
    /// What is wrong with a property list's structure.
    package struct Problem: Error, ExpressibleByStringInterpolation {
        var text: String
        package init(text: String) { self.text = text }
        package init(stringLiteral value: String) { text = value }
        package init(stringInterpolation: DefaultStringInterpolation) {
            text = String(stringInterpolation: stringInterpolation)
        }
    }

    /// `value` as a binary property list; `what` names it in the error ("The snapshot of ReadingList").
    package static func encode<T: Encodable>(_ value: T, what: String) throws(FlatSyncError) -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        do {
            return try encoder.encode(value)
        } catch {
            throw FlatSyncError(.ioFailed, "\(what) could not be encoded.", cause: error)
        }
    }

    /// `data`, checked by ``validate(_:)``, decoded as a `T`; anything wrong is a
    /// ``FlatSyncError/Code-swift.struct/damagedFile`` saying `damage` ("device.plist is not readable."), with
    /// the cause and `path`.
    package static func decode<T: Decodable>(_ type: T.Type, from data: Data, damage: String, path: String)
        throws(FlatSyncError) -> T
    {
        do {
            try validate(data)
            return try PropertyListDecoder().decode(type, from: data)
        } catch {
            throw FlatSyncError(.damagedFile, damage, cause: error, path: path)
        }
    }

    /// The deepest nesting of arrays, sets and dictionaries accepted; FlatSync's files nest three deep.
    package static let maximumDepth = 64

    /// Checks that `data` is a well-formed binary property list (`bplist00`) that Foundation's decoder can
    /// read without trusting anything it should not.
    ///
    /// - Throws: ``FlatSyncError/Code-swift.struct/damagedFile`` saying what is wrong.
    package static func validate(_ data: Data) throws(FlatSyncError) {
        let problem = data.withUnsafeBytes { bytes in
            switch Structure.read(bytes) {
            case .success(let structure): return structure.checkObjects()
            case .failure(let problem): return problem.text
            }
        }
        if let problem {
            throw FlatSyncError(.damagedFile, "It is not a well-formed binary property list: \(problem).")
        }
    }

    /// The parts of a binary property list, read without trapping whatever the bytes: the one reader of
    /// the format's structure, for files read whole (``validate(_:)``) and for a snapshot read from its file
    /// (`SnapshotPlist`).
    package struct Structure<Bytes: PlistBytes> {
        let bytes: Bytes
        let offsetSize: Int
        let referenceSize: Int
        let objectCount: Int
        let topObject: Int
        let offsetTable: Int

        /// The structure of `bytes`, its trailer and offset table checked; ``checkObjects()`` checks the rest.
        static func read(_ bytes: Bytes) -> Result<Structure, Problem> {
            let trailerSize = 32
            guard bytes.count >= 8 + 1 + trailerSize else { return .failure("it is \(bytes.count) bytes, too short") }
            guard zip(0..<8, "bplist00".utf8).allSatisfy({ bytes[$0] == $1 }) else {
                return .failure("it does not start with bplist00")
            }
            let trailer = bytes.count - trailerSize
            let offsetSize = Int(bytes[trailer + 6])
            let referenceSize = Int(bytes[trailer + 7])
            // Any width from 1 to 8 bytes: Foundation writes 3-byte offsets once a file passes 64 KiB.
            guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
                return .failure("its trailer gives integer sizes \(offsetSize) and \(referenceSize)")
            }
            func field(_ at: Int) -> Int? { Int(exactly: bigEndian(bytes, at: at, size: 8)) }
            guard let count = field(trailer + 8), let top = field(trailer + 16), let table = field(trailer + 24) else {
                return .failure("its trailer holds numbers too large")
            }
            guard count >= 1, count <= trailer, top < count else {
                return .failure("its trailer names \(count) objects and top object \(top)")
            }
            let (tableSize, overflow) = count.multipliedReportingOverflow(by: offsetSize)
            guard !overflow, table >= 9, table <= trailer, tableSize <= trailer - table else {
                return .failure("its offset table does not fit between the objects and the trailer")
            }
            return .success(
                Structure(
                    bytes: bytes, offsetSize: offsetSize, referenceSize: referenceSize, objectCount: count,
                    topObject: top, offsetTable: table))
        }

        private static func bigEndian(_ bytes: Bytes, at offset: Int, size: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<offset + size { value = value << 8 | UInt64(bytes[index]) }
            return value
        }

        /// An unsigned big-endian integer of `size` bytes at `offset`, or nil when it does not fit in an Int.
        func unsigned(at offset: Int, size: Int) -> Int? {
            Int(exactly: Self.bigEndian(bytes, at: offset, size: size))
        }

        /// An unsigned big-endian integer of `size` bytes (at most 8) at `offset`, whatever its size.
        func unsigned64(at offset: Int, size: Int) -> UInt64 {
            Self.bigEndian(bytes, at: offset, size: size)
        }

        /// Where `object` starts.
        func offset(of object: Int) -> Int? {
            unsigned(at: offsetTable + object * offsetSize, size: offsetSize)
        }

        /// Checks every object's bounds and references, then that the graph from the top has no cycle and
        /// little depth. Returns the first problem.
        func checkObjects() -> String? {
            var children: [[Int]] = []
            children.reserveCapacity(objectCount)
            for object in 0..<objectCount {
                switch references(of: object) {
                case .success(let references): children.append(references)
                case .failure(let problem): return problem.text
                }
            }
            // Depth-first from the top object, then from any object not reached yet, without recursion:
            // 0 unseen, 1 on the path, 2 done.
            var state = [UInt8](repeating: 0, count: objectCount)
            for root in [topObject] + Array(0..<objectCount) where state[root] == 0 {
                var path: [(object: Int, next: Int)] = [(root, 0)]
                state[root] = 1
                while let (object, next) = path.last {
                    guard next < children[object].count else {
                        state[object] = 2
                        path.removeLast()
                        continue
                    }
                    path[path.count - 1].next += 1
                    let child = children[object][next]
                    switch state[child] {
                    case 1: return "object \(child) contains itself"
                    case 2: continue
                    default:
                        guard path.count < maximumDepth else { return "it nests more than \(maximumDepth) deep" }
                        state[child] = 1
                        path.append((child, 0))
                    }
                }
            }
            return nil
        }

        /// The count of an object that has one (data, strings, collections), from its marker's low bits or
        /// the integer after it, and where its contents start; nil when that integer is malformed.
        func count(ofObjectAt start: Int) -> (value: Int, body: Int)? {
            let low = Int(bytes[start] & 0x0F)
            guard low == 0x0F else { return (low, start + 1) }
            guard start + 1 < offsetTable else { return nil }
            let intMarker = bytes[start + 1]
            guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else { return nil }
            let size = 1 << Int(intMarker & 0x0F)
            guard size <= offsetTable - (start + 2), let value = unsigned(at: start + 2, size: size) else { return nil }
            return (value, start + 2 + size)
        }

        /// The objects `object` refers to, once its bytes are known to lie within the object area.
        private func references(of object: Int) -> Result<[Int], Problem> {
            guard let start = offset(of: object), start >= 8, start < offsetTable else {
                return .failure(Problem(text: "object \(object) starts outside the object area"))
            }
            let end = offsetTable
            let marker = bytes[start]
            let low = Int(marker & 0x0F)
            func fits(_ length: Int, after position: Int) -> Bool {
                length >= 0 && length <= end - position
            }
            func count() -> (value: Int, body: Int)? { self.count(ofObjectAt: start) }
            func bad(_ what: String) -> Result<[Int], Problem> {
                .failure(Problem(text: "object \(object) (\(what)) does not fit or is malformed"))
            }
            switch marker >> 4 {
            case 0x0:
                return [0x00, 0x08, 0x09, 0x0F].contains(marker) ? .success([]) : bad("a constant")
            case 0x1:
                return low <= 4 && fits(1 << low, after: start + 1) ? .success([]) : bad("an integer")
            case 0x2:
                return (low == 2 || low == 3) && fits(1 << low, after: start + 1) ? .success([]) : bad("a real")
            case 0x3:
                return marker == 0x33 && fits(8, after: start + 1) ? .success([]) : bad("a date")
            case 0x4, 0x5, 0x7:
                guard let (length, body) = count(), fits(length, after: body) else { return bad("bytes or a string") }
                return .success([])
            case 0x6:
                guard let (length, body) = count(), length <= Int.max / 2, fits(length * 2, after: body) else {
                    return bad("a UTF-16 string")
                }
                return .success([])
            case 0x8:
                return fits(low + 1, after: start + 1) ? .success([]) : bad("a UID")
            case 0xA, 0xC, 0xD:
                let perEntry = marker >> 4 == 0xD ? 2 : 1
                guard let (entries, body) = count(), entries <= Int.max / (perEntry * referenceSize),
                    fits(entries * perEntry * referenceSize, after: body)
                else { return bad("a collection") }
                var references: [Int] = []
                references.reserveCapacity(entries * perEntry)
                for index in 0..<entries * perEntry {
                    guard let reference = unsigned(at: body + index * referenceSize, size: referenceSize),
                        reference < objectCount
                    else { return bad("a collection with a reference out of range") }
                    references.append(reference)
                }
                return .success(references)
            default:
                return bad("an unknown kind")
            }
        }
    }
}

/// Random access to a property list's bytes: those of a file held whole, or of one read through a window.
package protocol PlistBytes {
    var count: Int { get }
    subscript(position: Int) -> UInt8 { get }
}

extension UnsafeRawBufferPointer: PlistBytes {}

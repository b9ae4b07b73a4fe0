#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A string that keeps up to 22 UTF-8 bytes inline, in 24 bytes with no allocation, and a longer one as a
/// `String`.
///
/// Article IDs are this size (News's are 22 characters), and a `String` holds at most 15 bytes inline:
/// as `String`s, 100,000 history items cost 100,000 heap objects of 64 bytes beside the items. The inline
/// form is canonical: a string of 22 bytes or fewer is always inline, so equal bytes mean equal values.
///
/// Comparison follows `String`'s: two strings are equal when they are canonically equivalent, so an
/// article ID in decomposed form finds the item stored under its precomposed form, as it did when items
/// were kept in a `[String: Item]`. ASCII text (every byte below 0x80) is compared and hashed by its bytes
/// and equals only the same bytes; anything else goes through `String`. The one difference: text that is
/// not ASCII never equals ASCII text here, although three characters are canonically equivalent to ASCII
/// ones (U+212A KELVIN SIGN to "K", U+037E to ";", U+1FEF to "`") and `String` calls such strings equal.
/// The history's index and ``ChangeTagTable`` hash ASCII IDs by their bytes (``HistoryTable``), so such a
/// pair hashes apart there; equal as well, whether a lookup of one spelling found the other depended on a
/// hash collision.
package struct CompactString: Sendable {
    /// The most UTF-8 bytes kept inline.
    package static let inlineCapacity = 22

    /// Up to 22 bytes and their count, packed into 23 bytes.
    @usableFromInline
    struct InlineBytes: Sendable {
        var word0: UInt64 = 0
        var word1: UInt64 = 0
        var word2: UInt32 = 0
        var word3: UInt16 = 0
        var count: UInt8 = 0
    }

    @usableFromInline
    enum Storage: Sendable {
        case inline(InlineBytes)
        case heap(String)
    }

    @usableFromInline
    var storage: Storage

    /// The empty string.
    package init() {
        storage = .inline(InlineBytes())
    }

    /// The string `string`.
    package init(_ string: String) {
        var copy = string
        let inline = copy.withUTF8 { Self.inlineBytes($0) }
        storage = inline.map(Storage.inline) ?? .heap(copy)
    }

    /// The string of `utf8`, which the caller has checked is valid UTF-8.
    package init(validUTF8 utf8: UnsafeRawBufferPointer) {
        if let inline = Self.inlineBytes(utf8.assumingMemoryBound(to: UInt8.self)) {
            storage = .inline(inline)
        } else {
            storage = .heap(String(decoding: utf8, as: UTF8.self))
        }
    }

    private static func inlineBytes(_ utf8: UnsafeBufferPointer<UInt8>) -> InlineBytes? {
        guard utf8.count <= inlineCapacity else { return nil }
        var bytes = InlineBytes()
        withUnsafeMutableBytes(of: &bytes) { raw in
            if let base = utf8.baseAddress, utf8.count > 0 {
                raw.baseAddress!.copyMemory(from: base, byteCount: utf8.count)
            }
        }
        bytes.count = UInt8(utf8.count)
        return bytes
    }

    /// The string as a `String` (which allocates for 16 to 22 bytes).
    package var string: String {
        switch storage {
        case .heap(let string):
            return string
        case .inline(let bytes):
            return Self.withBytes(of: bytes) { String(decoding: $0, as: UTF8.self) }
        }
    }

    /// The number of UTF-8 bytes.
    package var utf8Count: Int {
        switch storage {
        case .heap(let string): return string.utf8.count
        case .inline(let bytes): return Int(bytes.count)
        }
    }

    /// Runs `body` with the string's UTF-8 bytes.
    @inlinable
    package func withUTF8<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        switch storage {
        case .heap(var string):
            return try string.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
        case .inline(let bytes):
            return try Self.withBytes(of: bytes, body)
        }
    }

    @inlinable
    static func withBytes<R>(of bytes: InlineBytes, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        var copy = bytes
        return try withUnsafeBytes(of: &copy) { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[0..<Int(bytes.count)]))
        }
    }

    /// True when every byte is ASCII.
    package var isASCII: Bool {
        withUTF8 { Self.isASCII($0) }
    }

    /// True when every byte of `utf8` is below 0x80.
    @inlinable
    package static func isASCII(_ utf8: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var high: UInt64 = 0
        while index + 8 <= utf8.count {
            high |= utf8.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < utf8.count {
            high |= UInt64(utf8[index])
            index += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// True when the string equals `utf8` as ``==`` compares: byte for byte, or both not ASCII and
    /// canonically equivalent.
    package func equals(utf8 other: UnsafeRawBufferPointer, otherIsASCII: Bool) -> Bool {
        if hasBytes(other) { return true }
        return withUTF8 { mine in
            if otherIsASCII || Self.isASCII(mine) { return false }
            return string == String(decoding: other, as: UTF8.self)
        }
    }

    /// True when the string's UTF-8 bytes are `utf8`'s, byte for byte.
    package func hasBytes(_ utf8: UnsafeRawBufferPointer) -> Bool {
        withUTF8 { mine in
            mine.count == utf8.count
                && (mine.count == 0 || memcmp(mine.baseAddress!, utf8.baseAddress!, mine.count) == 0)
        }
    }
}

extension CompactString: Hashable {
    package static func == (lhs: CompactString, rhs: CompactString) -> Bool {
        switch (lhs.storage, rhs.storage) {
        case (.inline(let a), .inline(let b)):
            if a.word0 == b.word0 && a.word1 == b.word1 && a.word2 == b.word2 && a.word3 == b.word3
                && a.count == b.count
            {
                return true
            }
        case (.heap(let a), .heap(let b)):
            // By bytes first: `String`'s == would call an ASCII ID equal to a spelling with U+212A.
            if a.utf8.elementsEqual(b.utf8) { return true }
        default:
            break
        }
        // Different bytes: equal only if neither is ASCII and they are canonically equivalent (see the type).
        if lhs.isASCII || rhs.isASCII { return false }
        return lhs.string == rhs.string
    }

    package func hash(into hasher: inout Hasher) {
        withUTF8 { utf8 in
            if Self.isASCII(utf8) {
                // ASCII equals only the same bytes.
                hasher.combine(bytes: utf8)
                hasher.combine(0xFF as UInt8)
            } else {
                // `String` hashes the normalized form, so canonically equivalent strings hash alike.
                hasher.combine(String(decoding: utf8, as: UTF8.self))
            }
        }
    }
}

extension CompactString: Comparable {
    /// `String`'s order: by Unicode scalar values of the normalized forms, which for ASCII is byte order.
    package static func < (lhs: CompactString, rhs: CompactString) -> Bool {
        // Two inline ASCII strings (the usual article IDs) compare word by word, most significant byte first.
        if case .inline(let a) = lhs.storage, case .inline(let b) = rhs.storage,
            (a.word0 | b.word0 | a.word1 | b.word1) & 0x8080_8080_8080_8080 == 0,
            (UInt64(a.word2) | UInt64(b.word2) | UInt64(a.word3) | UInt64(b.word3)) & 0x8080_8080 == 0
        {
            // Bytes past the count are zero, and a zero byte sorts before any byte of text, so the words
            // compare as the strings do up to the shorter one's length; equal words leave the counts.
            if a.word0 != b.word0 { return a.word0.byteSwapped < b.word0.byteSwapped }
            if a.word1 != b.word1 { return a.word1.byteSwapped < b.word1.byteSwapped }
            if a.word2 != b.word2 { return a.word2.byteSwapped < b.word2.byteSwapped }
            if a.word3 != b.word3 { return a.word3.byteSwapped < b.word3.byteSwapped }
            return a.count < b.count
        }
        let bytewise = lhs.withUTF8 { a in
            rhs.withUTF8 { b -> Bool? in
                guard isASCII(a) && isASCII(b) else { return nil }
                let common = min(a.count, b.count)
                let order = common == 0 ? 0 : memcmp(a.baseAddress!, b.baseAddress!, common)
                return order != 0 ? order < 0 : a.count < b.count
            }
        }
        if let bytewise { return bytewise }
        let (a, b) = (lhs.string, rhs.string)
        if a != b { return a < b }
        // Canonically equivalent, yet unequal here when one is ASCII (see the type): the ASCII one first, so
        // that exactly one of <, == and > holds.
        return lhs.isASCII && !rhs.isASCII
    }
}

extension CompactString: CustomStringConvertible {
    package var description: String { string }
}

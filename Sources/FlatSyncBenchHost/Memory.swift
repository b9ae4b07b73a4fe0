#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// How much memory this process holds, from /proc on Linux: the figures of the Memory row of the Performance
// article (Sources/FlatSync/FlatSync.docc/Performance.md).

/// The peak resident set size of this process so far, in megabytes.
///
/// On Linux this is `VmHWM` from `/proc/self/status`, not `getrusage`'s `ru_maxrss`: Foundation's `Process`
/// starts children with `posix_spawn`, whose vfork-style clone shares the parent's address space until
/// `exec`, and `exec` carries that address space's high-water mark into the child's `ru_maxrss`. A child of
/// a 300 MB parent would report 300 MB whatever it did. `VmHWM` belongs to the child's own address space.
/// Elsewhere (and if `/proc` cannot be read) it is `ru_maxrss`: kilobytes on Linux, bytes on Darwin.
package func peakResidentMegabytes() -> Double {
    procMegabytes("/proc/self/status", lines: ["VmHWM:"]) ?? ruMaxrssMegabytes()
}

/// The resident set size of this process now, in megabytes: `VmRSS` on Linux; elsewhere nan.
package func residentMegabytes() -> Double {
    procMegabytes("/proc/self/status", lines: ["VmRSS:"]) ?? .nan
}

/// The dirty memory of this process now, in megabytes: the `Private_Dirty`, `Shared_Dirty` and `Swap` lines of
/// `/proc/self/smaps_rollup` on Linux; elsewhere nan. It leaves out what `VmRSS` also counts, the clean
/// pages of mapped files (the code of the shared libraries), which the kernel can drop and read again and
/// other processes share — the same split iOS makes when it counts an app's footprint against its limit.
package func dirtyMegabytes() -> Double {
    procMegabytes("/proc/self/smaps_rollup", lines: ["Private_Dirty:", "Shared_Dirty:", "Swap:"]) ?? .nan
}

/// The sum of the `<name>: <n> kB` lines of a `/proc` file that start with one of `lines`, in megabytes; nil
/// when the file cannot be read or has none of them (and always off Linux).
private func procMegabytes(_ path: String, lines names: [String]) -> Double? {
    #if os(Linux)
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let values = text.split(separator: "\n")
            .filter { line in names.contains(where: { line.hasPrefix($0) }) }
            .compactMap { $0.split(separator: " ").dropFirst().first.flatMap { Double($0) } }
        return values.isEmpty ? nil : values.reduce(0, +) / 1024
    #else
        return nil
    #endif
}

/// `getrusage(RUSAGE_SELF).ru_maxrss` in megabytes (kilobytes on Linux, bytes on Darwin).
package func ruMaxrssMegabytes() -> Double {
    var usage = rusage()
    #if canImport(Darwin)
        guard getrusage(RUSAGE_SELF, &usage) == 0 else { return .nan }
        return Double(usage.ru_maxrss) / (1024 * 1024)
    #elseif canImport(Glibc)
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return .nan }
        return Double(usage.ru_maxrss) / 1024
    #else
        guard getrusage(RUSAGE_SELF, &usage) == 0 else { return .nan }
        return Double(usage.ru_maxrss) / 1024
    #endif
}

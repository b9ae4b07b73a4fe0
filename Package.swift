// swift-tools-version:6.0
import PackageDescription

// FlatSync has no package dependencies: Foundation, Dispatch and the toolchain's test libraries only.
let package = Package(
    name: "FlatSync",
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "FlatSync", targets: ["FlatSync"]),
        .library(name: "FlatSyncCloudKit", targets: ["FlatSyncCloudKit"]),
        .library(name: "FlatSyncTesting", targets: ["FlatSyncTesting"]),
        .executable(name: "flatsync-demo", targets: ["flatsync-demo"]),
        .executable(name: "flatsync-bench", targets: ["flatsync-bench"]),
    ],
    targets: [
        .target(name: "FlatSync"),
        // The CloudKit Web Services transport in its own module: it is the only code that needs
        // FoundationNetworking (libcurl and its TLS chain on Linux, ~7 MB resident), which a host that
        // brings its own transport should not load.
        .target(name: "FlatSyncCloudKit", dependencies: ["FlatSync"]),
        .target(name: "FlatSyncTesting", dependencies: ["FlatSync", "FlatSyncCloudKit"]),
        .executableTarget(name: "flatsync-demo", dependencies: ["FlatSync", "FlatSyncCloudKit", "FlatSyncTesting"]),
        .executableTarget(
            name: "flatsync-bench",
            dependencies: [
                "FlatSync", "FlatSyncCloudKit", "FlatSyncTesting", "FlatSyncBenchHost", "flatsync-bench-host",
            ]
        ),
        // The benchmark's child for memory: a host that links FlatSync and nothing else.
        .target(name: "FlatSyncBenchHost", dependencies: ["FlatSync"]),
        .executableTarget(name: "flatsync-bench-host", dependencies: ["FlatSyncBenchHost"]),
        // The libFuzzer targets: the decoders and where their seed corpus comes from (built by .ci/fuzz).
        .target(name: "FlatSyncFuzzing", dependencies: ["FlatSync", "FlatSyncCloudKit", "FlatSyncTesting"]),
        .executableTarget(name: "flatsync-fuzz", dependencies: ["FlatSyncFuzzing"]),
        // Child processes that the tests start and kill: crash loops and concurrent cloud writers.
        .executableTarget(name: "flatsync-test-child", dependencies: ["FlatSync", "FlatSyncTesting"]),
        // Helpers the test targets share: temporary directories, finding this package's executables.
        .target(name: "FlatSyncTestSupport", path: "Tests/FlatSyncTestSupport"),
        .testTarget(
            name: "FlatSyncTests",
            dependencies: [
                "FlatSync", "FlatSyncCloudKit", "FlatSyncTesting", "FlatSyncTestSupport", "FlatSyncFuzzing",
                "flatsync-test-child",
            ],
            // Inputs that once crashed a fuzz target, read by FuzzRegressionTests from the source tree.
            exclude: ["Fuzz/Regressions"]
        ),
        .testTarget(
            name: "FlatSyncTestingTests",
            dependencies: [
                "FlatSync", "FlatSyncCloudKit", "FlatSyncTesting", "FlatSyncTestSupport", "flatsync-test-child",
            ]
        ),
        // Runs the built flatsync-demo as separate processes (two devices, one cloud) and tests its parser.
        .testTarget(
            name: "FlatSyncDemoTests",
            dependencies: ["FlatSync", "FlatSyncCloudKit", "FlatSyncTesting", "FlatSyncTestSupport", "flatsync-demo"],
            // Read through #filePath by the tests that use them, not bundled.
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    settings.append(.enableUpcomingFeature("MemberImportVisibility"))
    target.swiftSettings = settings
}

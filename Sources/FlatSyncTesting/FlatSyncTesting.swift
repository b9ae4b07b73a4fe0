// FlatSyncTesting: test doubles for hosts and for FlatSync's own tests.

print("flatsync-test-child: not built yet")

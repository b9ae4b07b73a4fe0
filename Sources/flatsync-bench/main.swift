print("flatsync-bench: not built yet")

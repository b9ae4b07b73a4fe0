print("flatsync-demo: not built yet")

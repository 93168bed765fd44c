"""Floor 3: a plugin as a library file — where plugins are found (`discovery`), the checks
before ``dlopen`` and the entry points (`library`, `elf`, `entry_points`), the child-process
probe (`probe`), the checks of the structs a plugin fills (`validation`), and the profiler and
graph-optimizer registrations (`profiler`, `graph_optimizers`)."""

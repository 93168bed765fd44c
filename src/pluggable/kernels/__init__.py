"""Floor 6: kernels that plugins register through the kernel C API (`registry`: lookup,
instances, runs) and the ops they define with ``ops.h`` (`plugin_ops`)."""

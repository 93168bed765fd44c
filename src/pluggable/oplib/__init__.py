"""The op library: every op's definition (TensorFlow's name, inputs, outputs, attributes,
shape and dtype inference) and its NumPy reference kernel for the CPU device.

`core` holds the machinery and the first ops; each family module adds its ops to `OPS` when
imported, which importing this package does. The resource-variable ops are defined with
the variables' state, in `pluggable.eager.resources`, and join `OPS` when `pluggable.eager`
is imported.
"""
from .core import OPS, REQUIRED, OpDef, TensorMeta, bad  # noqa: F401
from . import array, math, nn  # noqa: F401,E402  (register their ops into OPS)

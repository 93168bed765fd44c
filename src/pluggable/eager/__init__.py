"""Running ops eagerly: dispatch (placement, argument checks, kernels or the CPU reference),
remembered plans, the operators and methods of `Tensor` (attached here, above the tensor
floor), the state of resource variables, and gradient tapes with every op's gradient.
"""
from . import dispatch, operators, resources, tape  # noqa: F401  (Tensor's methods, resource ops)
# Every op: the op library's and the resource ops `resources` defines.
from ..oplib.core import OPS  # noqa: F401,E402

"""pluggable: run TensorFlow PluggableDevice plugins written in C, without TensorFlow.

Plugins are found lazily, on first use::

    import pluggable
    pluggable.config.list_physical_devices()
    device = pluggable.get_device("XPU:0")

See `pluggable.config` for the ``tf.config``-like front end, and `get_include()` for the C
headers plugin authors build against.
"""
from __future__ import annotations

import os

from . import config, errors
from .devices.device import PluggableDevice
from .errors import PluggableError, PluginLoadError, PluginLoadWarning
from .loader import get_device, get_platform, load_plugin, manager

from .base.version import __version__  # noqa: F401

__all__ = ["config", "errors", "get_include", "load_plugin", "get_platform", "get_device",
           "PluggableDevice", "PluggableError", "PluginLoadError", "PluginLoadWarning",
           "tensor", "zeros", "empty", "Tensor", "DType", "bool_", "int8", "int16", "int32",
           "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32",
           "float64", "complex64", "complex128", "ops", "raw_ops", "device", "profiler",
           "to_dlpack", "from_dlpack", "Variable", "TensorShape", "GradientTape",
           "UnconnectedGradients", "stop_gradient"]
# TensorFlow's top-level functions (tf.constant, tf.reduce_sum, tf.add, ...): every function
# of pluggable.ops that TensorFlow 2.21 has at its top level, under that name; and the
# tf.random, tf.nn and tf.math namespaces.
_TF_FUNCTIONS = (
    "constant", "convert_to_tensor", "zeros", "ones", "zeros_like", "ones_like", "fill", "eye",
    "range", "identity", "cast", "add", "subtract", "multiply", "divide", "truediv", "realdiv",
    "truncatediv", "truncatemod", "pow", "maximum", "minimum", "add_n", "negative", "abs",
    "square", "sqrt", "exp", "sign", "floor", "round", "sin", "cos", "tan", "asin", "acos",
    "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh", "clip_by_value", "cumsum",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_not", "tanh", "sigmoid", "matmul", "reduce_sum", "reduce_mean",
    "reduce_max", "reduce_min", "reduce_prod", "reduce_all", "reduce_any", "argmax", "argmin",
    "reshape", "transpose", "shape", "size", "rank", "concat", "stack", "unstack", "split",
    "pad", "squeeze", "expand_dims", "tile", "broadcast_to", "reverse", "slice",
    "strided_slice", "gather", "gather_nd", "boolean_mask", "one_hot", "where")
__all__ += [*_TF_FUNCTIONS, "random", "nn", "math", "optimizers"]

# Tensors need NumPy, which costs more to import than the rest of the package together:
# they are imported on first use.
_LAZY = {"tensor": "tensors.tensor", "empty": "tensors.tensor",
         "Tensor": "tensors.tensor", "ops": None, "raw_ops": None, "profiler": None,
         "DType": "dtypes", "dtypes": None, "bool_": "dtypes", "int8": "dtypes",
         "int16": "dtypes", "int32": "dtypes", "int64": "dtypes", "uint8": "dtypes",
         "uint16": "dtypes", "uint32": "dtypes", "uint64": "dtypes", "float16": "dtypes",
         "bfloat16": "dtypes", "float32": "dtypes", "float64": "dtypes",
         "complex64": "dtypes", "complex128": "dtypes",
         "to_dlpack": "tensors.dlpack", "from_dlpack": "tensors.dlpack", "Variable": "variables",
         "TensorShape": "base.shape",
         "GradientTape": "eager.tape", "UnconnectedGradients": "eager.tape",
         "stop_gradient": "eager.tape"}
_LAZY.update({name: "ops" for name in _TF_FUNCTIONS})
_LAZY.update(random=None, nn=None, math=None, optimizers=None)


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'pluggable' has no attribute {name!r}")
    import importlib

    if (_LAZY[name] or "").startswith("tensors"):
        # A tensor's operators are attached by the op library's floor above tensors.
        importlib.import_module(".eager", __name__)
    module = importlib.import_module(f".{_LAZY[name] or name}", __name__)
    value = module if _LAZY[name] is None else getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    # The lazy names too, so that dir() and help() (pydoc) see them; listing them loads
    # nothing, reading one through getattr does.
    return sorted(set(globals()) | set(__all__))


def get_include() -> str:
    """The directory holding the C headers plugins build against (``-I`` it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    installed = os.path.join(here, "include")
    if os.path.isdir(installed):
        return installed
    # An editable install: the headers stay in the source tree.
    return os.path.join(os.path.dirname(os.path.dirname(here)), "include")


def device(name):
    """``with pluggable.device("/xpu:1"):`` runs the ops in the block on that device ("XPU",
    "xpu:1", "/device:XPU:1", "CPU", ...). See `pluggable.tensors.placement`."""
    from .tensors.placement import device as scope

    return scope(name)

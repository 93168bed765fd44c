"""The op library's Python functions, named as in TensorFlow's Python API
(``pluggable.ops.add``, ``matmul``, ``relu``, ``reduce_sum``, ...). Each is a thin layer over
one op of `pluggable.raw_ops`; where the op runs is decided by `pluggable.device` scopes and
the inputs (see `pluggable.dispatch`)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .dispatch import execute
from .dtypes import as_dtype
from .tensors import Tensor

__all__ = ["identity", "add", "subtract", "multiply", "divide", "maximum", "minimum",
           "negative", "abs", "square", "sqrt", "rsqrt", "exp", "log", "tanh", "sigmoid",
           "relu", "relu6", "cast", "matmul", "bias_add", "reduce_sum", "reduce_mean",
           "reduce_max", "reduce_min", "reduce_prod", "softmax", "log_softmax", "conv2d",
           "reshape", "transpose", "fill", "zeros_like", "ones_like", "equal", "less",
           "greater", "where", "argmax"]


def _one(op: str, inputs, attrs=None) -> Tensor:
    return execute(op, inputs, attrs)[0]


def _int32_indices(values, op: str, what: str) -> np.ndarray:
    """Dimension indices (an axis, a permutation) as the int32 tensor TensorFlow's ops take;
    values that are not integers or that no dimension can have are an InvalidArgumentError."""
    from .errors import InvalidArgumentError

    try:
        array = np.asarray(values)
        if array.dtype.kind not in "iu" and array.size:
            raise TypeError
        if array.size and not (-2**31 <= int(array.min()) and int(array.max()) < 2**31):
            raise OverflowError
        return array.astype(np.int32)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(f"{op}: {what} must be integer dimension indices of the "
                                   f"input, not {values!r}", call=op) from None



def identity(x) -> Tensor:
    return _one("Identity", [x])


def add(x, y) -> Tensor:
    return execute("AddV2", (x, y))[0]


def subtract(x, y) -> Tensor:
    return execute("Sub", (x, y))[0]


def multiply(x, y) -> Tensor:
    return execute("Mul", (x, y))[0]


def divide(x, y) -> Tensor:
    """RealDiv: true division for floating point, truncating division for integers."""
    return execute("RealDiv", (x, y))[0]


def maximum(x, y) -> Tensor:
    return execute("Maximum", (x, y))[0]


def minimum(x, y) -> Tensor:
    return execute("Minimum", (x, y))[0]


def negative(x) -> Tensor:
    return _one("Neg", [x])


def abs(x) -> Tensor:  # noqa: A001 - TensorFlow's name
    return _one("Abs", [x])


def square(x) -> Tensor:
    return _one("Square", [x])


def sqrt(x) -> Tensor:
    return _one("Sqrt", [x])


def rsqrt(x) -> Tensor:
    return _one("Rsqrt", [x])


def exp(x) -> Tensor:
    return _one("Exp", [x])


def log(x) -> Tensor:
    return _one("Log", [x])


def tanh(x) -> Tensor:
    return _one("Tanh", [x])


def sigmoid(x) -> Tensor:
    return _one("Sigmoid", [x])


def relu(features) -> Tensor:
    return _one("Relu", [features])


def relu6(features) -> Tensor:
    return _one("Relu6", [features])


def cast(x, dtype) -> Tensor:
    return _one("Cast", [x], {"DstT": as_dtype(dtype)})


def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """MatMul for matrices, BatchMatMulV2 (with broadcast batch dimensions) otherwise."""
    rank_a = a.ndim if isinstance(a, Tensor) else np.ndim(a)
    rank_b = b.ndim if isinstance(b, Tensor) else np.ndim(b)
    if rank_a == 2 and rank_b == 2:
        return _one("MatMul", [a, b], {"transpose_a": transpose_a, "transpose_b": transpose_b})
    return _one("BatchMatMulV2", [a, b], {"adj_x": transpose_a, "adj_y": transpose_b})


def bias_add(value, bias, data_format: str = "NHWC") -> Tensor:
    return _one("BiasAdd", [value, bias], {"data_format": data_format})


def _reduce(op: str, x, axis, keepdims: bool) -> Tensor:
    if axis is None:
        rank = x.ndim if isinstance(x, Tensor) else np.ndim(x)
        axis = list(range(rank))
    return _one(op, [x, _int32_indices(axis, op, "axis")], {"keep_dims": keepdims})


def reduce_sum(x, axis=None, keepdims: bool = False) -> Tensor:
    return _reduce("Sum", x, axis, keepdims)


def reduce_mean(x, axis=None, keepdims: bool = False) -> Tensor:
    return _reduce("Mean", x, axis, keepdims)


def reduce_max(x, axis=None, keepdims: bool = False) -> Tensor:
    return _reduce("Max", x, axis, keepdims)


def reduce_min(x, axis=None, keepdims: bool = False) -> Tensor:
    return _reduce("Min", x, axis, keepdims)


def reduce_prod(x, axis=None, keepdims: bool = False) -> Tensor:
    return _reduce("Prod", x, axis, keepdims)


def softmax(logits) -> Tensor:
    return _one("Softmax", [logits])


def log_softmax(logits) -> Tensor:
    return _one("LogSoftmax", [logits])


def conv2d(input, filters, strides, padding, data_format: str = "NHWC",  # noqa: A002
           dilations=1) -> Tensor:
    """Conv2D with TensorFlow's conventions: NHWC input, HWIO filters; ``strides`` and
    ``dilations`` are an int, a pair, or four values; ``padding`` is "SAME", "VALID" or a
    list of four (before, after) pairs."""
    attrs = {"strides": _four(strides), "dilations": _four(dilations),
             "data_format": data_format}
    if isinstance(padding, str):
        attrs["padding"] = padding
    else:
        attrs["padding"] = "EXPLICIT"
        attrs["explicit_paddings"] = [int(v) for pair in padding for v in pair]
    return _one("Conv2D", [input, filters], attrs)


def _four(value) -> Sequence[int]:
    if isinstance(value, (int, np.integer)):
        return [1, int(value), int(value), 1]
    values = [int(v) for v in value]
    if len(values) == 2:
        return [1, values[0], values[1], 1]
    return values


def reshape(tensor, shape) -> Tensor:
    return _one("Reshape", [tensor, np.asarray(shape, dtype=np.int64)])


def transpose(a, perm: Optional[Sequence[int]] = None) -> Tensor:
    if perm is None:
        rank = a.ndim if isinstance(a, Tensor) else np.ndim(a)
        perm = list(range(rank))[::-1]
    return _one("Transpose", [a, _int32_indices(perm, "Transpose", "perm")])


def fill(dims, value) -> Tensor:
    return _one("Fill", [np.asarray(dims, dtype=np.int64), value])


def zeros_like(x) -> Tensor:
    return _one("ZerosLike", [x])


def ones_like(x) -> Tensor:
    return _one("OnesLike", [x])


def equal(x, y) -> Tensor:
    return execute("Equal", (x, y))[0]


def less(x, y) -> Tensor:
    return execute("Less", (x, y))[0]


def greater(x, y) -> Tensor:
    return execute("Greater", (x, y))[0]


def where(condition, x, y) -> Tensor:
    """Select: elements of ``x`` where ``condition`` holds, else of ``y``."""
    return _one("Select", [condition, x, y])


def argmax(input, axis: int = 0, output_type: Any = "int64") -> Tensor:  # noqa: A002
    return _one("ArgMax", [input, _int32_indices(axis, "ArgMax", "axis")],
                {"output_type": as_dtype(output_type)})

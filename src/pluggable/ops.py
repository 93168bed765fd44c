"""The op library's Python functions with TensorFlow's names and parameters: ``tf.*``,
``tf.math.*``, ``tf.nn.*`` and ``tf.bitwise.*`` functions as ``pluggable.ops.<name>``
(``reduce_sum(input_tensor, axis=None, keepdims=False, name=None)``, ``concat(values, axis)``,
``gather(params, indices, ...)``, ...). Each runs one op of `pluggable.raw_ops` (a few run
two or three); where it runs is decided by `pluggable.device` scopes and the inputs (see
`pluggable.eager.dispatch`). ``name`` is accepted and ignored, as in eager TensorFlow.
tests/frontend/test_ops_names.py checks every signature against TensorFlow 2.21's.
"""
from __future__ import annotations

import builtins
import operator
from typing import List, Sequence

import numpy as np

from .base import dtypes as _dt
from .base.native import compiled as _compiled
from .eager.dispatch import _missed, execute
from .eager.operators import plain_matmul
from .base.dtypes import as_dtype
from .base.errors import InvalidArgumentError, UnimplementedError
from .tensors.placement import explicit_device as _on
from .tensors.tensor import Tensor, tensor as _tensor

__all__ = [
    # creation and conversion
    "constant", "convert_to_tensor", "zeros", "ones", "zeros_like", "ones_like", "fill",
    "eye", "range", "identity", "cast",
    # arithmetic
    "add", "subtract", "multiply", "divide", "truediv", "realdiv", "floordiv", "floormod",
    "mod", "truncatediv", "truncatemod", "divide_no_nan", "xdivy", "pow", "maximum",
    "minimum", "squared_difference", "add_n", "negative", "abs", "square", "sqrt", "rsqrt",
    "exp", "log", "log1p", "expm1", "reciprocal", "sign", "floor", "ceil", "round", "rint",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh",
    "atanh", "erf", "clip_by_value", "cumsum", "cumprod",
    # comparisons, logic, bits
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "is_nan",
    "is_inf", "is_finite", "logical_and", "logical_or", "logical_not", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
    # activations and nn
    "tanh", "sigmoid", "relu", "relu6", "elu", "selu", "leaky_relu", "softplus", "softsign",
    "softmax", "log_softmax", "bias_add", "conv2d", "max_pool2d", "max_pool",
    "softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_with_logits", "matmul",
    # reductions
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_all",
    "reduce_any", "argmax", "argmin",
    # shapes and arrays
    "reshape", "transpose", "shape", "size", "rank", "concat", "stack", "unstack", "split",
    "pad", "squeeze", "expand_dims", "tile", "broadcast_to", "reverse", "slice",
    "strided_slice", "gather", "gather_nd", "boolean_mask", "one_hot", "where",
]


# The first output of an op without attributes: from its remembered plan in C (host values
# among its inputs too), else from dispatch.execute (one call either way).
_run = _compiled.run
_execute_constants = _compiled.execute_constants


def _one(op: str, inputs, attrs=None) -> Tensor:
    if not attrs:
        return _run(op, inputs)
    found = _execute_constants(op, inputs, attrs)  # the call's remembered plan, in C
    if type(found) is list:
        return found[0]
    return _missed(op, inputs, attrs, found)[0]


_ints_cache: dict = {}  # (conversion, type, value) -> its read-only array


def _memo_ints(convert, values, *args) -> np.ndarray:
    """``convert(values, *args)``: an int or a short list or tuple of ints (the usual axis,
    permutation or shape) is converted once and its array, read-only, reused."""
    kind = type(values)
    if kind is int or ((kind is list or kind is tuple) and len(values) <= 8
                       and all(type(v) is int for v in values)):
        key = (convert, kind, values if kind is not list else tuple(values))
        cached = _ints_cache.get(key)
        if cached is None:
            cached = convert(values, *args)
            cached.flags.writeable = False
            if len(_ints_cache) >= 1024:
                _ints_cache.clear()
            _ints_cache[key] = cached
        return cached
    return convert(values, *args)


def _int32_indices(values, op: str, what: str) -> np.ndarray:
    """Dimension indices (an axis, a permutation) as the int32 tensor TensorFlow's ops take;
    values that are not integers or that no dimension can have are an InvalidArgumentError."""
    return _memo_ints(_int32_indices_of, values, op, what)


def _int32_indices_of(values, op: str, what: str) -> np.ndarray:
    if isinstance(values, Tensor):
        values = values.numpy()
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


def _rank(x) -> int:
    return x.ndim if isinstance(x, Tensor) else np.ndim(x)


def _no_layout(layout) -> None:
    if layout is not None:
        raise UnimplementedError("layout (DTensor) is not supported; leave it None",
                                 call="layout")


# -- creation and conversion --------------------------------------------------------------
# Every function that makes a tensor takes ``device=`` (keyword only, not TensorFlow's): an
# explicit device wins over the ``with pluggable.device(...)`` scope.

def constant(value, dtype=None, shape=None, name="Const", *, device=None) -> Tensor:
    """A tensor of ``value`` on ``device``, else the device of the current scope, else the
    CPU; with ``shape``, a scalar or single value is repeated to fill it, and a value of as
    many elements is reshaped."""
    result = _tensor(value, dtype=dtype, device=device)
    if shape is None:
        return result
    dims = tuple(int(n) for n in shape)
    count = int(np.prod(dims, dtype=np.int64))
    with _on(result._device):
        if result.size == count:
            return reshape(result, dims) if result._shape != dims else result
        if result.size == 1:
            return fill(dims, reshape(result, ()))
    raise InvalidArgumentError(f"constant: a value of {result.size} elements (shape "
                               f"{result.shape}) cannot fill shape {list(dims)} "
                               f"({count} elements)", call="constant")


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None, *,
                      device=None) -> Tensor:
    """``value`` itself when it is a tensor (of ``dtype`` when given: a tensor of another
    dtype is an error, not a cast), else a new tensor (on ``device`` when given); a tensor
    elsewhere than an explicit ``device`` is copied there. ``dtype_hint`` is used when the
    value can take it."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != as_dtype(dtype):
            raise InvalidArgumentError(
                f"convert_to_tensor: the tensor is {value.dtype.name}, not "
                f"{as_dtype(dtype).name}; use pluggable.ops.cast to change its dtype",
                call="convert_to_tensor")
        return value if device is None else value.to(device)
    if dtype is None and dtype_hint is not None:
        try:
            return _tensor(value, dtype=dtype_hint, device=device)
        except InvalidArgumentError:
            pass
    return _tensor(value, dtype=dtype, device=device)


def zeros(shape, dtype=_dt.float32, name=None, layout=None, *, device=None) -> Tensor:
    _no_layout(layout)
    from .tensors.tensor import zeros as make_zeros

    return make_zeros(shape, dtype, device)


def ones(shape, dtype=_dt.float32, name=None, layout=None, *, device=None) -> Tensor:
    _no_layout(layout)
    return fill(shape, np.ones((), as_dtype(dtype).numpy_dtype), device=device)


def zeros_like(input, dtype=None, name=None, layout=None, *,  # noqa: A002
               device=None) -> Tensor:
    """Zeros of ``input``'s shape (and dtype, or ``dtype``), on ``input``'s device unless
    a scope or ``device`` says otherwise."""
    _no_layout(layout)
    with _on(device):
        result = _one("ZerosLike", [input])
        return result if dtype is None else cast(result, dtype)


def ones_like(input, dtype=None, name=None, layout=None, *,  # noqa: A002
              device=None) -> Tensor:
    _no_layout(layout)
    with _on(device):
        result = _one("OnesLike", [input])
        return result if dtype is None else cast(result, dtype)


def fill(dims, value, name=None, layout=None, *, device=None) -> Tensor:
    _no_layout(layout)
    if device is None:
        return _one("Fill", [np.asarray(dims, dtype=np.int64), value])
    with _on(device):
        return _one("Fill", [np.asarray(dims, dtype=np.int64), value])


def eye(num_rows, num_columns=None, batch_shape=None, dtype=_dt.float32, name=None, *,
        device=None) -> Tensor:
    """The identity matrix of ``num_rows`` rows (and ``num_columns`` columns), repeated over
    ``batch_shape`` when given."""
    target = as_dtype(dtype)
    matrix = np.eye(int(num_rows), None if num_columns is None else int(num_columns),
                    dtype=target.numpy_dtype)
    if batch_shape is not None:
        batch = tuple(int(n) for n in _host_ints(batch_shape).reshape(-1))
        matrix = np.broadcast_to(matrix, batch + matrix.shape)
    return _tensor(matrix, dtype=target, device=device)


def range(start, limit=None, delta=1, dtype=None, name="range", *,  # noqa: A001
          device=None) -> Tensor:
    """``range(limit)`` or ``range(start, limit, delta)``, as ``tf.range``: the dtype is
    ``dtype``, else the widest of the arguments' (Python ints int32, floats float32)."""
    if limit is None:
        start, limit = 0, start
    values = [start, limit, delta]
    if dtype is None:
        kinds = [as_dtype(v.dtype) if isinstance(v, (Tensor, np.ndarray, np.generic))
                 else _tensor(v, device="CPU").dtype for v in values]
        order = ["int32", "int64", "float16", "bfloat16", "float32", "float64"]
        dtype = builtins.max(kinds, key=lambda d: order.index(d.name)
                             if d.name in order else -1)
    target = as_dtype(dtype)
    values = [v if isinstance(v, Tensor) and v.dtype == target else
              np.asarray(v.numpy() if isinstance(v, Tensor) else v).astype(target.numpy_dtype)
              for v in values]
    with _on(device):
        return _one("Range", values)


def identity(input, name=None) -> Tensor:  # noqa: A002
    return _one("Identity", [input])


def cast(x, dtype, name=None) -> Tensor:
    return _one("Cast", [x], {"DstT": as_dtype(dtype)})


# -- arithmetic ---------------------------------------------------------------------------
def add(x, y, name=None) -> Tensor:
    return _run("AddV2", (x, y))


def subtract(x, y, name=None) -> Tensor:
    return _run("Sub", (x, y))


def multiply(x, y, name=None) -> Tensor:
    return _run("Mul", (x, y))


def divide(x, y, name=None) -> Tensor:
    """``x / y`` as Python 3 and TensorFlow: integers are divided in floating point."""
    from .eager.operators import true_divide

    return true_divide(x, y)


def truediv(x, y, name=None) -> Tensor:
    return divide(x, y)


def realdiv(x, y, name=None) -> Tensor:
    """RealDiv: true division for floating point, truncating division for integers."""
    return _run("RealDiv", (x, y))


def floordiv(x, y, name=None) -> Tensor:
    return _run("FloorDiv", (x, y))


def floormod(x, y, name=None) -> Tensor:
    return _run("FloorMod", (x, y))


def mod(x, y, name=None) -> Tensor:
    return _run("FloorMod", (x, y))


def truncatediv(x, y, name=None) -> Tensor:
    return _run("TruncateDiv", (x, y))


def truncatemod(x, y, name=None) -> Tensor:
    return _run("TruncateMod", (x, y))


def divide_no_nan(x, y, name=None) -> Tensor:
    return _run("DivNoNan", (x, y))


def xdivy(x, y, name=None) -> Tensor:
    return _run("Xdivy", (x, y))


def pow(x, y, name=None) -> Tensor:  # noqa: A001
    return _run("Pow", (x, y))


def maximum(x, y, name=None) -> Tensor:
    return _run("Maximum", (x, y))


def minimum(x, y, name=None) -> Tensor:
    return _run("Minimum", (x, y))


def squared_difference(x, y, name=None) -> Tensor:
    return _run("SquaredDifference", (x, y))


def add_n(inputs, name=None) -> Tensor:
    return _one("AddN", [list(inputs)])


def _unary(name: str, op: str):
    def function(x, name=None) -> Tensor:
        return _one(op, [x])

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"Element-wise {op} (pluggable.raw_ops.{op})."
    return function


negative = _unary("negative", "Neg")
abs = _unary("abs", "Abs")  # noqa: A001
square = _unary("square", "Square")
sqrt = _unary("sqrt", "Sqrt")
rsqrt = _unary("rsqrt", "Rsqrt")
exp = _unary("exp", "Exp")
log = _unary("log", "Log")
log1p = _unary("log1p", "Log1p")
expm1 = _unary("expm1", "Expm1")
reciprocal = _unary("reciprocal", "Reciprocal")
sign = _unary("sign", "Sign")
floor = _unary("floor", "Floor")
ceil = _unary("ceil", "Ceil")
round = _unary("round", "Round")  # noqa: A001
rint = _unary("rint", "Rint")
sin = _unary("sin", "Sin")
cos = _unary("cos", "Cos")
tan = _unary("tan", "Tan")
asin = _unary("asin", "Asin")
acos = _unary("acos", "Acos")
atan = _unary("atan", "Atan")
sinh = _unary("sinh", "Sinh")
cosh = _unary("cosh", "Cosh")
asinh = _unary("asinh", "Asinh")
acosh = _unary("acosh", "Acosh")
atanh = _unary("atanh", "Atanh")
erf = _unary("erf", "Erf")
tanh = _unary("tanh", "Tanh")
sigmoid = _unary("sigmoid", "Sigmoid")
is_nan = _unary("is_nan", "IsNan")
is_inf = _unary("is_inf", "IsInf")
is_finite = _unary("is_finite", "IsFinite")
logical_not = _unary("logical_not", "LogicalNot")
invert = _unary("invert", "Invert")


def atan2(y, x, name=None) -> Tensor:
    return _run("Atan2", (y, x))


def clip_by_value(t, clip_value_min, clip_value_max, name=None) -> Tensor:
    return _one("ClipByValue", [t, clip_value_min, clip_value_max])


def _cumulative(op: str, x, axis, exclusive: bool, reverse: bool) -> Tensor:
    return _one(op, [x, _int32_indices(axis, op, "axis")], {"exclusive": exclusive,
                                                            "reverse": reverse})


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None) -> Tensor:
    return _cumulative("Cumsum", x, axis, exclusive, reverse)


def cumprod(x, axis=0, exclusive=False, reverse=False, name=None) -> Tensor:
    return _cumulative("Cumprod", x, axis, exclusive, reverse)


# -- comparisons, logic, bits -------------------------------------------------------------
def equal(x, y, name=None) -> Tensor:
    return _run("Equal", (x, y))


def not_equal(x, y, name=None) -> Tensor:
    return _run("NotEqual", (x, y))


def less(x, y, name=None) -> Tensor:
    return _run("Less", (x, y))


def less_equal(x, y, name=None) -> Tensor:
    return _run("LessEqual", (x, y))


def greater(x, y, name=None) -> Tensor:
    return _run("Greater", (x, y))


def greater_equal(x, y, name=None) -> Tensor:
    return _run("GreaterEqual", (x, y))


def logical_and(x, y, name=None) -> Tensor:
    return _run("LogicalAnd", (x, y))


def logical_or(x, y, name=None) -> Tensor:
    return _run("LogicalOr", (x, y))


def logical_xor(x, y, name="LogicalXor") -> Tensor:
    """True where exactly one of ``x`` and ``y`` is (NotEqual of booleans)."""
    x, y = (v if isinstance(v, Tensor) else _tensor(v, dtype="bool", device="CPU")
            for v in (x, y))
    if not (x.dtype.is_bool and y.dtype.is_bool):
        raise InvalidArgumentError(f"logical_xor takes bool tensors, got {x.dtype.name} and "
                                   f"{y.dtype.name}", call="logical_xor")
    return _run("NotEqual", (x, y))


def bitwise_and(x, y, name=None) -> Tensor:
    return _run("BitwiseAnd", (x, y))


def bitwise_or(x, y, name=None) -> Tensor:
    return _run("BitwiseOr", (x, y))


def bitwise_xor(x, y, name=None) -> Tensor:
    return _run("BitwiseXor", (x, y))


def left_shift(x, y, name=None) -> Tensor:
    return _run("LeftShift", (x, y))


def right_shift(x, y, name=None) -> Tensor:
    return _run("RightShift", (x, y))


# -- activations and nn -------------------------------------------------------------------
def relu(features, name=None) -> Tensor:
    return _one("Relu", [features])


def relu6(features, name=None) -> Tensor:
    return _one("Relu6", [features])


def elu(features, name=None) -> Tensor:
    return _one("Elu", [features])


def selu(features, name=None) -> Tensor:
    return _one("Selu", [features])


def softplus(features, name=None) -> Tensor:
    return _one("Softplus", [features])


def softsign(features, name=None) -> Tensor:
    return _one("Softsign", [features])


def leaky_relu(features, alpha=0.2, name=None) -> Tensor:
    return _one("LeakyRelu", [features], {"alpha": float(alpha)})


def _last_axis(op: str, logits, axis) -> Tensor:
    rank = _rank(logits)
    if axis is None or axis in (-1, rank - 1):
        return _one(op, [logits])
    if not -rank <= axis < rank:
        raise InvalidArgumentError(f"{op}: axis {axis} is out of range for logits of rank "
                                   f"{rank}", call=op)
    perm = list(builtins.range(rank))
    perm[axis % rank], perm[-1] = perm[-1], perm[axis % rank]
    return transpose(_one(op, [transpose(logits, perm)]), perm)


def softmax(logits, axis=None, name=None) -> Tensor:
    return _last_axis("Softmax", logits, axis)


def log_softmax(logits, axis=None, name=None) -> Tensor:
    return _last_axis("LogSoftmax", logits, axis)


def bias_add(value, bias, data_format=None, name=None) -> Tensor:
    return _one("BiasAdd", [value, bias], {"data_format": data_format or "NHWC"})


def conv2d(input, filters, strides, padding, data_format="NHWC",  # noqa: A002
           dilations=None, name=None) -> Tensor:
    """Conv2D with TensorFlow's conventions: NHWC input, HWIO filters; ``strides`` and
    ``dilations`` are an int, a pair, or four values; ``padding`` is "SAME", "VALID" or a
    list of four (before, after) pairs."""
    attrs = {"strides": _four(strides, data_format),
             "dilations": _four(1 if dilations is None else dilations, data_format),
             "data_format": data_format}
    if isinstance(padding, str):
        attrs["padding"] = padding
    else:
        attrs["padding"] = "EXPLICIT"
        attrs["explicit_paddings"] = [int(v) for pair in padding for v in pair]
    return _one("Conv2D", [input, filters], attrs)


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None) -> Tensor:  # noqa: A002
    """MaxPool of an NHWC (or NCHW) batch: ``ksize`` and ``strides`` an int, a pair or four
    values; ``padding`` "SAME", "VALID" or a list of four (before, after) pairs."""
    attrs = {"ksize": _four(ksize, data_format), "strides": _four(strides, data_format),
             "data_format": data_format}
    if isinstance(padding, str):
        attrs["padding"] = padding
    else:
        attrs["padding"] = "EXPLICIT"
        attrs["explicit_paddings"] = [int(v) for pair in padding for v in pair]
    return _one("MaxPool", [input], attrs)


def max_pool(input, ksize, strides, padding, data_format=None, name=None) -> Tensor:  # noqa: A002
    """``tf.nn.max_pool`` for the pooling there is a kernel for: 2-D (a rank-4 input)."""
    if _rank(input) != 4:
        raise UnimplementedError(f"max_pool of a rank-{_rank(input)} input: only 2-D pooling "
                                 f"(rank 4, max_pool2d) is supported", call="max_pool")
    return max_pool2d(input, ksize, strides, padding, data_format or "NHWC")


def _two_dimensional(op: str, logits, labels, axis):
    """Logits (and dense labels) as the matrices the cross-entropy ops take: the class axis
    last, the other dimensions flattened into the batch; and the batch shape to restore."""
    rank = _rank(logits)
    if rank == 0:
        raise InvalidArgumentError(f"{op}: logits must have at least one dimension",
                                   call=op)
    if axis is not None and axis % rank != rank - 1:
        perm = [d for d in builtins.range(rank) if d != axis % rank] + [axis % rank]
        logits = transpose(logits, perm)
        labels = transpose(labels, perm)
    dims = logits.shape if isinstance(logits, Tensor) else np.shape(logits)
    batch = tuple(dims[:-1])
    if rank != 2:
        logits = reshape(logits, [-1, dims[-1]])
        if axis is not None:
            labels = reshape(labels, [-1, dims[-1]])
        else:
            labels = reshape(labels, [-1])
    return logits, labels, batch


def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None) -> Tensor:
    """The cross-entropy between ``labels`` (a probability distribution along ``axis``) and
    softmax(``logits``): one loss per example (SoftmaxCrossEntropyWithLogits)."""
    if not isinstance(logits, Tensor):
        logits = _tensor(logits, device="CPU")
    if not isinstance(labels, Tensor):
        labels = _tensor(labels, dtype=logits.dtype, device="CPU")
    logits2, labels2, batch = _two_dimensional("softmax_cross_entropy_with_logits", logits,
                                               labels, axis)
    loss = execute("SoftmaxCrossEntropyWithLogits", [logits2, labels2])[0]
    return loss if loss._shape == batch else reshape(loss, batch)


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None) -> Tensor:
    """The cross-entropy between the class indices ``labels`` (int32 or int64, one per
    example) and softmax(``logits``, last axis): one loss per example
    (SparseSoftmaxCrossEntropyWithLogits)."""
    logits2, labels2, batch = _two_dimensional("sparse_softmax_cross_entropy_with_logits",
                                               logits, labels, None)
    loss = execute("SparseSoftmaxCrossEntropyWithLogits", [logits2, labels2])[0]
    return loss if loss._shape == batch else reshape(loss, batch)


def _four(value, data_format: str = "NHWC") -> Sequence[int]:
    if isinstance(value, (int, np.integer)):
        value = [value]
    values = [int(v) for v in value]
    if len(values) in (1, 2):
        height, width = values[0], values[-1]
        return [1, 1, height, width] if data_format == "NCHW" else [1, height, width, 1]
    return values


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, output_type=None, grad_a=False,
           grad_b=False, name=None) -> Tensor:
    """MatMul for matrices, BatchMatMulV2 (with broadcast batch dimensions) otherwise.
    ``adjoint_*`` transposes and conjugates; ``*_is_sparse`` are hints, ignored here."""
    # With every attribute at its default, the op goes without attributes, which is the
    # remembered-plan path; two matrices, the usual call, straight there.
    plain = not (transpose_a or transpose_b or adjoint_a or adjoint_b or grad_a or grad_b)
    if (plain and output_type is None and type(a) is Tensor and type(b) is Tensor
            and len(a._shape) == 2 and len(b._shape) == 2):
        return _run("MatMul", (a, b))
    if (transpose_a and adjoint_a) or (transpose_b and adjoint_b):
        raise InvalidArgumentError("matmul: transpose and adjoint of one operand cannot both "
                                   "be set", call="matmul")
    if output_type is not None:
        dtype = a.dtype if isinstance(a, Tensor) else as_dtype(np.asarray(a).dtype)
        if as_dtype(output_type) != dtype:
            raise UnimplementedError(f"matmul: output_type {as_dtype(output_type).name} "
                                     f"differs from the inputs' {dtype.name}; cast the result",
                                     call="matmul")
    if plain:
        return plain_matmul(a, b)
    if _rank(a) == 2 and _rank(b) == 2:
        if not (adjoint_a and _is_complex(a)) and not (adjoint_b and _is_complex(b)):
            return _one("MatMul", [a, b], {"transpose_a": bool(transpose_a or adjoint_a),
                                           "transpose_b": bool(transpose_b or adjoint_b),
                                           "grad_a": grad_a, "grad_b": grad_b})
    if transpose_a or transpose_b:
        if _is_complex(a) or _is_complex(b):
            raise UnimplementedError("matmul: transpose_* of complex batches; use adjoint_*",
                                     call="matmul")
    return _one("BatchMatMulV2", [a, b], {"adj_x": bool(transpose_a or adjoint_a),
                                          "adj_y": bool(transpose_b or adjoint_b),
                                          "grad_x": grad_a, "grad_y": grad_b})


def _is_complex(x) -> bool:
    dtype = x.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
    return as_dtype(dtype).is_complex


# -- reductions ---------------------------------------------------------------------------
def _reduce(op: str, x, axis, keepdims: bool) -> Tensor:
    if axis is None:
        axis = list(builtins.range(_rank(x)))
    return _one(op, [x, _int32_indices(axis, op, "axis")], {"keep_dims": bool(keepdims)})


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("Sum", input_tensor, axis, keepdims)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("Mean", input_tensor, axis, keepdims)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("Max", input_tensor, axis, keepdims)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("Min", input_tensor, axis, keepdims)


def reduce_prod(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("Prod", input_tensor, axis, keepdims)


def reduce_all(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("All", input_tensor, axis, keepdims)


def reduce_any(input_tensor, axis=None, keepdims=False, name=None) -> Tensor:
    return _reduce("Any", input_tensor, axis, keepdims)


def argmax(input, axis=None, output_type=_dt.int64, name=None) -> Tensor:  # noqa: A002
    return _one("ArgMax", [input, _int32_indices(0 if axis is None else axis, "ArgMax", "axis")],
                {"output_type": as_dtype(output_type)})


def argmin(input, axis=None, output_type=_dt.int64, name=None) -> Tensor:  # noqa: A002
    return _one("ArgMin", [input, _int32_indices(0 if axis is None else axis, "ArgMin", "axis")],
                {"output_type": as_dtype(output_type)})


# -- shapes and arrays --------------------------------------------------------------------
def _host_ints(values) -> np.ndarray:
    """Shape-like arguments (shapes, axes, paddings) as a host int array (read-only)."""
    return _memo_ints(_host_ints_of, values)


def _host_ints_of(values) -> np.ndarray:
    if isinstance(values, Tensor):
        values = values.numpy()
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        if array.size and array.dtype.kind != "b":
            raise InvalidArgumentError(f"expected integers, got {array.dtype} values {values!r}",
                                       call="shape")
        array = array.astype(np.int64)
    return array.astype(np.int64 if array.dtype.itemsize > 4 else np.int32)


def reshape(tensor, shape, name=None) -> Tensor:
    return _one("Reshape", [tensor, _host_ints(shape).astype(np.int64, copy=False)])


def transpose(a, perm=None, conjugate=False, name="transpose") -> Tensor:
    if perm is None:
        perm = list(builtins.range(_rank(a)))[::-1]
    if conjugate and _is_complex(a):
        raise UnimplementedError("transpose(conjugate=True) of complex tensors",
                                 call="transpose")
    return _one("Transpose", [a, _host_ints(perm)])


def shape(input, out_type=None, name=None) -> Tensor:  # noqa: A002
    return _one("Shape", [input], {"out_type": as_dtype(out_type or _dt.int32)})


def size(input, out_type=None, name=None) -> Tensor:  # noqa: A002
    return _one("Size", [input], {"out_type": as_dtype(out_type or _dt.int32)})


def rank(input, name=None) -> Tensor:  # noqa: A002
    return _one("Rank", [input])


def concat(values, axis, name="concat") -> Tensor:
    values = list(values)
    if len(values) == 1:  # ConcatV2 takes two or more
        return identity(values[0])
    return _one("ConcatV2", [values, _host_ints(axis)])


def stack(values, axis=0, name="stack") -> Tensor:
    return _one("Pack", [list(values)], {"axis": int(axis)})


def unstack(value, num=None, axis=0, name="unstack") -> List[Tensor]:
    dims = value.shape if isinstance(value, Tensor) else np.shape(value)
    if num is None:
        if not dims:
            raise InvalidArgumentError("unstack: a scalar cannot be unstacked", call="unstack")
        num = dims[axis]
    return list(execute("Unpack", [value], {"num": int(num), "axis": int(axis)}))


def split(value, num_or_size_splits, axis=0, num=None, name="split") -> List[Tensor]:
    """``num_or_size_splits`` an int: that many equal parts (Split); a list: parts of those
    sizes, one of them may be -1 (SplitV)."""
    if isinstance(num_or_size_splits, (int, np.integer)):
        return list(execute("Split", [np.int32(axis), value],
                            {"num_split": int(num_or_size_splits)}))
    sizes = _host_ints(num_or_size_splits).reshape(-1)
    count = int(num) if num is not None else len(sizes)
    return list(execute("SplitV", [value, sizes, np.int32(axis)], {"num_split": count}))


def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None) -> Tensor:
    if str(mode).upper() != "CONSTANT":
        raise UnimplementedError(f"pad: mode {mode!r} is not supported; use 'CONSTANT'",
                                 call="pad")
    paddings = _host_ints(paddings)
    if isinstance(constant_values, (int, float)) and constant_values == 0:
        return _one("Pad", [tensor, paddings])
    return _one("PadV2", [tensor, paddings, constant_values])


def squeeze(input, axis=None, name=None) -> Tensor:  # noqa: A002
    dims = [] if axis is None else [int(a) for a in np.atleast_1d(_host_ints(axis))]
    return _one("Squeeze", [input], {"squeeze_dims": dims})


def expand_dims(input, axis, name=None) -> Tensor:  # noqa: A002
    return _one("ExpandDims", [input, _host_ints(axis)])


def tile(input, multiples, name=None) -> Tensor:  # noqa: A002
    return _one("Tile", [input, _host_ints(multiples)])


def broadcast_to(input, shape, name=None) -> Tensor:  # noqa: A002
    return _one("BroadcastTo", [input, _host_ints(shape)])


def reverse(tensor, axis, name=None) -> Tensor:
    return _one("ReverseV2", [tensor, _host_ints(axis)])


def slice(input_, begin, size, name=None) -> Tensor:  # noqa: A001
    return _one("Slice", [input_, _host_ints(begin), _host_ints(size)])


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0,
                  ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0, var=None,
                  name=None) -> Tensor:
    if var is not None:
        raise UnimplementedError("strided_slice(var=...) (variables) is not supported",
                                 call="strided_slice")
    begin, end = _host_ints(begin), _host_ints(end)
    strides = np.ones_like(begin) if strides is None else _host_ints(strides)
    return _one("StridedSlice", [input_, begin, end, strides.astype(begin.dtype)],
                {"begin_mask": begin_mask, "end_mask": end_mask,
                 "ellipsis_mask": ellipsis_mask, "new_axis_mask": new_axis_mask,
                 "shrink_axis_mask": shrink_axis_mask})


def gather(params, indices, validate_indices=None, axis=None, batch_dims=0,
           name=None) -> Tensor:
    """GatherV2: ``params`` sliced at ``indices`` along ``axis`` (default: ``batch_dims``)."""
    if axis is None:
        axis = batch_dims
    return _one("GatherV2", [params, indices, _host_ints(axis)], {"batch_dims": batch_dims})


def gather_nd(params, indices, batch_dims=0, name=None, bad_indices_policy="") -> Tensor:
    if batch_dims:
        raise UnimplementedError("gather_nd with batch_dims > 0 is not supported",
                                 call="gather_nd")
    return _one("GatherNd", [params, indices], {"bad_indices_policy": bad_indices_policy})


def boolean_mask(tensor, mask, axis=None, name="boolean_mask") -> Tensor:
    """The rows of ``tensor`` where ``mask`` (its leading dimensions) is true."""
    from .eager.operators import boolean_mask as masked

    if axis not in (None, 0):
        raise UnimplementedError("boolean_mask with axis > 0 is not supported",
                                 call="boolean_mask")
    return masked(tensor if isinstance(tensor, Tensor) else _tensor(tensor), mask)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None,
            name=None) -> Tensor:
    """OneHot: the dtype is ``dtype``, else that of ``on_value``/``off_value``, else
    float32."""
    given = [v for v in (on_value, off_value) if v is not None]
    if dtype is None:
        dtype = (given[0].dtype if given and isinstance(given[0], Tensor)
                 else _tensor(given[0], device="CPU").dtype if given else _dt.float32)
    target = as_dtype(dtype)
    on = np.asarray(1 if on_value is None else on_value)
    off = np.asarray(0 if off_value is None else off_value)
    try:
        depth = operator.index(depth)
    except TypeError:
        raise InvalidArgumentError(f"one_hot: depth must be an integer, not {depth!r}",
                                   call="OneHot") from None
    if not 0 <= depth < 2**31:
        raise InvalidArgumentError(f"one_hot: depth must be in [0, 2**31), got {depth}",
                                   call="OneHot")
    return _one("OneHot", [indices, np.int32(depth), on.astype(target.numpy_dtype),
                           off.astype(target.numpy_dtype)],
                {"axis": -1 if axis is None else int(axis)})


def where(condition, x=None, y=None, name=None) -> Tensor:
    """With ``x`` and ``y``: their elements where ``condition`` holds, broadcasting the
    three (SelectV2). Alone: the coordinates of the true elements, an int64 matrix (Where)."""
    if x is None and y is None:
        return _one("Where", [condition])
    if x is None or y is None:
        raise InvalidArgumentError("where: give both x and y, or neither", call="where")
    return _one("SelectV2", [condition, x, y])


"""Math ops of the op library: comparisons, the division family, powers, bitwise and logical
ops, trigonometry, rounding, activations, AddN, ClipByValue, the boolean reductions, ArgMin,
and random numbers (stateful ops seeded by ``seed``/``seed2``, stateless ops by a seed
tensor).

Inputs, attributes and defaults are those of TensorFlow's OpDefs; each op has its shape
inference and its NumPy kernel for the CPU, registered into `op_defs.OPS`. Integer division
by zero is an `InvalidArgumentError`, as on TensorFlow's CPU. Random numbers come from NumPy's
Philox generator: seeded runs repeat, but the values are not TensorFlow's.
"""
from __future__ import annotations

import threading
from typing import Dict, Tuple

import numpy as np

from ..base import dtypes as dt
from .core import (ALL, COMPLEX, OPS, FLOATS, INDEX, INTS, NUMBER, REAL, Arg, Attr, _axes,
                      _binary, _define, _real_div, _reduce_infer_for, _unary, bad, broadcast,
                      fill_dims)

_SIGNED = tuple(t for t in NUMBER if not t.name.startswith("uint"))
_FLOAT_COMPLEX = FLOATS + COMPLEX


def _no_zero_divisor(op: str, x: np.ndarray, y: np.ndarray) -> None:
    if np.issubdtype(np.asarray(x).dtype, np.integer) and np.any(np.asarray(y) == 0):
        raise bad(op, "Integer division by zero")


# -- comparisons ----------------------------------------------------------------------------
_binary("NotEqual", np.not_equal, ALL, out=dt.bool_)
_binary("GreaterEqual", np.greater_equal, REAL, out=dt.bool_)
_binary("LessEqual", np.less_equal, REAL, out=dt.bool_)
# TensorFlow's NotEqual has Equal's attribute.
OPS["NotEqual"].attrs += (Attr("incompatible_shape_error", "bool", True),)


# -- division, powers -----------------------------------------------------------------------
def _floor_div(x, y):
    _no_zero_divisor("FloorDiv", x, y)
    if np.issubdtype(x.dtype, np.integer):
        return np.floor_divide(x, y)
    return np.floor(np.true_divide(x, y))


def _floor_mod(x, y):
    _no_zero_divisor("FloorMod", x, y)
    if np.issubdtype(x.dtype, np.integer):
        return np.mod(x, y)
    # The result takes the divisor's sign, as Python's %.
    r = np.fmod(x, y)
    return np.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)


def _truncate_div(x, y):
    _no_zero_divisor("TruncateDiv", x, y)
    if np.issubdtype(x.dtype, np.integer):
        return _real_div(x, y)
    return np.trunc(np.true_divide(x, y))


def _truncate_mod(x, y):
    _no_zero_divisor("TruncateMod", x, y)
    return np.fmod(x, y)


def _div_no_nan(x, y):
    return np.where(y == 0, np.zeros((), x.dtype), np.true_divide(x, np.where(y == 0, 1, y)))


def _pow(x, y):
    if np.issubdtype(x.dtype, np.integer) and np.any(np.asarray(y) < 0):
        raise bad("Pow", "Integers to negative integer powers are not allowed")
    result = np.power(x, y)
    if x.dtype.kind == "f" and np.any(y == 0.5):
        # NumPy takes a square root for a broadcast exponent of 0.5, which gives NaN for -inf
        # and -0 for -0; the element-wise power (C's pow, TensorFlow's) gives +inf and +0.
        result = np.where((y == 0.5) & ((x == 0) | np.isinf(x)), np.abs(x), result)
    return result


def _xdivy(x, y):
    return np.where(x == 0, np.zeros((), x.dtype), np.true_divide(x, y))


_binary("Pow", _pow, _SIGNED)
_binary("FloorDiv", _floor_div, REAL)
_binary("FloorMod", _floor_mod, REAL)
_binary("TruncateDiv", _truncate_div, REAL)
_binary("TruncateMod", _truncate_mod, FLOATS + (dt.int32, dt.int64))
_binary("DivNoNan", _div_no_nan, _FLOAT_COMPLEX)
_binary("Xdivy", _xdivy, _FLOAT_COMPLEX)
_binary("SquaredDifference", lambda x, y: (x - y) * np.conj(x - y),
        FLOATS + COMPLEX + (dt.int32, dt.int64))
# Atan2's inputs are y then x, as atan2(y, x).
_binary("Atan2", np.arctan2, FLOATS)
OPS["Atan2"].inputs = (Arg("y", "T"), Arg("x", "T"))


# -- bitwise and logical --------------------------------------------------------------------
def _shift(fn):
    def shift(x, y):
        # TensorFlow clamps the shift to [0, bits - 1] instead of leaving it undefined.
        bits = x.dtype.itemsize * 8
        return fn(x, np.clip(y, 0, bits - 1).astype(x.dtype))
    return shift


_binary("BitwiseAnd", np.bitwise_and, INTS)
_binary("BitwiseOr", np.bitwise_or, INTS)
_binary("BitwiseXor", np.bitwise_xor, INTS)
_binary("LeftShift", _shift(np.left_shift), INTS)
_binary("RightShift", _shift(np.right_shift), INTS)
_unary("Invert", np.invert, INTS)


def _logical(name, fn):
    _define(name, [Arg("x", dtype=dt.bool_), Arg("y", dtype=dt.bool_)],
            [Arg("z", dtype=dt.bool_)], [],
            lambda meta, attrs, host: [broadcast(name, meta[0].shape, meta[1].shape)],
            lambda arrays, attrs: [fn(*arrays)])


_logical("LogicalAnd", np.logical_and)
_logical("LogicalOr", np.logical_or)
_define("LogicalNot", [Arg("x", dtype=dt.bool_)], [Arg("y", dtype=dt.bool_)], [],
        lambda meta, attrs, host: [meta[0].shape],
        lambda arrays, attrs: [np.logical_not(arrays[0])])


# -- element-wise functions -----------------------------------------------------------------
for _name, _fn in (("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin),
                   ("Acos", np.arccos), ("Atan", np.arctan), ("Sinh", np.sinh),
                   ("Cosh", np.cosh), ("Asinh", np.arcsinh), ("Acosh", np.arccosh),
                   ("Atanh", np.arctanh), ("Log1p", np.log1p), ("Expm1", np.expm1)):
    _unary(_name, _fn, _FLOAT_COMPLEX)
_unary("Floor", np.floor, FLOATS)
_unary("Ceil", np.ceil, FLOATS)
_unary("Rint", np.rint, FLOATS)
_unary("Round", np.round, _SIGNED)  # half to even, as TensorFlow
_unary("Sign", lambda x: np.sign(x) if x.dtype.kind != "c" else
       np.where(x == 0, 0, x / np.where(x == 0, 1, np.abs(x))), _SIGNED)
_unary("Reciprocal", lambda x: _real_div(np.ones_like(x), x), _SIGNED)


def _erf(x):
    from math import erf

    return np.vectorize(erf, otypes=[np.float64])(x.astype(np.float64)) if x.size else x


_unary("Erf", _erf, FLOATS)


def _softplus(x):
    return np.logaddexp(np.zeros((), x.dtype), x)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805
_unary("Softplus", _softplus, FLOATS, "features", "activations")
_unary("Softsign", lambda x: x / (1 + np.abs(x)), FLOATS, "features", "activations")
_unary("Elu", lambda x: np.where(x > 0, x, np.expm1(x)), FLOATS, "features", "activations")
_unary("Selu", lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(x)), FLOATS,
       "features", "activations")


def _leaky_relu_cpu(arrays, attrs):
    x = arrays[0]
    return [np.where(x > 0, x, x * x.dtype.type(attrs["alpha"])).astype(x.dtype)]


_define("LeakyRelu", [Arg("features", "T")], [Arg("activations", "T")],
        [Attr("alpha", "float", 0.2), Attr("T", "type", dt.float32, allowed=FLOATS)],
        lambda meta, attrs, host: [meta[0].shape], _leaky_relu_cpu)


def _predicate(name, fn):
    _define(name, [Arg("x", "T")], [Arg("y", dtype=dt.bool_)],
            [Attr("T", "type", allowed=FLOATS)], lambda meta, attrs, host: [meta[0].shape],
            lambda arrays, attrs: [fn(arrays[0])])


_predicate("IsNan", np.isnan)
_predicate("IsInf", np.isinf)
_predicate("IsFinite", np.isfinite)


# -- several inputs -------------------------------------------------------------------------
def _add_n_infer(meta, attrs, host):
    first = meta[0].shape
    for i, m in enumerate(meta[1:], 1):
        if m.shape != first:
            raise bad("AddN", f"inputs[{i}] has shape {m.shape}, inputs[0] {first}: AddN "
                              f"adds tensors of one shape")
    return [first]


def _add_n_cpu(arrays, attrs):
    total = arrays[0].copy()
    with np.errstate(all="ignore"):
        for a in arrays[1:]:
            total += a
    return [total]


_define("AddN", [Arg("inputs", "T", number_attr="N")], [Arg("sum", "T")],
        [Attr("N", "int", minimum=1), Attr("T", "type", allowed=NUMBER)],
        _add_n_infer, _add_n_cpu)


def _clip_infer(meta, attrs, host):
    shape = meta[0].shape
    for m, what in ((meta[1], "clip_value_min"), (meta[2], "clip_value_max")):
        if m.shape not in ((), shape):
            raise bad("ClipByValue", f"{what} must be a scalar or have t's shape {shape}, "
                                     f"got {m.shape}")
    return [shape]


_define("ClipByValue", [Arg("t", "T"), Arg("clip_value_min", "T"),
                        Arg("clip_value_max", "T")], [Arg("output", "T")],
        [Attr("T", "type", allowed=REAL)], _clip_infer,
        lambda arrays, attrs: [np.minimum(np.maximum(arrays[0], arrays[1]), arrays[2])
                               .astype(arrays[0].dtype)])


# -- reductions -----------------------------------------------------------------------------
def _bool_reduce(name, fn):
    def cpu(arrays, attrs):
        x = arrays[0]
        axes = tuple(_axes(name, arrays[1], x.ndim, "reduction axis"))
        return [np.asarray(fn(x, axis=axes, keepdims=attrs["keep_dims"]))]

    _define(name, [Arg("input", dtype=dt.bool_), Arg("reduction_indices", "Tidx", host=True)],
            [Arg("output", dtype=dt.bool_)],
            [Attr("keep_dims", "bool", False), Attr("Tidx", "type", dt.int32, allowed=INDEX)],
            _reduce_infer_for(name), cpu)


_bool_reduce("All", np.all)
_bool_reduce("Any", np.any)


def _argmin_axis(shape, values) -> int:
    if not shape:
        raise bad("ArgMin", "input must have rank 1 or more")
    if np.asarray(values).size != 1:
        raise bad("ArgMin", f"dimension must be a scalar, got {np.asarray(values).shape}")
    (axis,) = _axes("ArgMin", values, len(shape), "dimension")
    if shape[axis] == 0:
        raise bad("ArgMin", f"cannot take the argmin over an empty dimension ({shape})")
    return axis


def _argmin_infer(meta, attrs, host):
    shape = meta[0].shape
    axis = _argmin_axis(shape, host[1])
    return [tuple(n for i, n in enumerate(shape) if i != axis)]


_define("ArgMin", [Arg("input", "T"), Arg("dimension", "Tidx", host=True)],
        [Arg("output", "output_type")],
        [Attr("T", "type", allowed=REAL), Attr("Tidx", "type", dt.int32, allowed=INDEX),
         Attr("output_type", "type", dt.int64, allowed=INDEX)], _argmin_infer,
        lambda arrays, attrs: [np.argmin(arrays[0], axis=_argmin_axis(arrays[0].shape,
                                                                      arrays[1]))
                               .astype(attrs["output_type"].numpy_dtype)])


# -- random numbers -------------------------------------------------------------------------
_RANDOM_FLOATS = (dt.float16, dt.bfloat16, dt.float32, dt.float64)
_generators: Dict[Tuple[int, int], np.random.Generator] = {}
_generators_lock = threading.Lock()


def _stateful_generator(attrs) -> np.random.Generator:
    """Seeded ops draw from one generator per (seed, seed2), so repeated calls give new
    numbers in a sequence that repeats from process to process; unseeded ops, fresh ones."""
    key = (attrs["seed"], attrs["seed2"])
    if key == (0, 0):
        return np.random.Generator(np.random.Philox())
    with _generators_lock:
        generator = _generators.get(key)
        if generator is None:
            generator = np.random.Generator(np.random.Philox(key=[key[0] & (2**64 - 1),
                                                                  key[1] & (2**64 - 1)]))
            _generators[key] = generator
        return generator


def reset_random_generators() -> None:
    """Starts every seeded sequence again (`pluggable.random.set_seed` calls it)."""
    with _generators_lock:
        _generators.clear()


def _stateless_generator(op: str, seed) -> np.random.Generator:
    values = np.asarray(seed)
    if values.shape != (2,):
        raise bad(op, f"seed must be a vector of 2 integers, got shape {values.shape}")
    return np.random.Generator(np.random.Philox(key=[int(v) & (2**64 - 1) for v in values]))


def _draw(kind: str, generator: np.random.Generator, shape, dtype: dt.DType) -> np.ndarray:
    if kind == "uniform":
        values = generator.random(shape)
    elif kind == "normal":
        values = generator.standard_normal(shape)
    else:  # truncated normal: values beyond two standard deviations are drawn again
        values = generator.standard_normal(shape)
        outside = np.abs(values) > 2
        while np.any(outside):
            values[outside] = generator.standard_normal(int(outside.sum()))
            outside = np.abs(values) > 2
    values = values.astype(dtype.numpy_dtype)
    if kind == "uniform":  # rounding to a narrower type must not reach 1.0
        values[values >= 1] = 0
    return values


def _random_op(name, kind):
    _define(name, [Arg("shape", "T", host=True)], [Arg("output", "dtype")],
            [Attr("seed", "int", 0), Attr("seed2", "int", 0),
             Attr("dtype", "type", allowed=_RANDOM_FLOATS), Attr("T", "type", allowed=INDEX)],
            lambda meta, attrs, host: [fill_dims(name, host[0])],
            lambda arrays, attrs: [_draw(kind, _stateful_generator(attrs),
                                         fill_dims(name, arrays[0]), attrs["dtype"])])


def _stateless_op(name, kind):
    _define(name, [Arg("shape", "T", host=True), Arg("seed", "Tseed", host=True)],
            [Arg("output", "dtype")],
            [Attr("dtype", "type", dt.float32, allowed=_RANDOM_FLOATS),
             Attr("T", "type", dt.int32, allowed=INDEX),
             Attr("Tseed", "type", dt.int64, allowed=INDEX)],
            lambda meta, attrs, host: [fill_dims(name, host[0])],
            lambda arrays, attrs: [_draw(kind, _stateless_generator(name, arrays[1]),
                                         fill_dims(name, arrays[0]), attrs["dtype"])])


_random_op("RandomUniform", "uniform")
_random_op("RandomStandardNormal", "normal")
_random_op("TruncatedNormal", "truncated")
_stateless_op("StatelessRandomUniform", "uniform")
_stateless_op("StatelessRandomNormal", "normal")
_stateless_op("StatelessTruncatedNormal", "truncated")


def _uniform_int_infer(meta, attrs, host):
    for m, what in ((meta[1], "minval"), (meta[2], "maxval")):
        if m.shape != ():
            raise bad("RandomUniformInt", f"{what} must be a scalar, got shape {m.shape}")
    return [fill_dims("RandomUniformInt", host[0])]


def _uniform_int_cpu(arrays, attrs):
    low, high = int(arrays[1]), int(arrays[2])
    if low >= high:
        raise bad("RandomUniformInt", f"Need minval < maxval: {low} >= {high}")
    shape = fill_dims("RandomUniformInt", arrays[0])
    return [_stateful_generator(attrs).integers(low, high, shape,
                                                dtype=attrs["Tout"].numpy_dtype)]


_define("RandomUniformInt", [Arg("shape", "T", host=True), Arg("minval", "Tout"),
                             Arg("maxval", "Tout")], [Arg("output", "Tout")],
        [Attr("seed", "int", 0), Attr("seed2", "int", 0), Attr("Tout", "type", allowed=INDEX),
         Attr("T", "type", allowed=INDEX)], _uniform_int_infer, _uniform_int_cpu)

# Each call draws new numbers from the op's own generator: stateful, as TensorFlow says.
for _name in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"):
    OPS[_name].is_stateful = True

"""Inputs for any op from a shape-less description: `generate` makes ``(inputs, attrs)`` for
an op, an element type and a seed. The conformance suite compares every kernel a plugin
registers with the NumPy reference on them, and the probe runs each kernel once on them, so
both live here, below the loader and the tools.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from ..base import dtypes as dt
from ..base.dtypes import DType


def _rng(seed: int):
    return np.random.default_rng(seed)


def values(dtype: DType, shape, seed: int, positive: bool = False) -> np.ndarray:
    """Values of ``dtype`` and ``shape`` from ``seed``; ``positive``: all above zero (for
    logarithms, roots and divisors)."""
    rng = _rng(seed)
    np_type = dtype.numpy_dtype
    if dtype == dt.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.is_integer:
        low = 1 if positive else (0 if dtype.name.startswith("uint") else -20)
        return rng.integers(low, 20, shape).astype(np_type)
    if dtype.is_complex:
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np_type)
    drawn = rng.uniform(0.5, 3.0, shape) if positive else rng.normal(size=shape)
    return drawn.astype(np_type)


UNARY_POSITIVE = {"Sqrt", "Rsqrt", "Log"}
# Element-wise functions defined on an interval only: their inputs are drawn inside it.
UNARY_DOMAINS = {"Acos": (-0.9, 0.9), "Asin": (-0.9, 0.9), "Atanh": (-0.9, 0.9),
                 "Acosh": (1.1, 3.0), "Log1p": (-0.9, 3.0), "Tan": (-1.2, 1.2)}
UNARY = {"Abs", "Neg", "Square", "Exp", "Tanh", "Sigmoid", "Relu", "Relu6", "Identity",
         "ZerosLike", "OnesLike", "Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh", "Expm1",
         "Erf", "Floor", "Ceil", "Rint", "Round", "Sign", "Softplus", "Softsign", "Elu", "Selu",
         "Invert", "Rank"} | UNARY_POSITIVE
BINARY = {"AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Equal", "Less", "Greater",
          "NotEqual", "LessEqual", "GreaterEqual", "Pow", "FloorDiv", "FloorMod", "DivNoNan",
          "Add", "Div", "TruncateDiv", "TruncateMod", "Xdivy", "SquaredDifference", "Atan2",
          "BitwiseAnd", "BitwiseOr", "BitwiseXor"}
DIVIDES = {"RealDiv", "FloorDiv", "FloorMod", "DivNoNan", "Div", "TruncateDiv", "TruncateMod",
           "Xdivy"}
# Shifts: the second input is a small non-negative shift count.
SHIFTS = {"LeftShift", "RightShift"}
# Ops of bool tensors only, whatever element type the check runs over.
LOGICAL_UNARY = {"LogicalNot"}
LOGICAL_BINARY = {"LogicalAnd", "LogicalOr"}
BOOL_REDUCTIONS = {"All", "Any"}
# Predicates on floats: their inputs hold some infinities and NaNs.
PREDICATES = {"IsFinite", "IsInf", "IsNan"}
# Cast's target when the registration leaves DstT free: one of these, by seed.
CAST_TARGETS = ("float32", "int32", "float64", "bool")
REDUCTIONS = {"Sum", "Mean", "Max", "Min", "Prod"}

def generate(op: str, dtype: DType, seed: int, constraints: Dict[str, tuple]):
    """(inputs, attrs) for ``op`` with ``dtype``, from ``seed``: NumPy arrays and the
    attributes that are not inferred from them. ``constraints`` are the kernel's type
    constraints (Cast's ``DstT`` picks the target). None for ops whose inputs need more than
    a shape and a dtype. An input is an array, a list of arrays (a list argument) or a
    `Variable` (a resource input)."""
    rng = _rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(1, 4)))
    if op in UNARY:
        return [values(dtype, shape, seed, op in UNARY_POSITIVE)], {}
    if op in UNARY_DOMAINS:
        low, high = UNARY_DOMAINS[op]
        return [rng.uniform(low, high, shape).astype(dtype.numpy_dtype)], {}
    if op == "Reciprocal":  # magnitudes from 0.5 (1 for integers) up, either sign
        signs = rng.choice(np.array([-1, 1], np.int8), shape)
        return [(values(dtype, shape, seed, positive=True) * signs).astype(dtype.numpy_dtype)], {}
    if op in PREDICATES:
        x = values(dtype, shape, seed)
        specials = np.array([np.inf, -np.inf, np.nan], dtype.numpy_dtype)
        x.reshape(-1)[rng.integers(0, x.size, max(1, x.size // 3))] = \
            specials[rng.integers(0, 3, max(1, x.size // 3))]
        return [x], {}
    if op in SHIFTS:
        counts = rng.integers(0, 4, shape[-1:] if seed % 2 else shape)
        return [values(dtype, shape, seed), counts.astype(dtype.numpy_dtype)], {}
    if op in LOGICAL_UNARY:
        return [values(dt.bool_, shape, seed)], {}
    if op in LOGICAL_BINARY:
        other = shape[-1:] if seed % 2 else shape
        return [values(dt.bool_, shape, seed), values(dt.bool_, other, seed + 1)], {}
    if op in BOOL_REDUCTIONS:
        axis = _index([int(rng.integers(0, len(shape)))], constraints, "Tidx", seed)
        return [values(dt.bool_, shape, seed), axis], {"keep_dims": bool(seed % 2)}
    if op in BINARY:
        other = shape[-1:] if seed % 2 else shape  # broadcasting half of the time
        return [values(dtype, shape, seed), values(dtype, other, seed + 1,
                                                     op in DIVIDES or op == "Pow")], {}
    if op in REDUCTIONS:
        axis = np.array([int(rng.integers(0, len(shape)))], np.int32)
        return [values(dtype, shape, seed), axis], {"keep_dims": bool(seed % 2)}
    if op in ("Softmax", "LogSoftmax"):
        return [values(dtype, (3, 5), seed)], {}
    if op == "MatMul":
        m, k, n = (int(v) for v in rng.integers(1, 33, 3))
        return [values(dtype, (m, k), seed), values(dtype, (k, n), seed + 1)], {}
    if op == "BatchMatMulV2":
        return [values(dtype, (2, 3, 4), seed), values(dtype, (4, 5), seed + 1)], {}
    if op == "BiasAdd":
        return [values(dtype, (4, 6), seed), values(dtype, (6,), seed + 1)], {}
    if op == "Select":
        return [values(dt.bool_, shape, seed), values(dtype, shape, seed + 1),
                values(dtype, shape, seed + 2)], {}
    if op == "Cast":
        targets = constraints.get("DstT", ()) or CAST_TARGETS
        target = dt.as_dtype(targets[seed % len(targets)])
        return [values(dtype, shape, seed)], {"DstT": target}
    if op == "Reshape":
        return [values(dtype, (2, 6), seed), np.array([3, 4], np.int32)], {}
    if op == "Transpose":
        return [values(dtype, (2, 3, 4), seed), np.array([2, 0, 1], np.int32)], {}
    if op == "Fill":
        return [np.array(shape, np.int32), values(dtype, (), seed)], {}
    if op == "Conv2D":
        padding = "SAME" if seed % 2 else "VALID"
        return [values(dtype, (2, 6, 5, 3), seed), values(dtype, (3, 2, 3, 4), seed + 1)], \
            {"strides": [1, 1 + seed % 2, 1, 1], "padding": padding}
    if op == "ArgMax":
        return [values(dtype, (4, 7), seed), np.array(1, np.int32)], {}
    more = GENERATORS.get(op)
    return more(dtype, seed, constraints) if more is not None else None


class Variable:
    """An input that is a resource variable holding ``value``: the check makes one on each
    device it compares, and compares the variables' values after the op too."""

    def __init__(self, value: np.ndarray):
        self.value = value


def _pick(constraints: Dict[str, tuple], attr: str, default: str, seed: int) -> DType:
    """One of the types a registration allows for ``attr`` (``default`` when unconstrained)."""
    allowed = constraints.get(attr) or (default,)
    return dt.as_dtype(allowed[seed % len(allowed)])


def _index(values, constraints: Dict[str, tuple], attr: str, seed: int) -> np.ndarray:
    """Host-memory integers (a shape, begin, axis, ...) of the index type ``attr`` allows."""
    return np.array(values, _pick(constraints, attr, "int32", seed).numpy_dtype)


def _max_pooled(x: np.ndarray) -> np.ndarray:
    """A 2x2, stride-2 max pool of an NHWC array whose height and width are even."""
    n, h, w, c = x.shape
    return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def _small(dtype: DType, shape, seed: int) -> np.ndarray:
    """Values of ``dtype`` whose products stay in range (integers in [-2, 2], or [0, 2])."""
    x = values(dtype, shape, seed)
    if dtype.is_integer:
        x = np.clip(x, 0, 2) if dtype.name.startswith("uint") else np.clip(x, -2, 2)
    return x.astype(dtype.numpy_dtype)


def _with_zeros(dtype: DType, shape, seed: int) -> np.ndarray:
    """Values of ``dtype`` about half of which are zero (false), for Where."""
    x = values(dtype, shape, seed)
    x[_rng(seed + 1).integers(0, 2, shape).astype(bool)] = 0
    return x


def _random(kind: str, d: DType, s: int, c: Dict[str, tuple]):
    """A random op's shape (of the index type ``T``) and seed attributes; ``kind``
    "stateless" adds the seed input of type ``Tseed``; the output type is ``dtype``."""
    inputs = [_index([2, 3 + s % 3], c, "T", s)]
    if kind == "stateless":
        return inputs + [_index([s, 7 * s + 1], c, "Tseed", s)], \
            {"dtype": _pick(c, "dtype", "float32", s)}
    return inputs, {"dtype": _pick(c, "dtype", "float32", s), "seed": 11 + s, "seed2": 3}


def _labels(shape, seed: int) -> np.ndarray:
    """Rows of probabilities (positive, summing to 1) for the cross-entropy ops."""
    p = _rng(seed).uniform(0.1, 1.0, shape)
    return p / p.sum(axis=-1, keepdims=True)


# Inputs and attributes of the ops the chain above does not cover, by op: each takes
# (dtype, seed, the registration's type constraints). Data, one line of logic each, so that
# any runner (the probe too) can use them.
GENERATORS = {
    "AddN": lambda d, s, c: ([[values(d, (3, 4), s + i) for i in range(3)]], {}),
    "BiasAddGrad": lambda d, s, c: ([values(d, (4, 6), s)], {}),
    "BroadcastTo": lambda d, s, c: ([values(d, (3, 1), s), _index([2, 3, 4], c, "Tidx", s)],
                                    {}),
    "ConcatV2": lambda d, s, c: ([[values(d, (2, 3), s), values(d, (2, 1 + s % 3), s + 1)],
                                  _index(1 - s % 2 * 2, c, "Tidx", s)], {}),
    "Conv2DBackpropFilter": lambda d, s, c: (
        [values(d, (2, 6, 5, 3), s), np.array([3, 2, 3, 4], np.int32),
         values(d, (2, 4, 4, 4), s + 1)], {"strides": [1, 1, 1, 1], "padding": "VALID"}),
    "Conv2DBackpropInput": lambda d, s, c: (
        [np.array([2, 6, 5, 3], np.int32), values(d, (3, 2, 3, 4), s),
         values(d, (2, 4, 4, 4), s + 1)], {"strides": [1, 1, 1, 1], "padding": "VALID"}),
    "ExpandDims": lambda d, s, c: ([values(d, (2, 3), s), _index(s % 3 - 1, c, "Tdim", s)],
                                   {}),
    "GatherV2": lambda d, s, c: (
        [values(d, (5, 4), s), _index(_rng(s).integers(0, 5, 6), c, "Tindices", s),
         _index(0, c, "Taxis", s)], {}),
    "MaxPool": lambda d, s, c: ([values(d, (2, 6, 6, 3), s)],
                                {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1],
                                 "padding": "VALID"}),
    "MaxPoolGrad": lambda d, s, c: (
        [values(d, (2, 6, 6, 3), s), _max_pooled(values(d, (2, 6, 6, 3), s)),
         values(d, (2, 3, 3, 3), s + 1)],
        {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}),
    "Pack": lambda d, s, c: ([[values(d, (2, 3), s + i) for i in range(3)]],
                             {"axis": s % 3 - 1}),
    "Pad": lambda d, s, c: ([values(d, (2, 3), s), _index([[1, 0], [2, 1]], c, "Tpaddings", s)],
                            {}),
    "Range": lambda d, s, c: ([np.array(v, d.numpy_dtype) for v in (1, 11 + s, 2)], {}),
    "ReluGrad": lambda d, s, c: ([values(d, (3, 4), s), values(d, (3, 4), s + 1)], {}),
    "SelectV2": lambda d, s, c: ([values(dt.bool_, (3, 1), s), values(d, (3, 4), s + 1),
                                  values(d, (4,), s + 2)], {}),
    "Shape": lambda d, s, c: ([values(d, (2, 3, 4), s)], {"out_type": _pick(c, "out_type",
                                                                            "int32", s)}),
    "Slice": lambda d, s, c: ([values(d, (4, 5), s), _index([1, 2], c, "Index", s),
                               _index([2, -1], c, "Index", s)], {}),
    "SoftmaxCrossEntropyWithLogits": lambda d, s, c: (
        [values(d, (4, 5), s), _labels((4, 5), s).astype(d.numpy_dtype)], {}),
    "SparseSoftmaxCrossEntropyWithLogits": lambda d, s, c: (
        [values(d, (4, 5), s), _index(_rng(s).integers(0, 5, 4), c, "Tlabels", s)], {}),
    "Split": lambda d, s, c: ([np.array(1, np.int32), values(d, (2, 6), s)],
                              {"num_split": 3}),
    "SplitV": lambda d, s, c: ([values(d, (2, 6), s), _index([1, 2, 3], c, "Tlen", s),
                                np.array(1, np.int32)], {"num_split": 3}),
    "Squeeze": lambda d, s, c: ([values(d, (1, 3, 1, 4), s)],
                                {"squeeze_dims": [0] if s % 2 else []}),
    "StridedSlice": lambda d, s, c: (
        [values(d, (5, 6), s), _index([1, 0], c, "Index", s), _index([4, 6], c, "Index", s),
         _index([1, 2], c, "Index", s)], {"end_mask": s % 2}),
    "Tile": lambda d, s, c: ([values(d, (2, 3), s), _index([2, 1 + s % 2], c, "Tmultiples", s)],
                             {}),
    "ArgMin": lambda d, s, c: ([values(d, (4, 7), s), _index(s % 2, c, "Tidx", s)],
                               {"output_type": _pick(c, "output_type", "int64", s)}),
    "ClipByValue": lambda d, s, c: ([values(d, (3, 4), s)]
                                    + list(np.sort(values(d, (2,), s + 1))), {}),
    "Cumsum": lambda d, s, c: ([values(d, (3, 4), s), _index(s % 2, c, "Tidx", s)],
                               {"exclusive": bool(s & 1), "reverse": bool(s & 2)}),
    "Cumprod": lambda d, s, c: ([_small(d, (3, 4), s), _index(s % 2, c, "Tidx", s)],
                                {"exclusive": bool(s & 1), "reverse": bool(s & 2)}),
    "GatherNd": lambda d, s, c: (
        [values(d, (4, 5, 2), s),
         _index(_rng(s).integers(0, (4, 5), (3, 2)), c, "Tindices", s)], {}),
    "LeakyRelu": lambda d, s, c: ([values(d, (3, 4), s)], {"alpha": 0.1 + 0.1 * (s % 3)}),
    "OneHot": lambda d, s, c: (
        [_index(_rng(s).integers(-1, 5, (2, 3)), c, "TI", s), np.array(4, np.int32)]
        + list(values(d, (2,), s + 1)), {"axis": s % 3 - 1}),
    "PadV2": lambda d, s, c: ([values(d, (2, 3), s), _index([[1, 0], [2, 1]], c, "Tpaddings", s),
                               values(d, (), s + 1)], {}),
    "ReverseV2": lambda d, s, c: ([values(d, (2, 3, 4), s), _index([0, 2] if s % 2 else [1], c,
                                                                   "Tidx", s)], {}),
    "Size": lambda d, s, c: ([values(d, (2, 3, 4), s)], {"out_type": _pick(c, "out_type",
                                                                           "int32", s)}),
    "Unpack": lambda d, s, c: ([values(d, (3, 4), s)], {"num": 4 if s % 2 else 3,
                                                        "axis": s % 2}),
    "Where": lambda d, s, c: ([_with_zeros(d, (3, 4), s)], {}),
    # Random ops: a shape, seeds and the output type (the check compares the outputs'
    # shapes, types and ranges, see the conformance suite's RANDOM_RANGES).
    "RandomUniform": lambda d, s, c: _random("stateful", d, s, c),
    "RandomStandardNormal": lambda d, s, c: _random("stateful", d, s, c),
    "TruncatedNormal": lambda d, s, c: _random("stateful", d, s, c),
    "StatelessRandomUniform": lambda d, s, c: _random("stateless", d, s, c),
    "StatelessRandomNormal": lambda d, s, c: _random("stateless", d, s, c),
    "StatelessTruncatedNormal": lambda d, s, c: _random("stateless", d, s, c),
    "RandomUniformInt": lambda d, s, c: (
        [_index([2, 3 + s % 3], c, "T", s)]
        + [np.array(v, _pick(c, "Tout", "int64", s).numpy_dtype) for v in (-5 * s, 7)],
        {"seed": 11 + s, "seed2": 3}),
    # The variable ops: the variables' values after the op are compared too.
    "VarHandleOp": lambda d, s, c: ([], {"dtype": _pick(c, "dtype", "float32", s),
                                         "shape": [3, 4], "shared_name": ""}),
    "ReadVariableOp": lambda d, s, c: ([Variable(values(d, (3, 4), s))], {"dtype": d}),
    "DestroyResourceOp": lambda d, s, c: ([Variable(values(d, (3, 4), s))],
                                          {"ignore_lookup_error": bool(s % 2)}),
    "AssignVariableOp": lambda d, s, c: ([Variable(values(d, (3, 4), s)),
                                          values(d, (3, 4), s + 1)], {}),
    "AssignAddVariableOp": lambda d, s, c: ([Variable(values(d, (3, 4), s)),
                                             values(d, (3, 4), s + 1)], {}),
    "AssignSubVariableOp": lambda d, s, c: ([Variable(values(d, (3, 4), s)),
                                             values(d, (3, 4), s + 1)], {}),
    "ResourceApplyGradientDescent": lambda d, s, c: (
        [Variable(values(d, (3, 4), s)), np.array(0.1, d.numpy_dtype),
         values(d, (3, 4), s + 1)], {}),
    "ResourceApplyMomentum": lambda d, s, c: (
        [Variable(values(d, (3, 4), s)), Variable(values(d, (3, 4), s + 1)),
         np.array(0.1, d.numpy_dtype), values(d, (3, 4), s + 2),
         np.array(0.9, d.numpy_dtype)], {"use_nesterov": bool(s % 2)}),
    "ResourceApplyKerasMomentum": lambda d, s, c: (
        [Variable(values(d, (3, 4), s)), Variable(values(d, (3, 4), s + 1)),
         np.array(0.1, d.numpy_dtype), values(d, (3, 4), s + 2),
         np.array(0.9, d.numpy_dtype)], {"use_nesterov": bool(s % 2)}),
    "ResourceApplyRMSProp": lambda d, s, c: (
        [Variable(values(d, (3, 4), s)), Variable(values(d, (3, 4), s + 1, positive=True)),
         Variable(values(d, (3, 4), s + 2))]
        + [np.array(v, d.numpy_dtype) for v in (0.01, 0.9, 0.5, 1e-7)]
        + [values(d, (3, 4), s + 3)], {}),
    "ResourceApplyCenteredRMSProp": lambda d, s, c: (
        [Variable(np.zeros((3, 4), d.numpy_dtype)) if i == 1 else
         Variable(values(d, (3, 4), s + i, positive=i == 2)) for i in range(4)]
        + [np.array(v, d.numpy_dtype) for v in (0.01, 0.9, 0.5, 1e-7)]
        + [values(d, (3, 4), s + 4)], {}),
    "ResourceApplyAdagradV2": lambda d, s, c: (
        [Variable(values(d, (3, 4), s)), Variable(values(d, (3, 4), s + 1, positive=True)),
         np.array(0.1, d.numpy_dtype), np.array(1e-7, d.numpy_dtype),
         values(d, (3, 4), s + 2)], {"update_slots": bool(s % 2)}),
    "ResourceApplyAdam": lambda d, s, c: (
        [Variable(values(d, (3, 4), s)), Variable(values(d, (3, 4), s + 1)),
         Variable(values(d, (3, 4), s + 2, positive=True))]
        + [np.array(v, d.numpy_dtype) for v in (0.9, 0.999, 0.01, 0.9, 0.999, 1e-7)]
        + [values(d, (3, 4), s + 3)], {"use_nesterov": bool(s % 2)}),
}

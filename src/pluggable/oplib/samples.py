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
UNARY = {"Abs", "Neg", "Square", "Exp", "Tanh", "Sigmoid", "Relu", "Relu6", "Identity",
         "ZerosLike", "OnesLike"} | UNARY_POSITIVE
BINARY = {"AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Equal", "Less", "Greater",
          "NotEqual", "LessEqual", "GreaterEqual", "Pow", "FloorDiv", "FloorMod", "DivNoNan"}
DIVIDES = {"RealDiv", "FloorDiv", "FloorMod", "DivNoNan"}
REDUCTIONS = {"Sum", "Mean", "Max", "Min", "Prod"}

def generate(op: str, dtype: DType, seed: int, constraints: Dict[str, tuple]):
    """(inputs, attrs) for ``op`` with ``dtype``, from ``seed``: NumPy arrays and the
    attributes that are not inferred from them. ``constraints`` are the kernel's type
    constraints (Cast's ``DstT`` picks the target). None for ops whose inputs need more than
    a shape and a dtype."""
    rng = _rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(1, 4)))
    if op in UNARY:
        return [values(dtype, shape, seed, op in UNARY_POSITIVE)], {}
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
        targets = constraints.get("DstT", ())
        if not targets:
            return None
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
    return None

"""Random numbers with ``tf.random``'s functions and seeds: ``uniform``, ``normal``,
``truncated_normal`` (stateful ops: each call gives new numbers), their ``stateless_*``
variants (the same ``seed`` pair gives the same numbers), and ``set_seed``.

Seeds follow TensorFlow's rules: with neither a global seed (`set_seed`) nor an op ``seed``
the numbers differ from run to run; with either, the sequence of calls repeats from run to
run, and `set_seed` starts it again. The numbers come from NumPy's Philox generator, not
TensorFlow's: the same seeds do not give TensorFlow's values.
"""
from __future__ import annotations

import itertools
import threading
from typing import Optional, Tuple

import numpy as np

from .base import dtypes as _dt
from .eager.dispatch import execute
from .base.dtypes import as_dtype
from .base.errors import InvalidArgumentError
from .tensors.placement import explicit_device, scoped_device
from .tensors.tensor import Tensor

__all__ = ["set_seed", "uniform", "normal", "truncated_normal", "stateless_uniform",
           "stateless_normal", "stateless_truncated_normal"]

_DEFAULT_GRAPH_SEED = 87654321  # TensorFlow's, for an op seed without a global seed
_state = {"global": None}
_counter = itertools.count()
_lock = threading.Lock()


def set_seed(seed) -> None:
    """Sets the global seed: the random calls that follow repeat the same sequence of
    numbers each time the program runs (or `set_seed` is called again)."""
    global _counter
    from .oplib.math import reset_random_generators

    with _lock:
        _state["global"] = None if seed is None else int(seed)
        _counter = itertools.count()
    reset_random_generators()


def _seeds(seed: Optional[int]) -> Tuple[int, int]:
    """The (seed, seed2) attributes of a stateful random op, as TensorFlow derives them."""
    global_seed = _state["global"]
    if global_seed is None and seed is None:
        return 0, 0
    if global_seed is None:
        return _DEFAULT_GRAPH_SEED, int(seed)
    if seed is None:
        with _lock:
            return global_seed, next(_counter)
    return global_seed, int(seed)


class _on:
    """``with _on(device) as where:`` runs a random function's ops on ``device`` (else the scope's
    device); ``placed(result)`` is the result there, since a device without a kernel for the
    random op itself made its numbers on the CPU (soft placement)."""

    __slots__ = ("scope", "target")

    def __init__(self, device):
        self.scope = explicit_device(device)

    def __enter__(self):
        self.scope.__enter__()
        self.target = scoped_device()
        return self

    def __exit__(self, *exc):
        return self.scope.__exit__(*exc)

    def placed(self, result: Tensor) -> Tensor:
        return result if result._device is self.target else result.to(self.target)


def _shape(shape) -> np.ndarray:
    values = np.asarray(shape.numpy() if isinstance(shape, Tensor) else shape)
    if values.size and values.dtype.kind not in "iu":
        raise InvalidArgumentError(f"shape must hold integers, got {shape!r}", call="random")
    return values.astype(np.int64).reshape(-1)


def _scaled(values: Tensor, scale, offset) -> Tensor:
    """``values * scale + offset``, skipping the ops that change nothing."""
    if not (isinstance(scale, (int, float)) and scale == 1):
        values = execute("Mul", (values, scale))[0]
    if not (isinstance(offset, (int, float)) and offset == 0):
        values = execute("AddV2", (values, offset))[0]
    return values


def _float_dtype(dtype, function: str) -> _dt.DType:
    target = as_dtype(dtype)
    if not target.is_floating:
        raise InvalidArgumentError(f"{function}: dtype {target.name} is not supported; use "
                                   f"a floating point dtype", call=function)
    return target


def uniform(shape, minval=0, maxval=None, dtype=_dt.float32, seed=None, name=None, *,
            device=None) -> Tensor:
    """Uniform numbers in [minval, maxval) (maxval 1 for floating point; required for
    integers). Each function here makes its numbers on ``device`` when given (keyword only,
    not TensorFlow's), else on the scope's device."""
    target = as_dtype(dtype)
    first, second = _seeds(seed)
    if target.is_integer and maxval is None:
        raise InvalidArgumentError("uniform: an integer dtype needs maxval", call="uniform")
    with _on(device) as where:
        if target.is_integer:
            values = execute("RandomUniformInt",
                             [_shape(shape), np.asarray(minval, target.numpy_dtype),
                              np.asarray(maxval, target.numpy_dtype)],
                             {"seed": first, "seed2": second})[0]
            return where.placed(values)
        target = _float_dtype(target, "uniform")
        values = execute("RandomUniform", [_shape(shape)],
                         {"dtype": target, "seed": first, "seed2": second})[0]
        return where.placed(_range_of(values, minval, 1 if maxval is None else maxval))


def _range_of(values: Tensor, minval, maxval) -> Tensor:
    if isinstance(minval, (int, float)) and isinstance(maxval, (int, float)):
        return _scaled(values, maxval - minval, minval)
    span = execute("Sub", (maxval, minval))[0]
    return execute("AddV2", (execute("Mul", (values, span))[0], minval))[0]


def normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None, name=None, *,
           device=None) -> Tensor:
    first, second = _seeds(seed)
    with _on(device) as where:
        values = execute("RandomStandardNormal", [_shape(shape)],
                         {"dtype": _float_dtype(dtype, "normal"), "seed": first,
                          "seed2": second})[0]
        return where.placed(_scaled(values, stddev, mean))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dt.float32, seed=None,
                     name=None, *, device=None) -> Tensor:
    """Normal numbers within two standard deviations of the mean."""
    first, second = _seeds(seed)
    with _on(device) as where:
        values = execute("TruncatedNormal", [_shape(shape)],
                         {"dtype": _float_dtype(dtype, "truncated_normal"), "seed": first,
                          "seed2": second})[0]
        return where.placed(_scaled(values, stddev, mean))


def _stateless(op: str, function: str, shape, seed, dtype, alg) -> Tensor:
    if alg not in ("auto_select", "philox", 1):
        raise InvalidArgumentError(f"{function}: alg {alg!r} is not supported; the numbers "
                                   f"come from Philox ('auto_select' or 'philox')",
                                   call=function)
    seed = np.asarray(seed.numpy() if isinstance(seed, Tensor) else seed)
    if seed.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{function}: seed must be two integers, got {seed!r}",
                                   call=function)
    return execute(op, [_shape(shape), seed.astype(np.int64)],
                   {"dtype": _float_dtype(dtype, function)})[0]


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=_dt.float32, name=None,
                      alg="auto_select", *, device=None) -> Tensor:
    """Uniform numbers in [minval, maxval) determined by ``seed`` (two integers)."""
    with _on(device) as where:
        values = _stateless("StatelessRandomUniform", "stateless_uniform", shape, seed, dtype,
                            alg)
        return where.placed(_range_of(values, minval, 1 if maxval is None else maxval))


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=_dt.float32, name=None,
                     alg="auto_select", *, device=None) -> Tensor:
    with _on(device) as where:
        values = _stateless("StatelessRandomNormal", "stateless_normal", shape, seed, dtype,
                            alg)
        return where.placed(_scaled(values, stddev, mean))


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=_dt.float32,
                               name=None, alg="auto_select", *, device=None) -> Tensor:
    with _on(device) as where:
        values = _stateless("StatelessTruncatedNormal", "stateless_truncated_normal", shape,
                            seed, dtype, alg)
        return where.placed(_scaled(values, stddev, mean))

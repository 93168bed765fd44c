"""Property-based: any attributes and shapes handed to ops (axes, permutations, target
shapes, fill sizes, reduction axes), on the XPU and on the CPU, give NumPy's answer or a
`pluggable` error class; never another exception."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

import pluggable
from pluggable import ops
from pluggable.errors import PluggableError

DEVICES = ["CPU", "xpu:0"]
WIDE = st.one_of(st.integers(-5, 5), st.integers(-2**63, 2**63 - 1))
SHAPES = st.lists(st.integers(1, 4), min_size=0, max_size=4)


def run(device, fn, want):
    """``fn()`` on ``device``: NumPy's ``want()`` when NumPy accepts the same request, else a
    pluggable error."""
    try:
        expected = want()
    except (ValueError, IndexError, TypeError, OverflowError, np.exceptions.AxisError
            if hasattr(np, "exceptions") else np.AxisError):
        expected = None
    with pluggable.device(device):
        try:
            got = fn().numpy()
        except PluggableError as exc:
            assert str(exc)
            return
    assert expected is not None, "pluggable accepted what NumPy refuses"
    np.testing.assert_array_equal(got, expected)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DEVICES), SHAPES, WIDE)
def test_argmax_axis(device, shape, axis):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    run(device, lambda: ops.argmax(x, axis=axis),
        lambda: np.argmax(x, axis=axis) if x.ndim else (_ for _ in ()).throw(ValueError()))


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DEVICES), SHAPES, st.lists(WIDE, max_size=5))
def test_reshape_to_any_shape(device, shape, target):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    run(device, lambda: ops.reshape(x, target), lambda: _numpy_reshape(x, target))


def _numpy_reshape(x, target):
    if sum(1 for n in target if n == -1) > 1 or any(n < -1 for n in target):
        raise ValueError
    return x.reshape(target)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DEVICES), SHAPES, st.lists(WIDE, max_size=5))
def test_transpose_with_any_permutation(device, shape, perm):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    run(device, lambda: ops.transpose(x, perm), lambda: _numpy_transpose(x, perm))


def _numpy_transpose(x, perm):
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError
    return np.transpose(x, perm)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DEVICES), st.lists(WIDE, max_size=4))
def test_fill_with_any_dims(device, dims):
    size = float(np.prod([float(max(n, 1)) for n in dims]))

    def want():
        if any(n < 0 for n in dims) or size > 2**48:
            raise ValueError
        return np.full(dims, 2.0, np.float32)
    if all(0 <= n for n in dims) and 2**20 < size <= 2**48:
        return  # a legal request too large to allocate in a test
    run(device, lambda: ops.fill(np.array(dims, np.int64), np.float32(2.0)), want)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DEVICES), SHAPES, st.lists(WIDE, max_size=3))
def test_reduce_sum_over_any_axes(device, shape, axes):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    run(device, lambda: ops.reduce_sum(x, axis=axes), lambda: _numpy_sum(x, axes))


def _numpy_sum(x, axes):
    if x.ndim == 0:  # TensorFlow accepts axis 0 or -1 of a scalar
        if any(a not in (0, -1) for a in axes) or len(axes) > 1:
            raise ValueError
        return x
    if any(not -x.ndim <= a < x.ndim for a in axes):
        raise ValueError
    normal = [a % x.ndim for a in axes] if x.ndim else []
    return np.sum(x, axis=tuple(sorted(set(normal))))

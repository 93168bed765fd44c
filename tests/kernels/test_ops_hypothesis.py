"""Random shapes and values: element-wise ops with NumPy broadcasting give the same result on
the XPU as on the CPU."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import pluggable
from pluggable.eager.dispatch import execute

BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Equal", "Less", "Greater"]
UNARY = ["Neg", "Abs", "Square", "Relu", "Relu6"]
DTYPES = [np.float32, np.float64, np.int32, np.int64]


def elements(dtype, nonzero=False):
    if np.issubdtype(dtype, np.integer):
        ints = st.integers(-1000, 1000)
        return ints.filter(lambda v: v != 0) if nonzero else ints
    floats = st.floats(-1e6, 1e6, allow_nan=False, width=32 if dtype == np.float32 else 64)
    return floats.filter(lambda v: v != 0) if nonzero else floats


def compare(op, arrays):
    with pluggable.device("CPU"):
        want = execute(op, arrays)[0].numpy()
    with pluggable.device("xpu:0"):
        got = execute(op, [pluggable.tensor(a, device="xpu:0") for a in arrays])[0].numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6 if got.dtype == np.float32 else 1e-13)
    else:
        np.testing.assert_array_equal(got, want)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.data(), st.sampled_from(BINARY), st.sampled_from(DTYPES),
       hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=6))
def test_binary_ops_broadcast_like_numpy(data, op, dtype, shapes):
    x = data.draw(hnp.arrays(dtype, shapes.input_shapes[0], elements=elements(dtype)))
    y = data.draw(hnp.arrays(dtype, shapes.input_shapes[1],
                             elements=elements(dtype, nonzero=op == "RealDiv")))
    compare(op, [x, y])


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data(), st.sampled_from(UNARY), st.sampled_from(DTYPES),
       hnp.array_shapes(min_dims=0, max_dims=4, max_side=7))
def test_unary_ops(data, op, dtype, shape):
    compare(op, [data.draw(hnp.arrays(dtype, shape, elements=elements(dtype)))])
